//! TLS for the metrics endpoint with rustls, from a web config's `tls_server_config`: the
//! certificate and key, client certificates, versions, cipher suites and curves, mapped from
//! Go's names (the exporter-toolkit is written in Go) to what rustls offers. A setting
//! rustls cannot honour is an error, so a web config never promises more than it gets.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use rustls::crypto::{CryptoProvider, SupportedKxGroup, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::version::{TLS12, TLS13};
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

use super::tls_settings::{ClientAuthType, TlsServerConfig, TlsVersion};

mod client_auth;

/// Go's TLS 1.2 cipher suite names that rustls implements (Go's short names for the
/// ChaCha20 suites included).
const TLS12_SUITES: &[(&str, SupportedCipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// TLS 1.3 suites: Go accepts their names but always offers all three; so does the agent.
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Suites Go knows that rustls deliberately lacks (CBC, RSA key exchange, RC4, 3DES).
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Go's curve names that rustls's ring provider implements.
const CURVES: &[(&str, &dyn SupportedKxGroup)] = &[
    ("X25519", ring::kx_group::X25519),
    ("CurveP256", ring::kx_group::SECP256R1),
    ("CurveP384", ring::kx_group::SECP384R1),
];

/// Curves Go knows that the agent's TLS library does not implement.
const GO_ONLY_CURVES: &[&str] = &["CurveP521", "X25519MLKEM768"];

/// Checks what can be checked without reading files: names, versions, combinations.
pub fn check(t: &TlsServerConfig) -> Result<(), String> {
    if t.cert_file.is_some() && t.cert.is_some() {
        return Err("tls_server_config.cert: give cert or cert_file, not both".into());
    }
    if t.key_file.is_some() && t.key.is_some() {
        return Err("tls_server_config.key: give key or key_file, not both".into());
    }
    if t.client_ca_file.is_some() && t.client_ca.is_some() {
        return Err(
            "tls_server_config.client_ca: give client_ca or client_ca_file, not both".into(),
        );
    }
    if t.cert_file.is_none() && t.cert.is_none() {
        return Err(
            "tls_server_config: cert_file (or cert) and key_file (or key) are both required".into(),
        );
    }
    if t.key_file.is_none() && t.key.is_none() {
        return Err("tls_server_config: key_file (or key) is required besides cert_file".into());
    }
    let has_ca = t.client_ca_file.is_some() || t.client_ca.is_some();
    let auth = t.client_auth_type;
    if has_ca && auth == ClientAuthType::NoClientCert {
        return Err("tls_server_config.client_auth_type: a client CA is configured but client_auth_type is NoClientCert (use RequireAndVerifyClientCert)".into());
    }
    if auth.verifies() && !has_ca {
        return Err(format!(
            "tls_server_config.client_auth_type: {auth:?} needs client_ca_file (the CA that signs client certificates)"
        ));
    }
    if !t.client_allowed_sans.is_empty()
        && !matches!(
            auth,
            ClientAuthType::RequireAnyClientCert | ClientAuthType::RequireAndVerifyClientCert
        )
    {
        return Err(format!(
            "tls_server_config.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert (or RequireAnyClientCert), not {auth:?}: without a required certificate there is no name to check"
        ));
    }
    versions(t)?;
    suites(t)?;
    curves(t)?;
    Ok(())
}

/// The protocol versions between min_version and max_version that rustls speaks. A minimum
/// of TLS10 or TLS11 is met by TLS 1.2: rustls speaks nothing older.
fn versions(t: &TlsServerConfig) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let min = t.min_version.unwrap_or(TlsVersion::TLS12);
    let max = t.max_version.unwrap_or(TlsVersion::TLS13);
    if max < TlsVersion::TLS12 {
        return Err(format!(
            "tls_server_config.max_version: {max:?} is not supported (the agent's TLS library, rustls, speaks TLS 1.2 and 1.3 only)"
        ));
    }
    if min > max {
        return Err("tls_server_config.min_version: above max_version".into());
    }
    Ok([(TlsVersion::TLS12, &TLS12), (TlsVersion::TLS13, &TLS13)]
        .into_iter()
        .filter(|(v, _)| (min..=max).contains(v))
        .map(|(_, p)| p)
        .collect())
}

/// The TLS 1.2 suites in the configured order (`None`: rustls's defaults).
fn suites(t: &TlsServerConfig) -> Result<Option<Vec<SupportedCipherSuite>>, String> {
    if t.cipher_suites.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in &t.cipher_suites {
        if TLS13_SUITES.contains(&name.as_str()) {
            continue;
        }
        match TLS12_SUITES.iter().find(|(n, _)| n == name) {
            Some((_, s)) if !out.contains(s) => out.push(*s),
            Some(_) => {}
            None if GO_ONLY_SUITES.contains(&name.as_str()) => {
                return Err(format!(
                    "tls_server_config.cipher_suites: {name} is not supported by the agent's TLS library (rustls has no CBC, RC4, 3DES or RSA key exchange suites); supported: {}",
                    supported_suites()
                ));
            }
            None => {
                return Err(format!(
                    "tls_server_config.cipher_suites: unknown cipher suite {name:?}; supported: {}",
                    supported_suites()
                ));
            }
        }
    }
    Ok(Some(out))
}

fn supported_suites() -> String {
    TLS12_SUITES
        .iter()
        .map(|(n, _)| *n)
        .chain(TLS13_SUITES.iter().copied())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The key exchange groups in the configured order (`None`: rustls's defaults).
fn curves(t: &TlsServerConfig) -> Result<Option<Vec<&'static dyn SupportedKxGroup>>, String> {
    if t.curve_preferences.is_empty() {
        return Ok(None);
    }
    let known = || {
        CURVES
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    t.curve_preferences
        .iter()
        .map(|name| match CURVES.iter().find(|(n, _)| n == name) {
            Some((_, g)) => Ok(*g),
            None if GO_ONLY_CURVES.contains(&name.as_str()) => Err(format!(
                "tls_server_config.curve_preferences: {name} is not supported by the agent's TLS library; supported: {}",
                known()
            )),
            None => Err(format!(
                "tls_server_config.curve_preferences: unknown curve {name:?}; supported: {}",
                known()
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// PEM from a file (relative to `base`) or inline text, for the key named `key`.
fn pem(base: &Path, file: Option<&Path>, inline: Option<&str>, key: &str) -> Result<Vec<u8>> {
    match (file, inline) {
        (Some(f), _) => {
            let path = base.join(f);
            crate::config::files::read_regular(&path, crate::config::files::MAX_FILE_BYTES)
                .map_err(|e| anyhow!("tls_server_config.{key}_file {}: {e}", path.display()))
        }
        (None, Some(text)) => Ok(text.as_bytes().to_vec()),
        (None, None) => bail!("tls_server_config: {key}_file missing"),
    }
}

/// Builds the acceptor; `base` is the directory relative paths in the web config start from.
/// `http2`: offer HTTP/2 through ALPN.
pub fn acceptor(
    t: &TlsServerConfig,
    base: &Path,
    http2: bool,
) -> Result<tokio_rustls::TlsAcceptor> {
    check(t).map_err(|e| anyhow!(e))?;
    let what = |key: &str| match (key, &t.cert_file, &t.key_file) {
        ("cert", Some(f), _) | ("key", _, Some(f)) => {
            format!("tls_server_config.{key}_file {}", base.join(f).display())
        }
        _ => format!("tls_server_config.{key}"),
    };
    let cert_pem = pem(base, t.cert_file.as_deref(), t.cert.as_deref(), "cert")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{}: no PEM certificate", what("cert")))?;
    if certs.is_empty() {
        bail!("{}: no certificate in the file", what("cert"));
    }
    let key_pem = pem(base, t.key_file.as_deref(), t.key.as_deref(), "key")?;
    if is_encrypted(&key_pem) {
        bail!(
            "{}: the key is encrypted with a passphrase; give the agent an unencrypted key (openssl pkey -in KEY -out KEY.plain)",
            what("key")
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .with_context(|| format!("{}: no PEM private key", what("key")))?;

    let mut provider: CryptoProvider = ring::default_provider();
    if let Some(tls12) = suites(t).map_err(|e| anyhow!(e))? {
        let tls13 = provider
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &TLS13);
        provider.cipher_suites = tls13.copied().chain(tls12).collect();
    }
    if let Some(groups) = curves(t).map_err(|e| anyhow!(e))? {
        provider.kx_groups = groups;
    }
    let mut versions = versions(t).map_err(|e| anyhow!(e))?;
    // cipher_suites naming TLS 1.3 suites only leave TLS 1.2 without a suite, as in Go.
    if !provider.cipher_suites.iter().any(|s| s.version() == &TLS12) {
        versions.retain(|v| *v != &TLS12);
    }
    if versions.is_empty() {
        bail!(
            "tls_server_config.cipher_suites: no TLS 1.2 suite is left and max_version excludes TLS 1.3"
        );
    }
    let provider = Arc::new(provider);
    let verifier = client_verifier(t, base, &provider)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .context("tls_server_config: versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .context("tls_server_config: certificate and key do not form a usable pair")?;
    config.ignore_client_order = t.prefer_server_cipher_suites;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The client certificate policy of `client_auth_type`, with `client_allowed_sans` on top.
fn client_verifier(
    t: &TlsServerConfig,
    base: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>> {
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ClientCertVerifier> = match t.client_auth_type {
        ClientAuthType::NoClientCert => return Ok(WebPkiClientVerifier::no_client_auth()),
        ClientAuthType::RequestClientCert => {
            Arc::new(client_auth::AnyClientCert::new(false, algorithms))
        }
        ClientAuthType::RequireAnyClientCert => {
            Arc::new(client_auth::AnyClientCert::new(true, algorithms))
        }
        kind @ (ClientAuthType::VerifyClientCertIfGiven
        | ClientAuthType::RequireAndVerifyClientCert) => {
            let what = match &t.client_ca_file {
                Some(f) => format!(
                    "tls_server_config.client_ca_file {}",
                    base.join(f).display()
                ),
                None => "tls_server_config.client_ca".into(),
            };
            let ca_pem = pem(
                base,
                t.client_ca_file.as_deref(),
                t.client_ca.as_deref(),
                "client_ca",
            )?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&ca_pem) {
                let cert = cert.with_context(|| format!("{what}: not PEM certificates"))?;
                roots
                    .add(cert)
                    .with_context(|| format!("{what}: not a usable CA certificate"))?;
            }
            if roots.is_empty() {
                bail!("{what}: no certificate in it");
            }
            let builder =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let builder = if kind == ClientAuthType::VerifyClientCertIfGiven {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            builder
                .build()
                .with_context(|| format!("{what}: cannot verify clients with it"))?
        }
    };
    Ok(if t.client_allowed_sans.is_empty() {
        verifier
    } else {
        Arc::new(client_auth::AllowedSans::new(
            verifier,
            t.client_allowed_sans.clone(),
        ))
    })
}

/// A PKCS#8 encrypted key, or a traditional PEM key with a passphrase.
fn is_encrypted(pem: &[u8]) -> bool {
    let text = String::from_utf8_lossy(pem);
    text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || text.contains("Proc-Type: 4,ENCRYPTED")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `tls_server_config` of a web config, checked as the file's parser checks it (what
    /// the parser answers to settings that cannot work is tested in `config`).
    fn tls(extra: &str) -> TlsServerConfig {
        #[derive(serde::Deserialize)]
        struct File {
            tls_server_config: TlsServerConfig,
        }
        let text = format!("tls_server_config:\n  cert_file: a\n  key_file: b\n{extra}");
        let t = serde_yaml_ng::from_str::<File>(&text)
            .unwrap_or_else(|e| panic!("{e}"))
            .tls_server_config;
        check(&t).unwrap_or_else(|e| panic!("{e}"));
        t
    }

    #[test]
    fn encrypted_keys_are_recognised() {
        assert!(is_encrypted(
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n"
        ));
        assert!(is_encrypted(
            b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n"
        ));
        assert!(!is_encrypted(
            b"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
        ));
    }

    #[test]
    fn go_cipher_suite_names_map_to_rustls() {
        let t = tls(
            "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305\n    - TLS_AES_128_GCM_SHA256\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n",
        );
        assert_eq!(
            suites(&t).unwrap().unwrap(),
            [
                ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
                ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            ]
        );
    }

    #[test]
    fn curves_and_versions() {
        let t = tls("  curve_preferences: [CurveP384, X25519]\n  min_version: TLS10\n");
        let names: Vec<_> = curves(&t)
            .unwrap()
            .unwrap()
            .iter()
            .map(|g| g.name())
            .collect();
        assert_eq!(
            names,
            [rustls::NamedGroup::secp384r1, rustls::NamedGroup::X25519]
        );
        // A minimum below TLS 1.2 is met by TLS 1.2.
        assert_eq!(versions(&t).unwrap(), [&TLS12, &TLS13]);
        let t = tls("  max_version: TLS12\n");
        assert_eq!(versions(&t).unwrap(), [&TLS12]);
    }

    #[test]
    fn client_auth_combinations_that_work_are_accepted() {
        tls("  client_auth_type: RequireAnyClientCert\n  client_allowed_sans: [a]\n");
        tls("  client_auth_type: RequestClientCert\n");
    }
}
