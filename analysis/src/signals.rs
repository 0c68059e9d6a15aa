//! The signals that may explain a direction's latency, each scored against it: rank
//! correlation at the best lag, and its level in the raised intervals against the others.

use serde::{Deserialize, Serialize};

use crate::breakdown::{PartKind, Parts, local_devices};
use crate::correlation::best_lag;
use crate::layers::with_layers_below;
use crate::model::{Direction, Host, Peer, Run, Series};
use crate::series::{all, at, mean_over, measured, sum_over};
use crate::thresholds::Thresholds;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    // Declared in the order evidence is told: what operators look for first.
    Retransmits,
    QdiscDrops,
    SkbDrops,
    InterfaceRxDrops,
    InterfaceTxDrops,
    InterfaceRxErrors,
    InterfaceTxErrors,
    QdiscBacklog,
    Srtt,
    QdiscOverlimits,
    /// In-flight requests divided by the queue limit.
    InflightRatio,
    QueueTime,
    ServiceTime,
    AboveBlock,
    BlockErrors,
    /// Share of the interval some task waited for a CPU on the host.
    CpuStalled,
    /// Share of the interval the storage daemon's cgroup was held off the CPU by its quota
    /// (summed over CPUs: above 1 when it was throttled on several).
    CpuThrottled,
    ReplicaRtt,
}

impl SignalKind {
    /// Counters are summed per interval; the others are levels (averaged).
    pub fn is_counter(self) -> bool {
        use SignalKind::*;
        matches!(
            self,
            Retransmits
                | SkbDrops
                | QdiscDrops
                | QdiscOverlimits
                | InterfaceRxDrops
                | InterfaceTxDrops
                | InterfaceRxErrors
                | InterfaceTxErrors
                | BlockErrors
        )
    }

    pub fn is_interface_level(self) -> bool {
        use SignalKind::*;
        matches!(
            self,
            QdiscDrops
                | QdiscBacklog
                | QdiscOverlimits
                | InterfaceRxDrops
                | InterfaceTxDrops
                | InterfaceRxErrors
                | InterfaceTxErrors
        )
    }
}

/// What a kernel drop reason says about its cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropClass {
    /// A queue or buffer was full.
    Congestion,
    /// The packet's size or header length was wrong for the path.
    Length,
    /// The packet was lost with no queue full: corrupted on the wire (checksum) or
    /// filtered.
    Loss,
    Other,
}

pub fn drop_class(reason: &str) -> DropClass {
    const CONGESTION: &[&str] = &[
        "cpu_backlog",
        "full_ring",
        "neigh_queuefull",
        "socket_rcvbuff",
        "socket_backlog",
        "proto_mem",
        "tcp_ofo_queue_prune",
        "nomem",
    ];
    const LENGTH: &[&str] = &[
        "pkt_too_big",
        "pkt_too_small",
        "hdr_trunc",
        "frag_reasm_timeout",
        "frag_too_far",
        "dup_frag",
        "skb_gso_seg",
        "ip_inhdr",
        "dev_hdr",
    ];
    const LOSS: &[&str] = &[
        "netfilter_drop",
        "ip_csum",
        "tcp_csum",
        "udp_csum",
        "icmp_csum",
        "skb_csum",
    ];
    let r = reason.to_ascii_lowercase();
    if r.starts_with("qdisc_") || CONGESTION.contains(&r.as_str()) {
        DropClass::Congestion
    } else if LENGTH.contains(&r.as_str()) {
        DropClass::Length
    } else if LOSS.contains(&r.as_str()) {
        DropClass::Loss
    } else {
        DropClass::Other
    }
}

/// One signal of one host, with its series.
#[derive(Clone, Debug, PartialEq)]
pub struct Signal {
    pub host: String,
    pub kind: SignalKind,
    /// Peer address, drop reason, `interface qdisc`, interface, or device.
    pub key: String,
    /// The replica peer (as the analysed host names it) a TCP signal is about.
    pub peer: Option<String>,
    /// The interface an interface-level signal is on.
    pub interface: Option<String>,
    pub series: Series,
}

