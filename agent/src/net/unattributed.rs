//! Retransmits the kernel counted that no probe run saw: per watched namespace, its
//! `RetransSegs` (/proc/net/snmp) since the agent first read it, less what the retransmit
//! probes counted for sockets of that namespace over the same time. Tail-loss probes, for
//! one, reach `RetransSegs` without passing the `tcp_retransmit_skb` tracepoint. With this
//! part, the per-peer counts of a namespace add up to its `RetransSegs`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::MetricFamily;
use metric_names::labels::NETNS;

#[derive(Default)]
struct Ns {
    label: String,
    /// The latest `RetransSegs` read in the namespace.
    snmp: Option<u64>,
    /// `RetransSegs` and the probes' count when both were first known.
    first: Option<(u64, u64)>,
    total: u64,
}

/// Shared by the snapshot collector (which reads `RetransSegs` in each namespace) and the
/// retransmit collector (which counts the probes' retransmits per namespace).
#[derive(Default)]
pub struct Unattributed {
    namespaces: Mutex<HashMap<u64, Ns>>,
}

impl Unattributed {
    /// `RetransSegs` of the namespace with inode `inode`, read now.
    pub fn snmp(&self, inode: u64, label: &str, retrans_segs: u64) {
        let mut m = self.namespaces.lock().expect("unattributed retransmits");
        let ns = m.entry(inode).or_default();
        ns.label = label.to_string();
        ns.snmp = Some(retrans_segs);
    }

    /// `stornet_tcp_retransmits_unattributed_total{netns}`, given the probes' counts per
    /// namespace inode. Monotonic: a moment where the probes' count ran ahead of a
    /// `RetransSegs` read a little earlier takes nothing back.
    pub fn family(&self, probes: &HashMap<u64, u64>) -> MetricFamily {
        let mut f = MetricFamily::of(&metric_names::net::TCP_RETRANSMITS_UNATTRIBUTED_TOTAL);
        let mut m = self.namespaces.lock().expect("unattributed retransmits");
        for (inode, ns) in m.iter_mut() {
            let Some(snmp) = ns.snmp else { continue };
            let probe = probes.get(inode).copied().unwrap_or(0);
            match ns.first {
                None => ns.first = Some((snmp, probe)),
                Some((snmp0, probe0)) => {
                    let seen = snmp.saturating_sub(snmp0);
                    let counted = probe.saturating_sub(probe0);
                    ns.total = ns.total.max(seen.saturating_sub(counted));
                }
            }
            f.scalar(&[(NETNS, &ns.label)], ns.total as f64);
        }
        f
    }
}

/// `RetransSegs` from the text of /proc/net/snmp.
pub fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let i = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(f: &MetricFamily) -> f64 {
        f.series.first().map_or(-1.0, |s| match s.value {
            crate::model::Value::Scalar(v) => v,
            _ => -1.0,
        })
    }

    #[test]
    fn the_part_no_probe_saw_is_counted_and_never_shrinks() {
        let u = Unattributed::default();
        let probes = |n: u64| HashMap::from([(7u64, n)]);
        // First sight: both baselines, nothing unattributed yet.
        u.snmp(7, "lab", 1000);
        assert_eq!(value(&u.family(&probes(40))), 0.0);
        // 100 more in RetransSegs, 97 seen by the probes: 3 unattributed.
        u.snmp(7, "lab", 1100);
        assert_eq!(value(&u.family(&probes(137))), 3.0);
        // The probes ran ahead of a slightly older RetransSegs read: stays at 3.
        assert_eq!(value(&u.family(&probes(150))), 3.0);
        u.snmp(7, "lab", 1120);
        assert_eq!(value(&u.family(&probes(157))), 3.0);
        u.snmp(7, "lab", 1125);
        assert_eq!(value(&u.family(&probes(157))), 8.0);
    }

    #[test]
    fn retrans_segs_from_proc_net_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails \
                    EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
                    Tcp: 1 200 120000 -1 5 3 0 0 2 100 120 17 0 1 0\n";
        assert_eq!(retrans_segs(snmp), Some(17));
        assert_eq!(retrans_segs("Ip: a\nIp: 1\n"), None);
    }
}
