//! `peer` labels with a cap: the first `max_peers` remote addresses stornet sees keep their own
//! label for the agent's lifetime, later ones fold into `peer="other"`. Labels never move, so
//! every per-peer counter stays monotonic. One registry serves all per-peer metrics, so a
//! peer has the same label in retransmits and in socket statistics.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

pub const OTHER: &str = "other";

pub struct PeerLabels {
    max: usize,
    named: Mutex<HashSet<IpAddr>>,
}

impl PeerLabels {
    pub fn new(max: usize) -> PeerLabels {
        PeerLabels {
            max,
            named: Mutex::new(HashSet::new()),
        }
    }

    /// Groups per-peer values by label, merging values with `merge`. A peer without an
    /// address (None) is `other`. Peers not labelled yet get labels heaviest first (by
    /// `weight`, then address), while the cap allows. IPv4-mapped IPv6 addresses count as
    /// IPv4.
    pub fn fold<V, A: Default>(
        &self,
        items: Vec<(Option<IpAddr>, V)>,
        weight: impl Fn(&V) -> u64,
        mut merge: impl FnMut(&mut A, V),
    ) -> BTreeMap<String, A> {
        let mut weights: HashMap<IpAddr, u64> = HashMap::new();
        for (ip, v) in &items {
            if let Some(ip) = ip {
                *weights.entry(ip.to_canonical()).or_default() += weight(v);
            }
        }
        let mut order: Vec<(IpAddr, u64)> = weights.into_iter().collect();
        order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut named = self.named.lock().expect("peer labels");
        let labels: HashMap<IpAddr, String> = order
            .into_iter()
            .map(|(ip, _)| {
                let own = named.contains(&ip) || (named.len() < self.max && named.insert(ip));
                (ip, if own { ip.to_string() } else { OTHER.into() })
            })
            .collect();
        drop(named);
        let mut out: BTreeMap<String, A> = BTreeMap::new();
        for (ip, v) in items {
            let label = match ip {
                Some(ip) => labels[&ip.to_canonical()].clone(),
                None => OTHER.into(),
            };
            merge(out.entry(label).or_default(), v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    fn sum(p: &PeerLabels, items: &[(Option<IpAddr>, u64)]) -> BTreeMap<String, u64> {
        p.fold(items.to_vec(), |v| *v, |a: &mut u64, v| *a += v)
    }

    #[test]
    fn caps_peers_and_folds_the_rest_into_other() {
        let p = PeerLabels::new(2);
        let first = sum(
            &p,
            &[
                (ip("10.0.0.1"), 5),
                (ip("10.0.0.2"), 50),
                (ip("10.0.0.3"), 7),
            ],
        );
        // The two heaviest get labels; the third folds.
        assert_eq!(first["10.0.0.2"], 50);
        assert_eq!(first["10.0.0.3"], 7);
        assert_eq!(first[OTHER], 5);
        assert_eq!(first.len(), 3);

        // Labels stick: 10.0.0.1 stays in `other` even when it becomes the heaviest, and a
        // new peer folds too, so every series only grows.
        let later = sum(
            &p,
            &[
                (ip("10.0.0.1"), 500),
                (ip("10.0.0.2"), 60),
                (ip("10.0.0.3"), 7),
                (ip("10.0.0.4"), 1),
                (None, 2),
            ],
        );
        assert_eq!(later["10.0.0.2"], 60);
        assert_eq!(later["10.0.0.3"], 7);
        assert_eq!(later[OTHER], 503);
        assert!(!later.contains_key("10.0.0.1"));
    }

    #[test]
    fn zero_cap_folds_everything_and_mapped_addresses_merge() {
        let none = PeerLabels::new(0);
        let all = sum(&none, &[(ip("10.0.0.1"), 1), (ip("::1"), 2)]);
        assert_eq!(all.len(), 1);
        assert_eq!(all[OTHER], 3);

        let p = PeerLabels::new(4);
        let merged = sum(&p, &[(ip("198.18.0.2"), 1), (ip("::ffff:198.18.0.2"), 2)]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged["198.18.0.2"], 3);
    }
}
