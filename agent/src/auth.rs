//! HTTP basic auth against bcrypt hashes, as the Prometheus exporter-toolkit does it.
//! bcrypt is slow on purpose, so a verified (user, password) pair is remembered; unknown
//! users are checked against a dummy hash so that timing does not tell which users exist.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// Most remembered good credentials (a scraper uses one; this bounds memory).
const CACHE_MAX: usize = 64;

pub struct BasicAuth {
    users: BTreeMap<String, String>,
    dummy: String,
    verified: Mutex<HashSet<(String, String)>>,
}

impl BasicAuth {
    pub fn new(users: BTreeMap<String, String>) -> BasicAuth {
        // The cost of the first user's hash, so an unknown user takes as long as a known one.
        let cost = users
            .values()
            .next()
            .and_then(|h| h.parse::<bcrypt::HashParts>().ok())
            .map_or(10, |p| p.get_cost());
        let dummy = bcrypt::hash("stornet-agent: no such user", cost).unwrap_or_default();
        BasicAuth {
            users,
            dummy,
            verified: Mutex::new(HashSet::new()),
        }
    }

    /// Whether an `Authorization` header value lets the request in. Blocking (bcrypt).
    pub fn allows(&self, header: Option<&str>) -> bool {
        let Some((user, password)) = header.and_then(parse_basic) else {
            return false;
        };
        let key = (user.clone(), password.clone());
        if self.verified.lock().expect("auth cache").contains(&key) {
            return true;
        }
        let ok = match self.users.get(&user) {
            Some(hash) => bcrypt::verify(&password, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(&password, &self.dummy);
                false
            }
        };
        if ok {
            let mut cache = self.verified.lock().expect("auth cache");
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(key);
        }
        ok
    }
}

/// `Basic base64(user:password)` → (user, password).
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, b64) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64_decode(b64.trim())?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// Standard base64 with padding (RFC 4648), as HTTP basic auth uses.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || chunk[..4 - pad].contains(&b'=') {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_basic_headers() {
        // "prom:s3cret" and "a:" (empty password).
        assert_eq!(
            parse_basic("Basic cHJvbTpzM2NyZXQ="),
            Some(("prom".into(), "s3cret".into()))
        );
        assert_eq!(parse_basic("basic YTo="), Some(("a".into(), "".into())));
        assert_eq!(parse_basic("Bearer cHJvbTpzM2NyZXQ="), None);
        assert_eq!(parse_basic("Basic !!!!"), None);
        assert_eq!(parse_basic("Basic cHJvbQ=="), None); // no colon
        assert_eq!(base64_decode("TWFu").unwrap(), b"Man");
        assert_eq!(base64_decode("TWE=").unwrap(), b"Ma");
        assert!(base64_decode("TW=u").is_none());
    }

    #[test]
    fn checks_bcrypt_hashes() {
        let users = BTreeMap::from([("prom".to_string(), bcrypt::hash("s3cret", 4).unwrap())]);
        let auth = BasicAuth::new(users);
        assert!(auth.allows(Some("Basic cHJvbTpzM2NyZXQ=")));
        assert!(auth.allows(Some("Basic cHJvbTpzM2NyZXQ="))); // from the cache
        assert!(!auth.allows(Some("Basic cHJvbTp3cm9uZw=="))); // prom:wrong
        assert!(!auth.allows(Some("Basic YTo="))); // unknown user
        assert!(!auth.allows(None));
    }
}
