//! A throw-away certificate authority and server certificate for TLS tests, and an HTTPS
//! client that trusts only that authority.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use loadgen::http::{Client, ClientConfig, Scheme, Url};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A CA and a server certificate for 127.0.0.1 and localhost, as PEM files in a temporary
/// directory that is removed on drop.
pub struct TestPki {
    pub dir: PathBuf,
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
