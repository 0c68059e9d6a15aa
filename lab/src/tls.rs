//! A throw-away certificate authority and server certificate for TLS tests, and an HTTPS
//! client that trusts only that authority.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use promclient::{Client, ClientConfig, Scheme, Url};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// A CA and a server certificate for 127.0.0.1 and localhost, as PEM files in a temporary
/// directory that is removed on drop; the CA also signs client certificates.
pub struct TestPki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TestPki {
    pub fn generate(tag: &str) -> Result<TestPki> {
        let dir = std::env::temp_dir().join(format!("stornet-pki-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?
            .signed_by(&key, &ca)?;
        let pki = TestPki {
            ca_pem: ca.pem(),
            ca,
            ca_file: dir.join("ca.pem"),
            cert_file: dir.join("server.crt"),
            key_file: dir.join("server.key"),
            dir,
        };
        std::fs::write(&pki.ca_file, &pki.ca_pem)?;
        std::fs::write(&pki.cert_file, cert.pem())?;
        std::fs::write(&pki.key_file, key.serialize_pem())?;
        Ok(pki)
    }
}

/// A client certificate and its key, as PEM.
pub struct ClientCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestPki {
    /// A client certificate signed by this CA, with `san` as its subject alternative name
    /// (a DNS name, or an IP address when it parses as one).
    pub fn client(&self, san: &str) -> Result<ClientCert> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![san.to_string()])?;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(ClientCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// GET over TLS, verifying the server against `ca_pem`; returns (status, body).
pub fn https_get(
    addr: SocketAddr,
    path: &str,
    ca_pem: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    let client =
        Client::new(&ClientConfig::trusting(ca_pem.as_bytes()).map_err(anyhow::Error::msg)?);
    crate::metrics::get(&client, &Url::of(Scheme::Https, addr), path, headers)
}

/// A TLS connection to `addr` that trusts only `ca_pem`, presenting `client` if given and
/// offering the `alpn` protocols; the handshake is complete when it returns.
pub fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<&ClientCert>,
    alpn: &[&[u8]],
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.context("CA PEM")?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => builder.with_client_auth_cert(
            CertificateDer::pem_slice_iter(c.cert_pem.as_bytes()).collect::<Result<_, _>>()?,
            rustls::pki_types::PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes())?,
        )?,
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let conn =
        rustls::ClientConnection::new(Arc::new(config), ServerName::IpAddress(addr.ip().into()))?;
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut conn = conn;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).context("TLS handshake")?;
    }
    Ok(rustls::StreamOwned::new(conn, sock))
}

/// GET over TLS as `client` (a client certificate), verifying the server against `ca_pem`.
/// A server that refuses the certificate makes this an error (in TLS 1.3 the refusal may come
/// with the first read rather than the handshake).
pub fn https_get_as(
    addr: SocketAddr,
    path: &str,
    ca_pem: &str,
    client: Option<&ClientCert>,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    // The shared client reads its certificates from files, as loadgen's flags name them.
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "stornet-client-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    let file = |name: &str, text: &str| -> Result<PathBuf> {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        Ok(p)
    };
    let files = promclient::ClientFiles {
        ca_file: Some(file("ca.pem", ca_pem)?),
        cert_file: client
            .map(|c| file("client.crt", &c.cert_pem))
            .transpose()?,
        key_file: client.map(|c| file("client.key", &c.key_pem)).transpose()?,
        ..Default::default()
    };
    let config = files.load("--test").map_err(anyhow::Error::msg);
    let _ = std::fs::remove_dir_all(&dir);
    let client = Client::new(&config?);
    crate::metrics::get(&client, &Url::of(Scheme::Https, addr), path, headers)
}
