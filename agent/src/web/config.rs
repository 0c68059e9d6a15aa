//! `--web.config.file`: TLS, client certificates, HTTP headers, rate limit and basic auth in
//! the YAML format of the Prometheus exporter-toolkit (the `--web.config.file` of
//! node_exporter), so a file written for another exporter works unchanged. Every key of that
//! format is read; what the agent's TLS library (rustls) cannot do is refused with a line
//! that says so, never ignored. The mapping is documented in docs/operations.md.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt     # relative to this file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert
//!   client_ca_file: ca.crt
//! http_server_config:
//!   headers:
//!     Strict-Transport-Security: max-age=31536000
//! basic_auth_users:
//!   prometheus: $2y$10$...    # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::auth::BasicAuth;
use super::rate_limit::RateLimit;
use super::tls_settings::TlsServerConfig;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfigFile {
    pub tls_server_config: Option<TlsServerConfig>,
    pub http_server_config: HttpServerConfig,
    pub rate_limit: RateLimitConfig,
    /// User name → bcrypt hash.
    pub basic_auth_users: BTreeMap<String, String>,
    /// Paths answered without basic auth (e.g. `/-/healthy` for a load balancer).
    pub basic_auth_excluded_paths: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpServerConfig {
    /// Offer HTTP/2 (over TLS only, through ALPN, as Go's server does).
    pub http2: bool,
    pub headers: BTreeMap<String, String>,
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        HttpServerConfig {
            http2: true,
            headers: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Go duration between two requests (`0` or absent: no limit).
    pub interval: Option<String>,
    /// Requests allowed at once beyond the steady rate.
    pub burst: u32,
}

/// The response headers the exporter-toolkit lets a web config set, and the values it allows
/// (`None`: any value).
const HEADERS: &[(&str, Option<&[&str]>)] = &[
    ("Strict-Transport-Security", None),
    ("X-Content-Type-Options", Some(&["nosniff"])),
    ("X-Frame-Options", Some(&["deny", "sameorigin"])),
    ("X-XSS-Protection", None),
    ("Content-Security-Policy", None),
];

/// What a web config protects the metrics with. A config read again while the agent serves
/// is applied only if it keeps all of it: a file caught empty or cut short in the middle of
/// a rewrite must never switch TLS or basic auth off (turning them off takes a restart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    pub tls: bool,
    /// A client certificate is required / checked against the client CA / its names are.
    pub client_cert_required: bool,
    pub client_cert_verified: bool,
    pub client_sans_checked: bool,
    pub basic_auth: bool,
}

impl Protection {
    pub fn of(file: &WebConfigFile) -> Protection {
        use super::tls_settings::ClientAuthType::*;
        let t = file.tls_server_config.as_ref();
        let auth = t.map(|t| t.client_auth_type);
        Protection {
            tls: t.is_some(),
            client_cert_required: matches!(
                auth,
                Some(RequireAnyClientCert | RequireAndVerifyClientCert)
            ),
            client_cert_verified: auth.is_some_and(|a| a.verifies()),
            client_sans_checked: t.is_some_and(|t| !t.client_allowed_sans.is_empty()),
            basic_auth: !file.basic_auth_users.is_empty(),
        }
    }

    /// What `self` gives up of `before`, if anything.
    pub fn dropped_from(&self, before: &Protection) -> Option<&'static str> {
        [
            (before.tls && !self.tls, "TLS"),
            (
                before.client_cert_required && !self.client_cert_required,
                "required client certificates",
            ),
            (
                before.client_cert_verified && !self.client_cert_verified,
                "the check of client certificates",
            ),
            (
                before.client_sans_checked && !self.client_sans_checked,
                "client_allowed_sans",
            ),
            (before.basic_auth && !self.basic_auth, "basic auth"),
        ]
        .into_iter()
        .find(|(off, _)| *off)
        .map(|(_, what)| what)
    }
}

/// What the server needs from a web config: a TLS acceptor, the users allowed in, headers.
#[derive(Clone, Default)]
pub struct WebConfig {
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    pub auth: Option<Arc<BasicAuth>>,
    pub auth_excluded_paths: Vec<String>,
    pub headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    pub rate_limit: Option<Arc<RateLimit>>,
    /// The files the config was built from (the config file, certificates, keys, CAs).
    pub files: Vec<PathBuf>,
    pub protection: Protection,
}

