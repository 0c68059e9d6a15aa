//! HTTP basic auth against bcrypt hashes, as the Prometheus exporter-toolkit does it.
//!
//! bcrypt is slow on purpose (tens of milliseconds of CPU per check), so an unauthenticated
//! client could otherwise keep every core busy with wrong passwords. Therefore:
//! - checks run one at a time, waiting their turn without holding a thread, so scrapes and
//!   other work never queue behind a pile of bcrypt checks;
//! - a verified (user, password) pair is remembered, so a scraper pays for bcrypt once; wrong
//!   guesses are remembered apart and can never push a good pair out;
//! - unknown users are checked against a dummy hash of the highest configured cost, so they
//!   take as long as the slowest real user.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

/// Highest bcrypt cost accepted in a web config: cost 14 already takes about a second of CPU
/// per check, and every step up doubles it.
pub const MAX_COST: u32 = 14;

/// Most remembered good credentials (a scraper uses one; this bounds memory).
const GOOD_MAX: usize = 64;
/// Most remembered wrong guesses; beyond it the list starts again.
const BAD_MAX: usize = 256;

type Credential = (String, String);

pub struct BasicAuth {
    users: BTreeMap<String, String>,
    dummy: String,
    good: Mutex<HashSet<Credential>>,
    bad: Mutex<HashSet<Credential>>,
    /// Held for the duration of one bcrypt check.
    turn: tokio::sync::Mutex<()>,
}

impl BasicAuth {
    /// `users` maps names to bcrypt hashes of cost at most [`MAX_COST`] (see `web::config`).
    pub fn new(users: BTreeMap<String, String>) -> BasicAuth {
        let dummy =
            bcrypt::hash("stornet-agent: no such user", dummy_cost(&users)).unwrap_or_default();
        BasicAuth {
            users,
            dummy,
            good: Mutex::new(HashSet::new()),
            bad: Mutex::new(HashSet::new()),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether an `Authorization` header value lets the request in. A credential seen before
    /// is answered at once; a new one waits for its turn at bcrypt.
    pub async fn allows(self: Arc<Self>, header: Option<String>) -> bool {
        let Some(cred) = header.as_deref().and_then(parse_basic) else {
            return false;
        };
        if let Some(known) = self.remembered(&cred) {
            return known;
        }
        let _turn = self.turn.lock().await;
        // Another request may have checked the same credential while this one waited.
        if let Some(known) = self.remembered(&cred) {
            return known;
        }
        let me = Arc::clone(&self);
        tokio::task::spawn_blocking(move || me.check(cred))
            .await
            .unwrap_or(false)
    }

    fn remembered(&self, cred: &Credential) -> Option<bool> {
        if lock(&self.good).contains(cred) {
            return Some(true);
        }
        lock(&self.bad).contains(cred).then_some(false)
    }

    /// Runs bcrypt and remembers the outcome. Blocking.
    fn check(&self, cred: Credential) -> bool {
        let ok = match self.users.get(&cred.0) {
            Some(hash) => bcrypt::verify(&cred.1, hash).unwrap_or(false),
            None => {
                let _ = bcrypt::verify(&cred.1, &self.dummy);
                false
            }
        };
        let (set, max) = if ok {
            (&self.good, GOOD_MAX)
        } else {
            (&self.bad, BAD_MAX)
        };
        let mut set = lock(set);
        if set.len() >= max {
            set.clear();
        }
        set.insert(cred);
        ok
    }

    /// The cost of the dummy hash unknown users are checked against.
    pub fn dummy_cost(&self) -> u32 {
        cost(&self.dummy).unwrap_or(0)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cost of a bcrypt hash, if it is one.
pub fn cost(hash: &str) -> Option<u32> {
    hash.parse::<bcrypt::HashParts>().ok().map(|p| p.get_cost())
}

/// The highest cost among the users' hashes (10, bcrypt's usual, when there are none).
fn dummy_cost(users: &BTreeMap<String, String>) -> u32 {
    users
        .values()
        .filter_map(|h| cost(h))
        .max()
        .unwrap_or(10)
        .min(MAX_COST)
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
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
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

    fn auth(users: &[(&str, &str, u32)]) -> Arc<BasicAuth> {
        let users = users
            .iter()
            .map(|(u, p, c)| (u.to_string(), bcrypt::hash(p, *c).unwrap()))
            .collect();
        Arc::new(BasicAuth::new(users))
    }

    fn header(user: &str, password: &str) -> Option<String> {
        let plain = format!("{user}:{password}");
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::from("Basic ");
        for c in plain.as_bytes().chunks(3) {
            let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
            let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
            for i in 0..4 {
                out.push(if i <= c.len() {
                    A[(n >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        Some(out)
    }

    #[tokio::test]
    async fn checks_bcrypt_hashes() {
        let a = auth(&[("prom", "s3cret", 4)]);
        assert!(
            a.clone()
                .allows(Some("Basic cHJvbTpzM2NyZXQ=".into()))
                .await
        );
        assert!(a.clone().allows(header("prom", "s3cret")).await); // remembered
        assert!(
            !a.clone()
                .allows(Some("Basic cHJvbTp3cm9uZw==".into()))
                .await
        ); // prom:wrong
        assert!(
            !a.clone()
                .allows(Some("Basic cHJvbTp3cm9uZw==".into()))
                .await
        ); // remembered
        assert!(!a.clone().allows(Some("Basic YTo=".into())).await); // unknown user
        assert!(!a.clone().allows(None).await);
    }

    #[tokio::test]
    async fn wrong_guesses_never_push_out_a_good_credential() {
        let a = auth(&[("prom", "s3cret", 4)]);
        let good = ("prom".to_string(), "s3cret".to_string());
        assert!(a.clone().allows(header("prom", "s3cret")).await);
        for i in 0..BAD_MAX + 10 {
            assert!(!a.clone().allows(header("prom", &format!("guess{i}"))).await);
        }
        assert_eq!(a.remembered(&good), Some(true));
    }

    #[test]
    fn unknown_users_cost_as_much_as_the_dearest_user() {
        let a = auth(&[("a", "x", 4), ("b", "y", 6), ("c", "z", 5)]);
        assert_eq!(a.dummy_cost(), 6);
        assert_eq!(dummy_cost(&BTreeMap::new()), 10);
    }

    /// With bcrypt checks of new credentials piling up, other blocking work (a scrape's
    /// collection) still gets a thread at once: checks take their turn one at a time.
    #[test]
    fn bcrypt_checks_do_not_fill_the_blocking_pool() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(4)
            .enable_all()
            .build()
            .unwrap();
        let a = auth(&[("prom", "s3cret", 9)]);
        rt.block_on(async {
            let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut checks = Vec::new();
            for i in 0..12 {
                let (a, done) = (a.clone(), done.clone());
                checks.push(tokio::spawn(async move {
                    assert!(!a.allows(header("prom", &format!("guess{i}"))).await);
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let before = done.load(std::sync::atomic::Ordering::SeqCst);
            tokio::task::spawn_blocking(|| ()).await.unwrap();
            let during = done.load(std::sync::atomic::Ordering::SeqCst) - before;
            // A pool shared with parallel checks would run this after at least 8 of them.
            assert!(
                during <= 2,
                "{during} checks finished before other work got a thread"
            );
            for c in checks {
                c.await.unwrap();
            }
        });
    }
}