/// A signal's scores for one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignalScore {
    pub host: String,
    pub kind: SignalKind,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Spearman rank correlation with p99 latency at the best lag.
    pub rho: Option<f64>,
    pub lag: Option<i32>,
    pub points: usize,
    /// Counters: events over the run; levels: mean over the run.
    pub run: Option<f64>,
    /// Counters: events in the raised intervals; levels: mean there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raised: Option<f64>,
    /// The same over the other intervals, those next to a raised one left out when
    /// enough remain (see [`away_from`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub others: Option<f64>,
    /// How many intervals `others` covers.
    #[serde(default)]
    pub others_intervals: usize,
    /// Higher in the raised intervals than in the others (see docs/analysis.md).
    pub rose: bool,
    /// Intervals by which `raised` and `others` were taken ahead of the raised intervals:
    /// the best lag, when the signal rose only there (a cause that leads its effect by a
    /// sampling interval still rose with it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shift: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Signal {
    fn new(host: &Host, kind: SignalKind, key: &str, series: &Series) -> Signal {
        Signal {
            host: host.name.clone(),
            kind,
            key: key.to_string(),
            peer: None,
            interface: None,
            series: series.clone(),
        }
    }

    fn about(mut self, peer: Option<&String>) -> Signal {
        self.peer = peer.cloned();
        self
    }

    fn on(mut self, interface: &str) -> Signal {
        self.interface = Some(interface.to_string());
        self
    }
}

/// Every measured signal that bears on `subject`'s latency in direction `d`.
pub fn collect(run: &Run, subject: &Host, d: Direction, parts: &Parts) -> Vec<Signal> {
    let mut out = Vec::new();
    // The analysed host's own TCP view of each peer.
    for (addr, p) in &subject.peers {
        out.extend(tcp(subject, addr, p, Some(addr)));
    }
    // Network signals of every host on a path: this one, the replicas' hosts, switches.
    for host in path_hosts(run, subject, parts) {
        if host.name != subject.name {
            // The peer's view of the analysed host, attributed to the peer's address.
            let me = host
                .addresses
                .iter()
                .find(|a| subject_peer(subject, parts, a));
            for (addr, p) in host
                .peers
                .iter()
                .filter(|(a, _)| subject.addresses.contains(a))
            {
                out.extend(tcp(host, addr, p, me));
            }
        }
        out.extend(network(host));
    }
    // Block devices: the analysed host's local ones, and each replica host's busiest, with
    // the devices stacked below them (where their time may go); the CPU of each host.
    out.extend(devices(
        run.len(),
        subject,
        &with_layers_below(subject, &parts.devices),
        d,
    ));
    out.extend(cpu(subject, run.interval_seconds));
    for part in parts.replicas() {
        if let Some(h) = run.host_with_address(&part.key)
            && h.name != subject.name
        {
            let below = with_layers_below(h, &local_devices(h, d));
            out.extend(devices(run.len(), h, &below, d));
            out.extend(cpu(h, run.interval_seconds));
        }
    }
    if let Some(p) = parts.get(PartKind::AboveBlock) {
        out.push(Signal::new(
            subject,
            SignalKind::AboveBlock,
            &p.key,
            &p.series,
        ));
    }
    for p in parts.replicas() {
        out.push(
            Signal::new(subject, SignalKind::ReplicaRtt, &p.key, &p.series).about(Some(&p.key)),
        );
    }
    out.retain(|s| measured(&s.series));
    out
}

/// The share of each interval some task of the host waited for a CPU, and the share its
/// storage daemon's CPU quota held the daemon off the CPU. On a host whose CPUs are busy
/// anyway the wait is high before a quota bites and moves from interval to interval; the
/// throttled time is zero until then.
fn cpu(host: &Host, interval_seconds: f64) -> Vec<Signal> {
    let share = |seconds: &Series| -> Series {
        seconds
            .iter()
            .map(|v| v.map(|s| s / interval_seconds))
            .collect()
    };
    [
        (SignalKind::CpuStalled, &host.cpu_stalled_seconds),
        (SignalKind::CpuThrottled, &host.cpu_throttled_seconds),
    ]
    .into_iter()
    .map(|(kind, seconds)| (kind, share(seconds)))
    .filter(|(_, s)| measured(s))
    .map(|(kind, s)| Signal::new(host, kind, "cpu", &s))
    .collect()
}

fn tcp(host: &Host, addr: &str, p: &Peer, about: Option<&String>) -> [Signal; 2] {
    [
        Signal::new(host, SignalKind::Retransmits, addr, &p.retransmits).about(about),
        Signal::new(host, SignalKind::Srtt, addr, &p.srtt_seconds).about(about),
    ]
}