impl WebConfig {
    /// Reads and checks the file; every problem is one line naming the file (and line).
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let at = |msg: String| format!("web config file {}: {msg}", path.display());
        let bytes = crate::config::files::read_regular(path, crate::config::files::MAX_FILE_BYTES)
            .map_err(at)?;
        let text = String::from_utf8(bytes).map_err(|_| at("is not UTF-8 text".into()))?;
        let file = parse(&text).map_err(at)?;
        let protection = Protection::of(&file);
        let base = path.parent().unwrap_or(Path::new("."));
        let mut files = vec![path.to_path_buf()];
        let tls = match &file.tls_server_config {
            None => None,
            Some(t) => {
                files.extend(
                    [&t.cert_file, &t.key_file, &t.client_ca_file]
                        .into_iter()
                        .flatten()
                        .map(|f| base.join(f)),
                );
                let acceptor = super::tls::acceptor(t, base, file.http_server_config.http2)
                    .map_err(|e| at(one_line(&with_line(&text, &format!("{e:#}")))))?;
                Some(acceptor)
            }
        };
        let costs: std::collections::BTreeSet<u32> = file
            .basic_auth_users
            .values()
            .filter_map(|h| super::auth::cost(h))
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
        let headers = file
            .http_server_config
            .headers
            .iter()
            .map(|(k, v)| {
                Ok((
                    hyper::header::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| e.to_string())?,
                    hyper::header::HeaderValue::from_str(v).map_err(|e| e.to_string())?,
                ))
            })
            .collect::<Result<_, String>>()
            .map_err(|e| at(format!("http_server_config.headers: {e}")))?;
        let rate_limit = rate_interval(&file.rate_limit)
            .map_err(at)?
            .map(|every| Arc::new(RateLimit::new(every, file.rate_limit.burst)));
        Ok(WebConfig {
            tls,
            auth,
            auth_excluded_paths: file.basic_auth_excluded_paths,
            headers,
            rate_limit,
            files,
            protection,
        })
    }
}

/// Parses the YAML and checks every value that needs no file: hashes, names, versions.
pub fn parse(text: &str) -> Result<WebConfigFile, String> {
    let file: WebConfigFile = if text.trim().is_empty() {
        WebConfigFile::default()
    } else {
        serde_yaml_ng::from_str::<Option<WebConfigFile>>(text)
            .map_err(|e| one_line(&e.to_string()))?
            .unwrap_or_default()
    };
    // Names from the file (a user, a header) may hold line breaks: the report stays one line.
    check(&file).map_err(|e| one_line(&with_line(text, &e)))?;
    Ok(file)
}

fn check(file: &WebConfigFile) -> Result<(), String> {
    for (user, hash) in &file.basic_auth_users {
        match super::auth::cost(hash) {
            None => {
                return Err(format!(
                    "basic_auth_users.{user}: not a bcrypt hash (generate one with htpasswd -nBC 10 {user})"
                ));
            }
            // Every request of a new client pays for one check: a cost this high lets any
            // client keep the agent busy, and cost 31 takes days.
            Some(c) if c > super::auth::MAX_COST => {
                return Err(format!(
                    "basic_auth_users.{user}: bcrypt cost {c} is above {}, too slow to check on every new client (generate a hash with htpasswd -nBC 10 {user})",
                    super::auth::MAX_COST
                ));
            }
            Some(_) => {}
        }
    }
    for p in &file.basic_auth_excluded_paths {
        if !p.starts_with('/') {
            return Err(format!(
                "basic_auth_excluded_paths: {p:?} is not a path (it must start with /)"
            ));
        }
    }
    for (name, value) in &file.http_server_config.headers {
        let Some((_, allowed)) = HEADERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(name)) else {
            let known: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
            return Err(format!(
                "http_server_config.headers.{name}: this header can not be configured (only {})",
                known.join(", ")
            ));
        };
        if let Some(allowed) = allowed
            && !allowed.iter().any(|a| a.eq_ignore_ascii_case(value))
        {
            return Err(format!(
                "http_server_config.headers.{name}: {value:?} is not allowed (one of {})",
                allowed.join(", ")
            ));
        }
    }
    rate_interval(&file.rate_limit)?;
    if let Some(t) = &file.tls_server_config {
        super::tls::check(t)?;
    }
    Ok(())
}

