//! Counters kept per cgroup id in a kernel map, turned into counters per `cgroup` label
//! (`crate::cgroups::Labeller`) at each scrape. What a cgroup that is gone counted stays under
//! its label while the label lives (so every series only grows), and its kernel entries can
//! be deleted; `other` never goes down.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::cgroups::Labeller;

/// A counter value that adds up.
pub trait Tally: Default + Clone {
    fn tally(&mut self, other: &Self);
}

impl Tally for u64 {
    fn tally(&mut self, other: &u64) {
        *self += other;
    }
}

impl Tally for agent_common::block::CgroupStats {
    fn tally(&mut self, other: &Self) {
        self.add(other);
    }
}

/// Per-label counters of one kind of key `K` (a device and op, a peer).
pub struct CgroupCounts<K, V> {
    labeller: Labeller,
    /// What cgroups that are gone counted, under the label they counted for.
    retired: BTreeMap<(K, String), V>,
}

/// One scrape: counts by (key, label), and which entries belong to cgroups that are gone.
pub struct Scrape<K, V> {
    pub counts: BTreeMap<(K, String), V>,
    /// Indices into the scrape's entries: their kernel entries may be deleted.
    pub gone: Vec<usize>,
}

impl<K: Ord + Clone, V: Tally> CgroupCounts<K, V> {
    pub fn new(labeller: Labeller) -> CgroupCounts<K, V> {
        CgroupCounts {
            labeller,
            retired: BTreeMap::new(),
        }
    }

    /// Labels in use now, besides `other`.
    #[cfg(test)]
    fn labels_held(&self) -> usize {
        self.labeller.held()
    }

    /// Folds the kernel's entries, (key, cgroup id, counts), into counts per label.
    pub fn scrape(&mut self, entries: &[(K, u64, V)]) -> Scrape<K, V> {
        let ids: BTreeSet<u64> = entries.iter().map(|(_, id, _)| *id).collect();
        let r = self.labeller.resolve(&ids);
        self.retired
            .retain(|(_, label), _| !r.released.contains(label));
        let gone_ids: HashMap<u64, String> = r.gone.into_iter().collect();
        let mut out: Scrape<K, V> = Scrape {
            counts: BTreeMap::new(),
            gone: Vec::new(),
        };
        for (i, (key, id, v)) in entries.iter().enumerate() {
            if let Some(label) = gone_ids.get(id) {
                if !r.released.contains(label) {
                    self.retired
                        .entry((key.clone(), label.clone()))
                        .or_default()
                        .tally(v);
                }
                out.gone.push(i);
            } else if let Some(label) = r.labels.get(id) {
                out.counts
                    .entry((key.clone(), label.clone()))
                    .or_default()
                    .tally(v);
            }
        }
        for (k, v) in &self.retired {
            out.counts.entry(k.clone()).or_default().tally(v);
        }
        out
    }

    /// Forgets what cgroups that are gone counted for keys `keep` refuses (e.g. devices that
    /// no longer exist).
    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.retired.retain(|(k, _), _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::{OTHER, Tree, patterns};

    #[test]
    fn gone_cgroups_keep_their_counts_until_their_label_leaves() {
        let t = Tree::new("counts");
        let a = t.make("kube/a");
        let b = t.make("kube/b");
        let stray = t.make("elsewhere");
        let labeller = Labeller::new(t.0.clone(), patterns(&["kube/*"]), 4);
        let mut c: CgroupCounts<&str, u64> = CgroupCounts::new(labeller);
        let other = ("p", OTHER.to_string());
        let s = c.scrape(&[("p", a, 5), ("p", b, 7), ("p", stray, 1), ("p", 0, 2)]);
        assert_eq!(s.counts[&("p", "kube/a".to_string())], 5);
        assert_eq!(s.counts[&other], 3);
        assert!(s.gone.is_empty());
        assert_eq!(c.labels_held(), 2);

        // A group gone before a scrape saw it: its entry may be deleted, its count stays
        // under other.
        let x = t.make("kube/x");
        t.remove("kube/x");
        let s = c.scrape(&[("p", a, 5), ("p", x, 4), ("p", stray, 1), ("p", 0, 2)]);
        assert_eq!(s.gone, vec![1]);
        assert_eq!(s.counts[&other], 7);
        let s = c.scrape(&[("p", a, 5), ("p", stray, 1), ("p", 0, 2)]);
        assert_eq!(s.counts[&other], 7);

        // b goes after it was seen: its entry may be deleted, and its series leaves with its
        // label at the same scrape.
        t.remove("kube/b");
        let s = c.scrape(&[("p", a, 6), ("p", b, 8), ("p", stray, 1), ("p", 0, 2)]);
        assert_eq!(s.gone, vec![1]);
        assert!(!s.counts.contains_key(&("p", "kube/b".to_string())));
        assert_eq!(s.counts[&other], 7);
        assert_eq!(c.labels_held(), 1);
    }

    #[test]
    fn a_gone_subgroup_keeps_counting_under_its_live_parent_label() {
        let t = Tree::new("sub");
        let a = t.make("kube/a");
        let a_sub = t.make("kube/a/sub");
        let labeller = Labeller::new(t.0.clone(), patterns(&["kube/*"]), 4);
        let mut c: CgroupCounts<u32, u64> = CgroupCounts::new(labeller);
        let s = c.scrape(&[(1, a, 5), (1, a_sub, 4)]);
        assert_eq!(s.counts[&(1, "kube/a".to_string())], 9);
        t.remove("kube/a/sub");
        // The kernel entry goes; the series does not go down.
        let s = c.scrape(&[(1, a, 6), (1, a_sub, 4)]);
        assert_eq!(s.gone, vec![1]);
        assert_eq!(s.counts[&(1, "kube/a".to_string())], 10);
        let s = c.scrape(&[(1, a, 7)]);
        assert_eq!(s.counts[&(1, "kube/a".to_string())], 11);
        c.retain(|k| *k != 1);
        let s = c.scrape(&[(1, a, 7)]);
        assert_eq!(s.counts[&(1, "kube/a".to_string())], 7);
    }
}