/// Drops, qdiscs and interface counters of a host (loopback left out).
///
/// The kernel counts drop reasons in every network namespace of the machine, containers'
/// included, while qdisc statistics come from the namespaces the agent watches. Where a
/// host's qdiscs were measured, drops with a `qdisc_*` reason are left to them: they are the
/// same drops on the watched interfaces, and the rest happened off the path.
fn network(host: &Host) -> Vec<Signal> {
    let qdiscs_measured = host.qdiscs.iter().any(|q| measured(&q.drops));
    let mut out: Vec<Signal> = host
        .skb_drops
        .iter()
        .filter(|(reason, _)| !(qdiscs_measured && reason.starts_with("qdisc_")))
        .map(|(reason, s)| Signal::new(host, SignalKind::SkbDrops, reason, s))
        .collect();
    for q in &host.qdiscs {
        let key = format!("{} {}", q.interface, q.qdisc);
        for (kind, s) in [
            (SignalKind::QdiscDrops, &q.drops),
            (SignalKind::QdiscBacklog, &q.backlog_bytes),
            (SignalKind::QdiscOverlimits, &q.overlimits),
        ] {
            out.push(Signal::new(host, kind, &key, s).on(&q.interface));
        }
    }
    for (name, i) in host.interfaces.iter().filter(|(name, _)| *name != "lo") {
        for (kind, s) in [
            (SignalKind::InterfaceRxDrops, &i.rx_drops),
            (SignalKind::InterfaceTxDrops, &i.tx_drops),
            (SignalKind::InterfaceRxErrors, &i.rx_errors),
            (SignalKind::InterfaceTxErrors, &i.tx_errors),
        ] {
            out.push(Signal::new(host, kind, name, s).on(name));
        }
    }
    out
}

/// In-flight ratio, queue and service time and errors of the named devices.
fn devices(n: usize, host: &Host, names: &[String], d: Direction) -> Vec<Signal> {
    let mut out = Vec::new();
    for name in names {
        let Some(dev) = host.devices.get(name) else {
            continue;
        };
        let ratio: Series = (0..n)
            .map(|i| Some(at(&dev.inflight, i)? / at(&dev.queue_limit, i).filter(|l| *l > 0.0)?))
            .collect();
        out.push(Signal::new(host, SignalKind::InflightRatio, name, &ratio));
        if let Some(op) = dev.ops.get(d.op()) {
            for (kind, s) in [
                (SignalKind::QueueTime, &op.queue_seconds),
                (SignalKind::ServiceTime, &op.service_seconds),
                (SignalKind::BlockErrors, &op.errors),
            ] {
                out.push(Signal::new(host, kind, name, s));
            }
        }
    }
    out
}

/// Whether `addr` is one of the analysed host's replica peers.
fn subject_peer(subject: &Host, parts: &Parts, addr: &str) -> bool {
    subject.peers.contains_key(addr) || parts.replicas().any(|p| p.key == addr)
}

/// The analysed host, the hosts of its replica peers, and switches; each once.
pub fn path_hosts<'a>(run: &'a Run, subject: &'a Host, parts: &Parts) -> Vec<&'a Host> {
    let mut out = vec![subject];
    let peers = subject
        .peers
        .keys()
        .map(String::as_str)
        .chain(parts.replicas().map(|p| p.key.as_str()));
    for h in peers
        .filter_map(|a| run.host_with_address(a))
        .chain(run.hosts.iter().filter(|h| h.switch))
    {
        if !out.iter().any(|o| o.name == h.name) {
            out.push(h);
        }
    }
    out
}

/// Scores every signal: correlation at the best lag with `p99`, levels in and out of the
/// raised intervals (when there are any).
pub fn score(
    signals: &[Signal],
    p99: &Series,
    raised: Option<&[usize]>,
    t: &Thresholds,
) -> Vec<SignalScore> {
    let n = p99.len();
    let everything = all(n);
    signals
        .iter()
        .map(|s| {
            let counter = s.kind.is_counter();
            let level = |idx: &[usize]| {
                if counter {
                    sum_over(&s.series, idx)
                } else {
                    mean_over(&s.series, idx)
                }
            };
            let corr = best_lag(p99, &s.series, t.max_lag, t.min_correlation_points);
            // Judged at the raised intervals, or else where the signal leads or follows
            // them by its best lag, when that correlation is strong.
            let judged = raised.map(|r| {
                let raised = r;
                let at = |shift: i32| {
                    let r = shifted(raised, shift, n);
                    let o: Vec<usize> = everything
                        .iter()
                        .copied()
                        .filter(|i| !r.contains(i))
                        .collect();
                    let calm = away_from(&o, &[&r, raised]);
                    (
                        level(&r),
                        level(&calm),
                        rose(&s.series, &r, &calm, counter, t),
                        shift,
                        calm.len(),
                    )
                };
                let here = at(0);
                match corr.filter(|c| c.rho >= t.lagged_rise_correlation && c.lag != 0) {
                    Some(c) if !here.2 => Some(at(c.lag)).filter(|a| a.2).unwrap_or(here),
                    _ => here,
                }
            });
            let (r, o, rose, shift, others_intervals) = judged.unwrap_or((None, None, false, 0, 0));
            SignalScore {
                host: s.host.clone(),
                kind: s.kind,
                key: s.key.clone(),
                peer: s.peer.clone(),
                rho: corr.map(|c| c.rho),
                lag: corr.map(|c| c.lag),
                points: corr.map_or(0, |c| c.points),
                run: level(&everything),
                raised: r,
                others: o,
                rose,
                shift,
                others_intervals,
            }
        })
        .collect()
}

