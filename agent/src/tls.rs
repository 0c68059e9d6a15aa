//! TLS for the metrics endpoint with rustls: a certificate chain and key from PEM files.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::version::{TLS12, TLS13};

use crate::web_config::{TlsServerConfig, TlsVersion};

/// Builds the acceptor; `base` is the directory relative paths in the web config start from.
pub fn acceptor(t: &TlsServerConfig, base: &Path) -> Result<tokio_rustls::TlsAcceptor> {
    let cert_path = base.join(&t.cert_file);
    let key_path = base.join(&t.key_file);
    let read = |key: &str, path: &Path| {
        crate::files::read_capped(path, crate::files::MAX_FILE_BYTES)
            .map_err(|e| anyhow::anyhow!("tls_server_config.{key} {}: {e}", path.display()))
    };
    let cert_pem = read("cert_file", &cert_path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "tls_server_config.cert_file {}: no PEM certificate",
                cert_path.display()
            )
        })?;
    if certs.is_empty() {
        bail!(
            "tls_server_config.cert_file {}: no certificate in the file",
            cert_path.display()
        );
    }
    let key_pem = read("key_file", &key_path)?;
    if is_encrypted(&key_pem) {
        bail!(
            "tls_server_config.key_file {}: the key is encrypted with a passphrase; give the agent an unencrypted key (openssl pkey -in KEY -out KEY.plain)",
            key_path.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).with_context(|| {
        format!(
            "tls_server_config.key_file {}: no PEM private key",
            key_path.display()
        )
    })?;
    let min = t.min_version.unwrap_or(TlsVersion::TLS12);
    let max = t.max_version.unwrap_or(TlsVersion::TLS13);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(TlsVersion::TLS12, &TLS12), (TlsVersion::TLS13, &TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("tls_server_config: certificate and key do not form a usable pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A PKCS#8 encrypted key, or a traditional PEM key with a passphrase.
fn is_encrypted(pem: &[u8]) -> bool {
    let text = String::from_utf8_lossy(pem);
    text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.contains("Proc-Type: 4,ENCRYPTED")
}

#[cfg(test)]
mod tests {
    #[test]
    fn encrypted_keys_are_recognised() {
        assert!(super::is_encrypted(
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n"
        ));
        assert!(super::is_encrypted(
            b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n"
        ));
        assert!(!super::is_encrypted(
            b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
        ));
    }
}
