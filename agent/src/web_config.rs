//! `--web.config.file`: TLS and basic auth in the YAML format of the Prometheus
//! exporter-toolkit, so scrape configs written for other exporters work unchanged:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt     # relative to this file's directory
//!   key_file: server.key
//!   min_version: TLS12        # TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...    # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::auth::BasicAuth;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfigFile {
    pub tls_server_config: Option<TlsServerConfig>,
    /// User name → bcrypt hash.
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub min_version: Option<TlsVersion>,
    #[serde(default)]
    pub max_version: Option<TlsVersion>,
    /// Only `NoClientCert` is supported.
    #[serde(default)]
    pub client_auth_type: Option<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    TLS12,
    TLS13,
}

/// What the server needs from a web config: a TLS acceptor and the users allowed in.
#[derive(Clone, Default)]
pub struct WebConfig {
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub auth: Option<Arc<BasicAuth>>,
}

impl WebConfig {
    /// Reads and checks the file; every problem is one line naming the file (and line).
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let at = |msg: String| format!("web config file {}: {msg}", path.display());
        let text = crate::files::read_text(path, crate::files::MAX_FILE_BYTES).map_err(at)?;
        let file = parse(&text).map_err(at)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let tls = match &file.tls_server_config {
            None => None,
            Some(t) => Some(crate::tls::acceptor(t, base).map_err(|e| at(format!("{e:#}")))?),
        };
        let costs: std::collections::BTreeSet<u32> = file
            .basic_auth_users
            .values()
            .filter_map(|h| crate::auth::cost(h))
            .collect();
        if costs.len() > 1 {
            // Unknown users take as long as the dearest hash; a cheaper user answers sooner.
            tracing::warn!(
                file = %path.display(),
                costs = ?costs,
                "basic_auth_users have hashes of different bcrypt costs: answer times tell which users exist; give them one cost"
            );
        }
        let auth = if file.basic_auth_users.is_empty() {
            None
        } else {
            Some(Arc::new(BasicAuth::new(file.basic_auth_users.clone())))
        };
        Ok(WebConfig { tls, auth })
    }
}

/// Parses the YAML and checks hashes and TLS settings (not the files they name).
pub fn parse(text: &str) -> Result<WebConfigFile, String> {
    let file: WebConfigFile = if text.trim().is_empty() {
        WebConfigFile::default()
    } else {
        serde_yaml_ng::from_str::<Option<WebConfigFile>>(text)
            .map_err(|e| one_line(&e.to_string()))?
            .unwrap_or_default()
    };
    for (user, hash) in &file.basic_auth_users {
        match crate::auth::cost(hash) {
            None => {
                return Err(format!(
                    "basic_auth_users.{user}: not a bcrypt hash (generate one with htpasswd -nBC 10 {user})"
                ));
            }
            // Every request of a new client pays for one check: a cost this high lets any
            // client keep the agent busy, and cost 31 takes days.
            Some(c) if c > crate::auth::MAX_COST => {
                return Err(format!(
                    "basic_auth_users.{user}: bcrypt cost {c} is above {}, too slow to check on every new client (generate a hash with htpasswd -nBC 10 {user})",
                    crate::auth::MAX_COST
                ));
            }
            Some(_) => {}
        }
    }
    if let Some(t) = &file.tls_server_config {
        if t.cert_file.as_os_str().is_empty() || t.key_file.as_os_str().is_empty() {
            return Err("tls_server_config: cert_file and key_file are both required".into());
        }
        if let (Some(min), Some(max)) = (t.min_version, t.max_version)
            && min > max
        {
            return Err("tls_server_config: min_version is above max_version".into());
        }
        if let Some(c) = &t.client_auth_type
            && c != "NoClientCert"
        {
            return Err(format!(
                "tls_server_config.client_auth_type: {c:?} is not supported (only NoClientCert)"
            ));
        }
    }
    Ok(file)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_exporter_toolkit_format() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let f = parse(&format!(
            "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  min_version: TLS13\n\
             basic_auth_users:\n  prom: '{hash}'\n"
        ))
        .unwrap();
        let t = f.tls_server_config.unwrap();
        assert_eq!(t.cert_file, PathBuf::from("a.crt"));
        assert_eq!(t.min_version, Some(TlsVersion::TLS13));
        assert_eq!(f.basic_auth_users["prom"], hash);
        assert_eq!(parse("").unwrap(), WebConfigFile::default());
        assert_eq!(parse("# nothing\n").unwrap(), WebConfigFile::default());
    }

    #[test]
    fn rejects_mistakes_in_one_line_with_the_line() {
        let e = parse("tls_server_config:\n  cert_file: a\n  key_fil: b\n").unwrap_err();
        assert!(e.contains("key_fil") && e.contains("line 3"), "{e}");
        assert!(!e.contains('\n'));
        let e = parse("basic_auth_users:\n  prom: plain\n").unwrap_err();
        assert!(e.contains("basic_auth_users.prom"), "{e}");
        // A cost-31 hash (bcrypt's maximum) would take days per check.
        let slow = bcrypt::hash("pw", 4).unwrap().replacen("$04$", "$31$", 1);
        let e = parse(&format!("basic_auth_users:\n  prom: '{slow}'\n")).unwrap_err();
        assert!(
            e.contains("basic_auth_users.prom") && e.contains("cost 31"),
            "{e}"
        );
        let e = parse(&format!(
            "basic_auth_users:\n  prom: '{}'\n",
            slow.replacen("$31$", "$15$", 1)
        ))
        .unwrap_err();
        assert!(e.contains("cost 15 is above 14"), "{e}");
        let ok = slow.replacen("$31$", "$14$", 1);
        assert!(parse(&format!("basic_auth_users:\n  prom: '{ok}'\n")).is_ok());
        let e = parse("tls_server_config:\n  cert_file: a\n").unwrap_err();
        assert!(e.contains("key_file"), "{e}");
        let e = parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
        )
        .unwrap_err();
        assert!(e.contains("client_auth_type"), "{e}");
        let e = parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n")
            .unwrap_err();
        assert!(e.contains("min_version") || e.contains("TLS11"), "{e}");
    }
}
