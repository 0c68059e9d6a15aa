//! Which interfaces get series of their own. Include/exclude globs on the name (by default
//! the host ends of containers' veths are left out: they come and go with every pod), and a
//! cap on the interfaces reported by name across all watched namespaces; the others are
//! summed into `interface="other"` of their namespace, with counters that stay monotonic
//! while interfaces leave the sum.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;

/// The `interface` label of interfaces beyond the cap.
pub const OTHER: &str = "other";

/// Left out unless configured otherwise: the per-container devices of container runtimes
/// and Kubernetes network plugins. Docker, Podman, LXD and the CNI bridge plugin name a
/// container's host-side veth `veth` and a hex id or a number (`veth3f2a9c1`, `veth0`);
/// Calico `cali…`, Cilium `lxc…`, GKE `gke…`, Azure CNI `azv…`. A veth an operator named
/// (`veth-storage`) is kept. The AWS VPC CNI's `eni…` is not in the list: systemd names
/// netdevsim ports `eni…` too.
pub const DEFAULT_EXCLUDE: &[&str] = &["veth[0-9a-f]*", "cali*", "lxc*", "gke*", "azv*"];

/// Which interfaces are reported: those matching an include pattern (all when there is none)
/// and no exclude pattern. Globs: `*`, `?`, `[abc]`, `[!abc]`, `[a-f]`.
#[derive(Clone, Debug, Default)]
pub struct InterfaceFilter {
    include: Vec<glob::Pattern>,
    exclude: Vec<glob::Pattern>,
}

impl InterfaceFilter {
    /// Compiles the patterns; a bad one is returned with why.
    pub fn new(
        include: &[String],
        exclude: &[String],
    ) -> Result<InterfaceFilter, (String, String)> {
        let compile = |ps: &[String]| {
            ps.iter()
                .map(|p| glob::Pattern::new(p).map_err(|e| (p.clone(), e.msg.to_string())))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(InterfaceFilter {
            include: compile(include)?,
            exclude: compile(exclude)?,
        })
    }

    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| p.matches(name)))
            && !self.exclude.iter().any(|p| p.matches(name))
    }
}

/// An interface: its namespace's label and its index there.
pub type Member = (String, i32);

/// Gives at most `max` interfaces their own `interface` label, first come first served (the
/// host namespace is read first, its interfaces in index order), so an interface keeps its
/// label while it exists; a place is freed when its interface goes.
pub struct InterfaceLabels {
    max: usize,
    named: HashSet<Member>,
}

impl InterfaceLabels {
    pub fn new(max: usize) -> InterfaceLabels {
        InterfaceLabels {
            max,
            named: HashSet::new(),
        }
    }

    /// Frees the places of interfaces not in `present`.
    pub fn retain(&mut self, present: &HashSet<Member>) {
        self.named.retain(|m| present.contains(m));
    }

    /// Whether the interface is reported under its own name (taking a free place if there
    /// is one).
    pub fn named(&mut self, ns: &str, index: i32) -> bool {
        let m = (ns.to_string(), index);
        if self.named.contains(&m) {
            return true;
        }
        self.named.len() < self.max && self.named.insert(m)
    }
}

/// Monotonic sums of the counters of the interfaces in `other`, per namespace and key (the
/// metric and its other labels). When an interface leaves the sum (it went, or took a free
/// place of its own) or one of its counters goes back (a qdisc replaced), its last values
/// stay in the sum. A namespace's sums are dropped once no interface of it is in `other`:
/// its series go, and start again from the members' values if some come back.
pub struct OtherTotals<K> {
    last: HashMap<Member, HashMap<K, u64>>,
    left: HashMap<String, HashMap<K, u64>>,
}

impl<K> Default for OtherTotals<K> {
    fn default() -> Self {
        OtherTotals {
            last: HashMap::new(),
            left: HashMap::new(),
        }
    }
}