/// The intervals `lag` before each of `idx` (the signal's side when it leads by `lag`),
/// within the run's `n`.
fn shifted(idx: &[usize], lag: i32, n: usize) -> Vec<usize> {
    idx.iter()
        .filter_map(|&t| t.checked_add_signed(-(lag as isize)))
        .filter(|&i| i < n)
        .collect()
}

/// The intervals of `others` not next to (nor in) any of `edges`, when at least
/// `MIN_CALM` are left; else `others`. A fault seldom starts or ends on an interval's
/// boundary: the interval before its first raised one often holds its first burst of
/// retransmits, and counted as calm it would make the fault look like noise.
fn away_from(others: &[usize], edges: &[&[usize]]) -> Vec<usize> {
    const MIN_CALM: usize = 3;
    let near = |i: usize| {
        edges
            .iter()
            .flat_map(|e| e.iter())
            .any(|&e| e.abs_diff(i) <= 1)
    };
    let calm: Vec<usize> = others.iter().copied().filter(|&i| !near(i)).collect();
    if calm.len() >= MIN_CALM {
        calm
    } else {
        others.to_vec()
    }
}

/// Higher per interval in the raised intervals than in the others: by `rise_factor`, and
/// by more than three standard errors of the others' noise; a counter also needs
/// `min_events` there.
fn rose(s: &Series, raised: &[usize], others: &[usize], counter: bool, t: &Thresholds) -> bool {
    let Some(during) = mean_over(s, raised) else {
        return false;
    };
    if counter && sum_over(s, raised).unwrap_or(0.0) < t.min_events {
        return false;
    }
    let before: Vec<f64> = others.iter().filter_map(|&i| at(s, i)).collect();
    let k = raised.iter().filter(|&&i| at(s, i).is_some()).count() as f64;
    let (mean, sd) = mean_sd(&before);
    during > 0.0 && during > t.rise_factor * mean && during - mean > 3.0 * sd / k.sqrt()
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_reasons_are_classed() {
        assert_eq!(drop_class("qdisc_drop"), DropClass::Congestion);
        assert_eq!(drop_class("QDISC_OVERLIMIT"), DropClass::Congestion);
        assert_eq!(drop_class("pkt_too_big"), DropClass::Length);
        assert_eq!(drop_class("netfilter_drop"), DropClass::Loss);
        assert_eq!(drop_class("TCP_CSUM"), DropClass::Loss);
        assert_eq!(drop_class("not_specified"), DropClass::Other);
        assert_eq!(drop_class("tcp_old_data"), DropClass::Other);
    }

    #[test]
    fn a_counter_rises_only_with_enough_events() {
        let t = Thresholds::default();
        let s: Series = [0.0, 0.0, 0.0, 0.0, 2.0, 2.0]
            .iter()
            .map(|v| Some(*v))
            .collect();
        assert!(!rose(&s, &[4, 5], &[0, 1, 2, 3], true, &t));
        assert!(rose(&s, &[4, 5], &[0, 1, 2, 3], false, &t));
        let s: Series = [1.0, 1.0, 1.0, 1.0, 9.0, 9.0]
            .iter()
            .map(|v| Some(*v))
            .collect();
        assert!(rose(&s, &[4, 5], &[0, 1, 2, 3], true, &t));
        assert!(!rose(&s, &[0, 1], &[2, 3, 4, 5], true, &t));
    }

    #[test]
    fn noise_in_the_other_intervals_raises_the_bar() {
        let t = Thresholds::default();
        // Others alternate 0 and 6 (mean 3, sd 3); raised at 5 per interval over 4
        // intervals is within three standard errors (4.5) of the noise.
        let mut v = vec![0.0, 6.0, 0.0, 6.0, 0.0, 6.0, 0.0, 6.0];
        v.extend([5.0; 4]);
        let s: Series = v.iter().map(|x| Some(*x)).collect();
        assert!(!rose(
            &s,
            &[8, 9, 10, 11],
            &[0, 1, 2, 3, 4, 5, 6, 7],
            true,
            &t
        ));
        let s: Series = v
            .iter()
            .map(|x| Some(if *x == 5.0 { 20.0 } else { *x }))
            .collect();
        assert!(rose(
            &s,
            &[8, 9, 10, 11],
            &[0, 1, 2, 3, 4, 5, 6, 7],
            true,
            &t
        ));
    }

    #[test]
    fn the_faults_first_burst_next_to_the_raised_intervals_is_not_taken_for_noise() {
        let t = Thresholds::default();
        // Measured on a Ceph OSD host: the port toward a replica turned shallow late in
        // interval 7, whose p99 stayed under the threshold but which already held 5,000
        // retransmits; latency was raised in 8..12 with about 2,400 per interval.
        let mut resent = vec![25.0; 13];
        resent[7] = 5_000.0;
        for v in &mut resent[8..] {
            *v = 2_400.0;
        }
        let mut p99 = vec![0.02; 13];
        for v in &mut p99[8..] {
            *v = 0.5;
        }
        let series = |v: &[f64]| -> Series { v.iter().map(|x| Some(*x)).collect() };
        let signal = Signal {
            host: "h3".into(),
            kind: SignalKind::Retransmits,
            key: "198.18.0.2".into(),
            peer: Some("198.18.0.2".into()),
            interface: None,
            series: series(&resent),
        };
        let raised: Vec<usize> = (8..13).collect();
        let others: Vec<usize> = (0..8).collect();
        // Against every other interval, the burst in 7 is noise as large as the rise.
        assert!(!rose(&signal.series, &raised, &others, true, &t));
        let s = &score(&[signal], &series(&p99), Some(&raised), &t)[0];
        assert!(s.rose, "{s:?}");
        // The levels reported are those it was judged by.
        assert_eq!(
            (s.raised, s.others, s.others_intervals),
            (Some(12_000.0), Some(175.0), 7)
        );
    }

    #[test]
    fn the_edges_are_kept_when_too_few_other_intervals_are_left() {
        assert_eq!(away_from(&[0, 1, 2, 3, 7], &[&[5, 6]]), vec![0, 1, 2, 3]);
        assert_eq!(
            away_from(&[0, 1, 2, 3, 7, 8, 9], &[&[4, 5, 6]]),
            vec![0, 1, 2, 8, 9]
        );
        assert_eq!(away_from(&[0, 1, 5], &[&[3, 4]]), vec![0, 1, 5]);
        // A lag's intervals and the raised ones both have edges.
        assert_eq!(
            away_from(&[0, 1, 2, 3, 4, 9, 10, 11], &[&[6, 7], &[8, 9]]),
            vec![0, 1, 2, 3, 4, 11]
        );
    }

    #[test]
    fn a_signal_that_leads_the_rise_by_two_intervals_rose_with_it() {
        let t = Thresholds::default();
        let series = |v: &[f64]| -> Series { v.iter().map(|x| Some(*x)).collect() };
        // Latency raised in intervals 6 and 7; retransmits two intervals earlier (4 and 5).
        let mut p99 = vec![1.0; 12];
        p99[6] = 10.0;
        p99[7] = 9.0;
        let mut resent = vec![0.0; 12];
        resent[4] = 20.0;
        resent[5] = 20.0;
        let signal = Signal {
            host: "a".into(),
            kind: SignalKind::Retransmits,
            key: "198.18.0.2".into(),
            peer: Some("198.18.0.2".into()),
            interface: None,
            series: series(&resent),
        };
        // At the raised intervals themselves there is nothing.
        let here = shifted(&[6, 7], 0, 12);
        let others: Vec<usize> = (0..12).filter(|i| !here.contains(i)).collect();
        assert!(!rose(&signal.series, &here, &others, true, &t));
        let s = &score(&[signal], &series(&p99), Some(&[6, 7]), &t)[0];
        assert_eq!(s.lag, Some(2));
        assert!(s.rose, "{s:?}");
        // Compared with the intervals next to neither the raised nor the shifted ones.
        assert_eq!(
            (s.shift, s.raised, s.others, s.others_intervals),
            (2, Some(40.0), Some(0.0), 6)
        );
    }
}
