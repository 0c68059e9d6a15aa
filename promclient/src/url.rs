//! The URLs of the servers loadgen reads (`--agent`, `--prometheus`): `http://` or `https://`,
//! with optional basic-auth credentials, parsed once at the command line so that a bad URL is
//! a usage error before anything runs.

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A parsed `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub scheme: Scheme,
    /// Host as written (a name, an IPv4 address, or an IPv6 address without brackets).
    pub host: String,
    pub port: u16,
    /// Path without a trailing slash (empty for the root).
    pub path: String,
    /// `user:password` for basic auth, as written (percent-encoded).
    pub userinfo: Option<String>,
}

impl Url {
    /// Parses `http[s]://[user:pass@]host[:port][/path]`; the port defaults to 80 or 443.
    pub fn parse(s: &str) -> Result<Url, String> {
        let (scheme, rest) = if let Some(r) = s.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (Scheme::Https, r)
        } else {
            return Err(format!("{s}: not an http:// or https:// URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err(format!("{s}: a query or fragment is not expected here"));
        }
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, authority),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{s}: unclosed `[` in the host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(format!("{s}: unexpected text after the host")),
            };
            (h.to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(format!("{s}: no host"));
        }
        let port = match port {
            None if scheme == Scheme::Https => 443,
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{s}: bad port `{p}`"))?,
        };
        Ok(Url {
            scheme,
            host,
            port,
            path: path.trim_end_matches('/').to_string(),
            userinfo,
        })
    }

    /// `scheme://addr` with an empty path: a server the caller knows by its socket address.
    pub fn of(scheme: Scheme, addr: std::net::SocketAddr) -> Url {
        Url {
            scheme,
            host: addr.ip().to_string(),
            port: addr.port(),
            path: String::new(),
            userinfo: None,
        }
    }

    /// `host:port` (IPv6 in brackets), as a `Host` header and a default name.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL without credentials, for messages and records.
    pub fn display(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.path
        )
    }

    /// The basic-auth user and password of the URL, percent-decoded.
    pub fn basic_auth(&self) -> Option<(String, String)> {
        let u = self.userinfo.as_deref()?;
        let (user, password) = u.split_once(':').unwrap_or((u, ""));
        Some((decode(user), decode(password)))
    }
}

/// What a query parameter value keeps as written: RFC 3986's unreserved characters.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a query parameter value.
pub fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string()
}

/// Percent-decodes userinfo (a password may hold `@` or `:` as `%40`, `%3A`); a `%` not
/// followed by two hex digits stays as written.
fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_defaults_and_credentials() {
        let u = Url::parse("http://198.18.0.2:9477").unwrap();
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path.as_str()),
            (Scheme::Http, "198.18.0.2", 9477, "")
        );
        let u = Url::parse("http://prom:secret@example.org/prometheus/").unwrap();
        assert_eq!(u.port, 80);
        assert_eq!(u.path, "/prometheus");
        assert_eq!(u.userinfo.as_deref(), Some("prom:secret"));
        assert_eq!(u.display(), "http://example.org:80/prometheus");
        let u = Url::parse("https://example.org/metrics").unwrap();
        assert_eq!((u.scheme, u.port), (Scheme::Https, 443));
        assert_eq!(u.display(), "https://example.org:443/metrics");
        let u = Url::parse("http://[::1]:9477/metrics").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.authority(), "[::1]:9477");
        for bad in [
            "198.18.0.2:9477",
            "ftp://h:1",
            "http://:9477",
            "https://h:0",
            "http://h:x",
            "http://h:1/m?x=1",
            "http://[::1",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_are_percent_decoded() {
        let u = Url::parse("https://prom:p%40ss%3Aw%zz@h:1").unwrap();
        assert_eq!(
            u.basic_auth(),
            Some(("prom".to_string(), "p@ss:w%zz".to_string()))
        );
        let u = Url::parse("http://token@h:1").unwrap();
        assert_eq!(u.basic_auth(), Some(("token".to_string(), String::new())));
        assert_eq!(Url::parse("http://h:1").unwrap().basic_auth(), None);
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("up{job=\"a b\"}"), "up%7Bjob%3D%22a%20b%22%7D");
    }
}