impl<K: Clone + Eq + Hash + Ord> OtherTotals<K> {
    /// Takes this scrape's counters of the interfaces in `other` and returns the sums by
    /// (namespace, key).
    pub fn update(&mut self, now: HashMap<Member, HashMap<K, u64>>) -> BTreeMap<(String, K), u64> {
        for (member, values) in &self.last {
            let current = now.get(member);
            for (k, v) in values {
                if current.and_then(|c| c.get(k)).is_none_or(|c| c < v) {
                    *self
                        .left
                        .entry(member.0.clone())
                        .or_default()
                        .entry(k.clone())
                        .or_default() += v;
                }
            }
        }
        let namespaces: HashSet<&String> = now.keys().map(|(ns, _)| ns).collect();
        self.left.retain(|ns, _| namespaces.contains(ns));
        let mut out: BTreeMap<(String, K), u64> = BTreeMap::new();
        for (ns, values) in &self.left {
            for (k, v) in values {
                *out.entry((ns.clone(), k.clone())).or_default() += v;
            }
        }
        for ((ns, _), values) in &now {
            for (k, v) in values {
                *out.entry((ns.clone(), k.clone())).or_default() += v;
            }
        }
        self.last = now;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> InterfaceFilter {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        InterfaceFilter::new(&s(include), &s(exclude)).unwrap()
    }

    #[test]
    fn default_leaves_out_container_devices_only() {
        let f = filter(&[], DEFAULT_EXCLUDE);
        for gone in [
            "veth3f2a9c1",
            "veth0",
            "vethc0ffee12",
            "cali1a2b3c4d5e6",
            "lxc12ab34cd",
            "lxc_health",
            "gke4f5e6d7c8b9",
            "azv1234abcd",
        ] {
            assert!(!f.allows(gone), "{gone} is a container's device");
        }
        for kept in [
            "lo",
            "eth0",
            "ens5",
            "enp3s0f1",
            "bond0",
            "bond0.100",
            "br0",
            "docker0",
            "cni0",
            "flannel.1",
            "veth-a",
            "veth-storage",
            "vxlan.calico",
            "ib0",
            "eni0np1",
        ] {
            assert!(f.allows(kept), "{kept} is kept by default");
        }
    }

    #[test]
    fn include_then_exclude_with_classes() {
        let f = filter(&["eth*", "bond[0-3]"], &["eth9"]);
        assert!(f.allows("eth0"));
        assert!(f.allows("bond3"));
        assert!(!f.allows("bond4"));
        assert!(!f.allows("eth9"), "exclude wins");
        assert!(!f.allows("lo"));
        assert!(filter(&[], &[]).allows("veth0"), "empty lists keep all");
        assert!(!filter(&[], &["[!e]*"]).allows("lo"));
        let e = InterfaceFilter::new(&["eth[".into()], &[]).unwrap_err();
        assert_eq!(e.0, "eth[");
    }

    #[test]
    fn cap_is_first_come_and_freed_when_interfaces_go() {
        let mut l = InterfaceLabels::new(2);
        assert!(l.named("host", 1));
        assert!(l.named("h1", 1), "the same index in another namespace");
        assert!(!l.named("h1", 2), "beyond the cap");
        assert!(l.named("host", 1), "a named interface stays named");
        l.retain(&HashSet::from([
            ("h1".to_string(), 1),
            ("h1".to_string(), 2),
        ]));
        assert!(l.named("h1", 2), "a freed place goes to the next interface");
        assert!(!l.named("host", 1));
        let mut none = InterfaceLabels::new(0);
        assert!(!none.named("host", 1));
    }

    fn scrape(members: &[(&str, i32, u64)]) -> HashMap<Member, HashMap<&'static str, u64>> {
        members
            .iter()
            .map(|(ns, i, v)| ((ns.to_string(), *i), HashMap::from([("rx", *v)])))
            .collect()
    }

    #[test]
    fn other_counters_stay_monotonic_while_members_leave() {
        let mut t = OtherTotals::default();
        let sum =
            |o: &BTreeMap<(String, &str), u64>, ns: &str| o.get(&(ns.to_string(), "rx")).copied();
        let o = t.update(scrape(&[("h1", 5, 100), ("h1", 6, 10), ("h2", 7, 1)]));
        assert_eq!((sum(&o, "h1"), sum(&o, "h2")), (Some(110), Some(1)));
        // Interface 6 goes; 5 moves on; 8 joins with a large count.
        let o = t.update(scrape(&[("h1", 5, 150), ("h1", 8, 1000), ("h2", 7, 2)]));
        assert_eq!(sum(&o, "h1"), Some(1160), "6's last 10 stay in the sum");
        // 5's counter goes back (its qdisc replaced): its last value stays.
        let o = t.update(scrape(&[("h1", 5, 3), ("h1", 8, 1000)]));
        assert_eq!(sum(&o, "h1"), Some(1163));
        assert_eq!(sum(&o, "h2"), None, "no member of h2 in other: no series");
        // Everything in h1 gone: its sums go with it, and start afresh.
        let o = t.update(scrape(&[]));
        assert!(o.is_empty());
        assert!(t.left.is_empty() && t.last.is_empty(), "nothing kept");
        let o = t.update(scrape(&[("h1", 9, 4)]));
        assert_eq!(sum(&o, "h1"), Some(4));
    }
}