/// The rate limit's interval, `None` when there is no limit.
fn rate_interval(r: &RateLimitConfig) -> Result<Option<Duration>, String> {
    let Some(text) = r.interval.as_deref() else {
        return Ok(None);
    };
    if text.trim().trim_end_matches(['s', 'm', 'h']) == "0" {
        return Ok(None);
    }
    let every = crate::config::duration::parse_duration(text)
        .map_err(|e| format!("rate_limit.interval: {e}"))?;
    if r.burst == 0 {
        return Err("rate_limit.burst: must be at least 1 when an interval is set (0 refuses every request)".into());
    }
    Ok(Some(every))
}

/// Adds the line of the first key an error names (`tls_server_config.min_version` → the line
/// of `min_version:`), found in the text since the YAML spans are gone by then.
fn with_line(text: &str, err: &str) -> String {
    if err.contains(" line ") {
        return err.to_string();
    }
    // The last part of the dotted key that is in the text, e.g. `burst:` or else `rate_limit:`.
    let path = err.split([':', ' ']).next().unwrap_or("");
    let line = path.rsplit('.').filter(|k| !k.is_empty()).find_map(|k| {
        text.lines().position(|l| {
            l.trim_start()
                .strip_prefix(k)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
    });
    match line {
        Some(n) => format!("{err} (line {})", n + 1),
        None => err.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::tls_settings::{ClientAuthType, TlsVersion};

    /// exporter-toolkit's own sample, docs/web-config.yml, byte for byte.
    const TOOLKIT_SAMPLE: &str = "# TLS and basic authentication configuration example.
#
# Additionally, a certificate and a key file are needed.
tls_server_config:
  cert_file: server.crt
  key_file: server.key

# Usernames and passwords required to connect.
# Passwords are hashed with bcrypt: https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md#about-bcrypt.
basic_auth_users:
  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze
  bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m

# Exclude /-/healthy and /-/ready from basic authentication
basic_auth_excluded_paths:
- /-/healthy
- /-/ready
";

    #[test]
    fn the_exporter_toolkit_sample_parses_unchanged() {
        let f = parse(TOOLKIT_SAMPLE).unwrap();
        let t = f.tls_server_config.unwrap();
        assert_eq!(t.cert_file, Some(PathBuf::from("server.crt")));
        assert_eq!(t.key_file, Some(PathBuf::from("server.key")));
        assert_eq!(t.client_auth_type, ClientAuthType::NoClientCert);
        assert!(t.prefer_server_cipher_suites);
        assert_eq!(f.basic_auth_users.len(), 2);
        assert!(f.basic_auth_users["alice"].starts_with("$2y$10$mDwo"));
        assert_eq!(f.basic_auth_excluded_paths, ["/-/healthy", "/-/ready"]);
        assert!(f.http_server_config.http2);
    }

    /// Every key of the format's reference (docs/web-configuration.md), with values a
    /// node_exporter operator would write.
    #[test]
    fn every_key_of_the_format_is_read() {
        let f = parse(
            "tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  client_allowed_sans:
    - scraper.example.com
    - 198.18.0.7
  min_version: TLS12
  max_version: TLS13
  cipher_suites:
    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305
  prefer_server_cipher_suites: false
  curve_preferences: [X25519, CurveP256]
http_server_config:
  http2: false
  headers:
    Content-Security-Policy: default-src 'self'
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    X-XSS-Protection: 1; mode=block
    Strict-Transport-Security: max-age=31536000; includeSubDomains
rate_limit:
  interval: 100ms
  burst: 5
basic_auth_users: {}
",
        )
        .unwrap();
        let t = f.tls_server_config.unwrap();
        assert_eq!(
            t.client_auth_type,
            ClientAuthType::RequireAndVerifyClientCert
        );
        assert_eq!(t.client_ca_file, Some(PathBuf::from("ca.crt")));
        assert_eq!(t.client_allowed_sans.len(), 2);
        assert_eq!(t.cipher_suites.len(), 2);
        assert_eq!(t.curve_preferences, ["X25519", "CurveP256"]);
        assert!(!t.prefer_server_cipher_suites);
        assert_eq!(t.max_version, Some(TlsVersion::TLS13));
        assert!(!f.http_server_config.http2);
        assert_eq!(f.http_server_config.headers.len(), 5);
        assert_eq!(
            rate_interval(&f.rate_limit).unwrap(),
            Some(Duration::from_millis(100))
        );
        // Inline PEM instead of files, and the toolkit's legacy client auth name.
        let f = parse(
            "tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n  key: k\n  client_auth_type: RequireClientCert\n",
        )
        .unwrap();
        let t = f.tls_server_config.unwrap();
        assert_eq!(t.client_auth_type, ClientAuthType::RequireAnyClientCert);
        assert!(t.cert.unwrap().starts_with("-----BEGIN"));
        assert_eq!(parse("").unwrap(), WebConfigFile::default());
        assert_eq!(parse("# nothing\n").unwrap(), WebConfigFile::default());
        assert_eq!(
            rate_interval(&parse("rate_limit:\n  interval: 0\n").unwrap().rate_limit),
            Ok(None)
        );
    }

    #[test]
    fn rejects_mistakes_in_one_line_with_the_line() {
        let e = parse("tls_server_config:\n  cert_file: a\n  key_fil: b\n").unwrap_err();
        assert!(e.contains("key_fil") && e.contains("line 3"), "{e}");
        assert!(!e.contains('\n'));
        let e = parse("http_server_config:\n  http3: true\n").unwrap_err();
        assert!(e.contains("http3") && e.contains("line 2"), "{e}");
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
        let e = parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n")
            .unwrap_err();
        assert!(e.contains("TLS14") && e.contains("line 4"), "{e}");
        let e = parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n",
        )
        .unwrap_err();
        assert!(e.contains("Sometimes") && e.contains("line 4"), "{e}");
        let e = parse("http_server_config:\n  headers:\n    Server: stornet\n").unwrap_err();
        assert!(e.contains("headers.Server") && e.contains("line 3"), "{e}");
        let e = parse("http_server_config:\n  headers:\n    X-Frame-Options: allow\n").unwrap_err();
        assert!(e.contains("X-Frame-Options") && e.contains("deny"), "{e}");
        let e = parse("rate_limit:\n  interval: 1s\n").unwrap_err();
        assert!(
            e.contains("rate_limit.burst") && e.contains("line 1"),
            "{e}"
        );
        let e = parse("rate_limit:\n  interval: often\n  burst: 1\n").unwrap_err();
        assert!(
            e.contains("rate_limit.interval") && e.contains("line 2"),
            "{e}"
        );
        let e = parse("http_server_config:\n  headers:\n    \"X-\\nA\": b\n").unwrap_err();
        assert!(!e.contains('\n') && e.contains("X-"), "{e}");
        let e = parse("basic_auth_excluded_paths: [metrics]\n").unwrap_err();
        assert!(e.contains("basic_auth_excluded_paths"), "{e}");
    }

    fn refused(extra: &str) -> String {
        parse(&format!(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n{extra}"
        ))
        .unwrap_err()
    }

    /// TLS settings rustls cannot honour, or that cannot work together: one line, with the
    /// line of the file.
    #[test]
    fn tls_settings_that_cannot_work_are_refused() {
        let e = refused("  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n");
        assert!(
            e.contains("TLS_RSA_WITH_AES_128_CBC_SHA")
                && e.contains("not supported")
                && e.contains("line 4"),
            "{e}"
        );
        let e = refused("  cipher_suites: [TLS_FANCY]\n");
        assert!(e.contains("unknown cipher suite \"TLS_FANCY\""), "{e}");
        let e = refused("  curve_preferences: [CurveP521]\n");
        assert!(
            e.contains("CurveP521") && e.contains("not supported"),
            "{e}"
        );
        let e = refused("  max_version: TLS11\n");
        assert!(e.contains("max_version") && e.contains("line 4"), "{e}");
        let e = refused("  min_version: TLS13\n  max_version: TLS12\n");
        assert!(e.contains("min_version"), "{e}");
        let e = refused("  client_ca_file: ca.crt\n");
        assert!(e.contains("NoClientCert"), "{e}");
        let e = refused("  client_auth_type: RequireAndVerifyClientCert\n");
        assert!(e.contains("client_ca_file"), "{e}");
        let e = refused(
            "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca\n  client_allowed_sans: [a]\n",
        );
        assert!(
            e.contains("client_allowed_sans") && e.contains("line 6"),
            "{e}"
        );
        let e = refused("  cert: inline\n");
        assert!(e.contains("not both"), "{e}");
    }
}
