//! The HTTP client against an https server on loopback that requires a client
//! certificate (mutual TLS, as an agent or a proxy in front of Prometheus may): the
//! certificate and key from `--*-cert-file`/`--*-key-file` get the answer, a client
//! without them or trusting another CA gets a TLS error, not a panic.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use promclient::{Client, ClientFiles, ErrorKind, Scheme, Url};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
    server: (CertificateDer<'static>, KeyPair),
}

fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, the CA and the
/// client's as PEM files.
fn pki(tag: &str) -> Pki {
    let dir = std::env::temp_dir().join(format!("loadgen-mtls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = ca();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["loadgen".to_string()]).unwrap();
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client = p.signed_by(&client_key, &ca).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("client.crt"), client.pem()).unwrap();
    std::fs::write(dir.join("client.key"), client_key.serialize_pem()).unwrap();
    Pki {
        dir,
        ca: ca.der().clone(),
        server: (server.der().clone(), server_key),
    }
}

/// Serves `clients` connections over TLS that requires a certificate signed by the CA;
/// each answered request gets `ok`.
fn serve(pki: &Pki, clients: usize) -> (Url, std::thread::JoinHandle<()>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server.1.serialize_der()));
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![pki.server.0.clone()], key)
            .unwrap(),
    );
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Url::of(Scheme::Https, l.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        for _ in 0..clients {
            let (sock, _) = l.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            // A refused client ends the handshake here, with an error: the next one comes.
            while !req.ends_with(b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
            if req.ends_with(b"\r\n\r\n") {
                let _ = tls.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        }
    });
    (url, t)
}

fn get(files: &ClientFiles, url: &Url) -> Result<(u16, String), promclient::Error> {
    let client = Client::new(&files.load("--agent").unwrap());
    client
        .get(url, "/metrics", &[], Duration::from_secs(10), 1 << 20)
        .map(|r| (r.status, r.body))
}

#[test]
fn a_client_certificate_opens_a_server_that_requires_one() {
    let pki = pki("mtls");
    let other = pki_dir_ca("other");
    let (url, server) = serve(&pki, 3);
    let with_cert = ClientFiles {
        ca_file: Some(pki.dir.join("ca.pem")),
        cert_file: Some(pki.dir.join("client.crt")),
        key_file: Some(pki.dir.join("client.key")),
        ..ClientFiles::default()
    };
    assert_eq!(get(&with_cert, &url).unwrap(), (200, "ok".to_string()));

    let without = ClientFiles {
        ca_file: Some(pki.dir.join("ca.pem")),
        ..ClientFiles::default()
    };
    let e = get(&without, &url).unwrap_err();
    println!("without a client certificate: {e}");
    assert_eq!(e.kind, ErrorKind::Tls, "{e}");

    // The right client certificate does not make an untrusted server trusted.
    let wrong_ca = ClientFiles {
        ca_file: Some(other.join("ca.pem")),
        ..with_cert
    };
    let e = get(&wrong_ca, &url).unwrap_err();
    println!("trusting another CA: {e}");
    assert_eq!(e.kind, ErrorKind::Tls, "{e}");
    assert!(e.message.contains("invalid peer certificate"), "{e}");
    server.join().unwrap();
    let _ = std::fs::remove_dir_all(&pki.dir);
    let _ = std::fs::remove_dir_all(&other);
}

/// A directory holding only `ca.pem` of another CA.
fn pki_dir_ca(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadgen-mtls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca().pem()).unwrap();
    dir
}
