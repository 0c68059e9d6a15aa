//! The metric families of the snapshots: interface counters, MTU, speed and pause frames,
//! qdisc statistics per namespace, and TCP socket statistics per peer.

use std::collections::HashMap;

use super::links;
use super::qdisc::{Qdisc, handle_name};
use super::sockdiag::TcpSocket;
use super::{NetSnapshot, PeerSockets};
use crate::model::MetricFamily;
use crate::net::peers::PeerLabels;
use metric_names::labels::{COUNTER, HANDLE, INTERFACE, NETNS, PARENT, PEER, QDISC};
use metric_names::{Metric, net};

/// A metric family and how to read its value from a link's or qdisc's statistics.
type LinkValue = fn(&links::LinkStats) -> u64;
type QdiscValue = fn(&Qdisc) -> u64;
type LinkCounter = (MetricFamily, LinkValue);
type QdiscStat = (MetricFamily, QdiscValue);

/// The families of one scrape, filled namespace by namespace.
pub(super) struct Families {
    pub(super) up: MetricFamily,
    mtu: MetricFamily,
    speed: MetricFamily,
    counters: Vec<LinkCounter>,
    pause: MetricFamily,
    qdisc: Vec<QdiscStat>,
}

/// Interface counters: the metric, and where its value is in the link's statistics.
const LINK_COUNTERS: &[(Metric, LinkValue)] = &[
    (net::INTERFACE_RECEIVE_BYTES_TOTAL, |s| s.rx_bytes),
    (net::INTERFACE_TRANSMIT_BYTES_TOTAL, |s| s.tx_bytes),
    (net::INTERFACE_RECEIVE_PACKETS_TOTAL, |s| s.rx_packets),
    (net::INTERFACE_TRANSMIT_PACKETS_TOTAL, |s| s.tx_packets),
    (net::INTERFACE_RECEIVE_ERRORS_TOTAL, |s| s.rx_errors),
    (net::INTERFACE_TRANSMIT_ERRORS_TOTAL, |s| s.tx_errors),
    (net::INTERFACE_RECEIVE_DROPPED_TOTAL, |s| s.rx_dropped),
    (net::INTERFACE_TRANSMIT_DROPPED_TOTAL, |s| s.tx_dropped),
    (net::INTERFACE_RECEIVE_MISSED_TOTAL, |s| s.rx_missed),
];

/// qdisc statistics: the metric, and where its value is.
const QDISC_STATS: &[(Metric, QdiscValue)] = &[
    (net::QDISC_DROPS_TOTAL, |q| q.drops),
    (net::QDISC_OVERLIMITS_TOTAL, |q| q.overlimits),
    (net::QDISC_REQUEUES_TOTAL, |q| q.requeues),
    (net::QDISC_BACKLOG_BYTES, |q| q.backlog_bytes),
    (net::QDISC_BACKLOG_PACKETS, |q| q.backlog_packets),
];

impl Families {
    pub(super) fn new() -> Families {
        Families {
            up: MetricFamily::of(&net::NAMESPACE_UP),
            mtu: MetricFamily::of(&net::INTERFACE_MTU),
            speed: MetricFamily::of(&net::INTERFACE_SPEED_BYTES_PER_SECOND),
            counters: LINK_COUNTERS
                .iter()
                .map(|(m, value)| (MetricFamily::of(m), *value))
                .collect(),
            pause: MetricFamily::of(&net::INTERFACE_PAUSE_FRAMES_TOTAL),
            qdisc: QDISC_STATS
                .iter()
                .map(|(m, value)| (MetricFamily::of(m), *value))
                .collect(),
        }
    }

    /// `interfaces`: whether the netlink collector is on (links may be read for ethtool
    /// alone, and then export nothing of their own).
    pub(super) fn add(&mut self, ns: &str, snap: &NetSnapshot, interfaces: bool) {
        let names: HashMap<i32, &str> = snap
            .links
            .iter()
            .map(|l| (l.index, l.name.as_str()))
            .collect();
        for l in &snap.links {
            let labels = [(NETNS, ns), (INTERFACE, l.name.as_str())];
            if let (true, Some(mtu)) = (interfaces, l.mtu) {
                self.mtu.scalar(&labels, mtu as f64);
            }
            if let Some(bps) = snap.speeds.get(&l.index) {
                self.speed.scalar(&labels, *bps as f64 / 8.0);
            }
            if let (true, Some(stats)) = (interfaces, &l.stats) {
                for (f, get) in &mut self.counters {
                    f.scalar(&labels, get(stats) as f64);
                }
            }
            for (name, v) in snap.pause.get(&l.index).into_iter().flatten() {
                self.pause.scalar(
                    &[(NETNS, ns), (INTERFACE, l.name.as_str()), (COUNTER, name)],
                    *v as f64,
                );
            }
        }
        for q in &snap.qdiscs {
            let dev = names
                .get(&q.ifindex)
                .map(|n| n.to_string())
                .unwrap_or_else(|| q.ifindex.to_string());
            let handle = handle_name(q.handle);
            let parent = handle_name(q.parent);
            let labels = [
                (NETNS, ns),
                (INTERFACE, dev.as_str()),
                (QDISC, q.kind.as_str()),
                (HANDLE, handle.as_str()),
                (PARENT, parent.as_str()),
            ];
            for (f, get) in &mut self.qdisc {
                f.scalar(&labels, get(q) as f64);
            }
        }
    }

    pub(super) fn into_vec(self) -> Vec<MetricFamily> {
        let mut out = vec![self.up, self.mtu, self.speed];
        out.extend(self.counters.into_iter().map(|(f, _)| f));
        out.push(self.pause);
        out.extend(self.qdisc.into_iter().map(|(f, _)| f));
        out
    }
}

/// `stornet_tcp_*{peer}` from the sockets of every namespace read.
pub fn socket_families(peers: &PeerLabels, sockets: Vec<TcpSocket>) -> Vec<MetricFamily> {
    let by_peer = peers.fold(
        sockets.into_iter().map(|s| (Some(s.peer), s)).collect(),
        |_| 1,
        |a: &mut PeerSockets, s| a.merge(&PeerSockets::of(&s)),
    );
    let mut count = MetricFamily::of(&net::TCP_SOCKETS);
    let mut srtt = MetricFamily::of(&net::TCP_SRTT_SECONDS);
    let mut srtt_max = MetricFamily::of(&net::TCP_SRTT_MAX_SECONDS);
    let mut pmtu = MetricFamily::of(&net::TCP_PATH_MTU_BYTES);
    let mut mss = MetricFamily::of(&net::TCP_MSS_BYTES);
    for (peer, p) in by_peer {
        let labels = [(PEER, peer.as_str())];
        count.scalar(&labels, p.sockets as f64);
        if p.with_rtt > 0 {
            srtt.scalar(&labels, p.srtt_sum_us as f64 / p.with_rtt as f64 / 1e6);
            srtt_max.scalar(&labels, p.srtt_max_us as f64 / 1e6);
        }
        if p.pmtu_min > 0 {
            pmtu.scalar(&labels, p.pmtu_min as f64);
        }
        if p.mss_min > 0 {
            mss.scalar(&labels, p.mss_min as f64);
        }
    }
    vec![count, srtt, srtt_max, pmtu, mss]
}
