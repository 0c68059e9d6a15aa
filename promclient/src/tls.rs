//! How loadgen trusts and authenticates to an https server: the files named by the
//! `--agent-*` and `--prometheus-*` flags, read once before anything runs, so that an
//! unreadable or empty file is a usage error naming the flag and the file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

/// The flags of one client (`--agent-ca-file`, …), as given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientFiles {
    /// CA certificates (PEM) that verify the server, instead of the Mozilla roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM, chain) and its key, for servers that require mutual TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// Accept any server certificate. Never the default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
    /// A file whose content (trimmed) is sent as `Authorization: Bearer …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_file: Option<PathBuf>,
}

/// What a client is built from: the files' contents.
#[derive(Clone, Debug, Default)]
pub struct ClientConfig {
    /// None: the Mozilla roots.
    pub roots: Option<Vec<Certificate<'static>>>,
    pub identity: Option<ClientCert>,
    pub insecure_skip_verify: bool,
    pub bearer_token: Option<String>,
}

impl ClientFiles {
    /// Reads every file; `flag` is the flags' prefix (`--agent`) for the messages.
    pub fn load(&self, flag: &str) -> Result<ClientConfig, String> {
        if self.insecure_skip_verify && self.ca_file.is_some() {
            return Err(format!(
                "{flag}-insecure-skip-verify and {flag}-ca-file contradict each other: give one"
            ));
        }
        let roots = match &self.ca_file {
            None => None,
            Some(p) => {
                let what = format!("{flag}-ca-file {}", p.display());
                Some(certificates(&read(p, &what)?, &what)?)
            }
        };
        let identity = match (&self.cert_file, &self.key_file) {
            (None, None) => None,
            (Some(c), Some(k)) => {
                let what = format!("{flag}-cert-file {}", c.display());
                let chain = certificates(&read(c, &what)?, &what)?;
                let what = format!("{flag}-key-file {}", k.display());
                Some(ClientCert::new_with_certs(
                    &chain,
                    private_key(&read(k, &what)?, &what)?,
                ))
            }
            (Some(_), None) => return Err(format!("{flag}-cert-file needs {flag}-key-file")),
            (None, Some(_)) => return Err(format!("{flag}-key-file needs {flag}-cert-file")),
        };
        let bearer_token = match &self.bearer_token_file {
            None => None,
            Some(p) => {
                let what = format!("{flag}-bearer-token-file {}", p.display());
                let text =
                    String::from_utf8(read(p, &what)?).map_err(|_| format!("{what}: not text"))?;
                let token = text.trim();
                if token.is_empty() || token.contains(['\r', '\n']) {
                    return Err(format!("{what}: expected one line holding the token"));
                }
                Some(token.to_string())
            }
        };
        Ok(ClientConfig {
            roots,
            identity,
            insecure_skip_verify: self.insecure_skip_verify,
            bearer_token,
        })
    }
}

impl ClientConfig {
    /// A client that trusts only the CA certificates in `pem`.
    pub fn trusting(pem: &[u8]) -> Result<ClientConfig, String> {
        Ok(ClientConfig {
            roots: Some(certificates(pem, "CA PEM")?),
            ..ClientConfig::default()
        })
    }

    pub(super) fn tls(&self) -> TlsConfig {
        let mut b = TlsConfig::builder()
            .client_cert(self.identity.clone())
            .disable_verification(self.insecure_skip_verify);
        if let Some(roots) = &self.roots {
            b = b.root_certs(RootCerts::new_with_certs(roots));
        }
        b.build()
    }
}

/// The most a certificate, key or token file may hold.
const MAX_FILE: u64 = 1 << 20;

/// A file or a pipe, at most [`MAX_FILE`] bytes: `/dev/zero` or a directory by mistake is
/// a one-line error, not a read until the memory runs out.
fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{what}: cannot read it: {e}"))?;
    let t = meta.file_type();
    if t.is_dir() || t.is_char_device() || t.is_block_device() || t.is_socket() {
        return Err(format!("{what}: not a file"));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("{what}: cannot read it: {e}"))?;
    let mut data = Vec::new();
    f.take(MAX_FILE + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("{what}: cannot read it: {e}"))?;
    if data.len() as u64 > MAX_FILE {
        return Err(format!("{what}: holds more than {MAX_FILE} bytes"));
    }
    Ok(data)
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, String> {
    let mut out = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        if let PemItem::Certificate(c) = item.map_err(|e| format!("{what}: not PEM: {e}"))? {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(format!("{what}: holds no PEM certificate"));
    }
    Ok(out)
}

fn private_key(pem: &[u8], what: &str) -> Result<PrivateKey<'static>, String> {
    for item in ureq::tls::parse_pem(pem) {
        if let PemItem::PrivateKey(k) = item.map_err(|e| format!("{what}: not PEM: {e}"))? {
            return Ok(k);
        }
    }
    Err(format!("{what}: holds no PEM private key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("loadgen-tls-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn bad_files_are_named_in_one_line() {
        let missing = PathBuf::from("/nonexistent/ca.pem");
        let e = ClientFiles {
            ca_file: Some(missing),
            ..Default::default()
        }
        .load("--agent")
        .unwrap_err();
        assert!(
            e.starts_with("--agent-ca-file /nonexistent/ca.pem: cannot read it:"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        let garbage = scratch("garbage", "not a certificate\n");
        let e = ClientFiles {
            ca_file: Some(garbage.clone()),
            ..Default::default()
        }
        .load("--prometheus")
        .unwrap_err();
        assert_eq!(
            e,
            format!(
                "--prometheus-ca-file {}: holds no PEM certificate",
                garbage.display()
            )
        );
        let e = ClientFiles {
            cert_file: Some(garbage.clone()),
            ..Default::default()
        }
        .load("--agent")
        .unwrap_err();
        assert_eq!(e, "--agent-cert-file needs --agent-key-file");
        let e = ClientFiles {
            insecure_skip_verify: true,
            ca_file: Some(garbage.clone()),
            ..Default::default()
        }
        .load("--agent")
        .unwrap_err();
        assert!(e.contains("contradict"), "{e}");
        let _ = std::fs::remove_file(garbage);
        for dev in ["/dev/zero", "/"] {
            let e = ClientFiles {
                bearer_token_file: Some(dev.into()),
                ..Default::default()
            }
            .load("--prometheus")
            .unwrap_err();
            assert!(e.ends_with("not a file"), "{dev}: {e}");
        }
        let big = scratch("big", &"x".repeat(2 << 20));
        let e = ClientFiles {
            ca_file: Some(big.clone()),
            ..Default::default()
        }
        .load("--agent")
        .unwrap_err();
        assert!(e.contains("holds more than"), "{e}");
        let _ = std::fs::remove_file(big);
    }

    #[test]
    fn the_bearer_token_is_the_trimmed_file() {
        let f = scratch("token", "  abc.def\n");
        let c = ClientFiles {
            bearer_token_file: Some(f.clone()),
            ..Default::default()
        }
        .load("--agent")
        .unwrap();
        assert_eq!(c.bearer_token.as_deref(), Some("abc.def"));
        std::fs::write(&f, "a\nb\n").unwrap();
        let e = ClientFiles {
            bearer_token_file: Some(f.clone()),
            ..Default::default()
        }
        .load("--agent")
        .unwrap_err();
        assert!(e.ends_with("expected one line holding the token"), "{e}");
        let _ = std::fs::remove_file(f);
    }
}
