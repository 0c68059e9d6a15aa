//! The metric families of the snapshots: interface counters, MTU, speed and pause frames,
//! qdisc statistics and rates and the ECN echoes per namespace, and TCP socket statistics
//! per peer.

use std::collections::{HashMap, HashSet};

use super::links;
use super::qdisc::{Qdisc, handle_name};
use super::sockdiag::TcpSocket;
use super::tcp_totals::{TcpCounts, TcpTotals};
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
    rx_pause: MetricFamily,
    tx_pause: MetricFamily,
    qdisc: Vec<QdiscStat>,
    qdisc_rate: MetricFamily,
    delivered_ce: MetricFamily,
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
    (net::QDISC_SENT_BYTES_TOTAL, |q| q.sent_bytes),
    (net::QDISC_SENT_PACKETS_TOTAL, |q| q.sent_packets),
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
            rx_pause: MetricFamily::of(&net::INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL),
            tx_pause: MetricFamily::of(&net::INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL),
            qdisc: QDISC_STATS
                .iter()
                .map(|(m, value)| (MetricFamily::of(m), *value))
                .collect(),
            qdisc_rate: MetricFamily::of(&net::QDISC_RATE_BYTES_PER_SECOND),
            delivered_ce: MetricFamily::of(&net::NET_TCP_DELIVERED_CE_SEGMENTS_TOTAL),
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
            if let Some(p) = snap.pause_stats.get(&l.index) {
                if let Some(v) = p.rx_frames {
                    self.rx_pause.scalar(&labels, v as f64);
                }
                if let Some(v) = p.tx_frames {
                    self.tx_pause.scalar(&labels, v as f64);
                }
            }
        }
        if let Some(v) = snap.delivered_ce {
            self.delivered_ce.scalar(&[(NETNS, ns)], v as f64);
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
            if let Some(r) = q.rate {
                self.qdisc_rate.scalar(&labels, r as f64);
            }
        }
    }

    pub(super) fn into_vec(self) -> Vec<MetricFamily> {
        let mut out = vec![self.up, self.mtu, self.speed];
        out.extend(self.counters.into_iter().map(|(f, _)| f));
        out.extend([self.pause, self.rx_pause, self.tx_pause]);
        out.extend(self.qdisc.into_iter().map(|(f, _)| f));
        out.extend([self.qdisc_rate, self.delivered_ce]);
        out
    }
}

type PeerValue = fn(&TcpCounts) -> Option<u64>;

/// Per-peer counters: the metric, where its value is, and what to divide it by for the
/// metric's unit (microseconds to seconds).
const PEER_COUNTERS: &[(Metric, PeerValue, f64)] = &[
    (net::TCP_BUSY_SECONDS_TOTAL, |c| c.busy_us, 1e6),
    (
        net::TCP_RECEIVE_WINDOW_LIMITED_SECONDS_TOTAL,
        |c| c.rwnd_limited_us,
        1e6,
    ),
    (
        net::TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL,
        |c| c.sndbuf_limited_us,
        1e6,
    ),
    (net::TCP_DELIVERED_SEGMENTS_TOTAL, |c| c.delivered, 1.0),
    (
        net::TCP_DELIVERED_CE_SEGMENTS_TOTAL,
        |c| c.delivered_ce,
        1.0,
    ),
];

/// `stornet_tcp_*{peer}` from the sockets of every namespace read, (namespace inode,
/// socket); `read`: the namespaces whose sockets were read, for the per-peer counters kept
/// in `totals`.
pub fn socket_families(
    peers: &PeerLabels,
    sockets: Vec<(u64, TcpSocket)>,
    read: &HashSet<u64>,
    totals: &mut TcpTotals,
) -> Vec<MetricFamily> {
    let by_peer = peers.fold(
        sockets.into_iter().map(|s| (Some(s.1.peer), s)).collect(),
        |_| 1,
        |a: &mut Vec<(u64, TcpSocket)>, s| a.push(s),
    );
    let counters = totals.update(
        by_peer
            .iter()
            .flat_map(|(label, socks)| socks.iter().map(|(ns, s)| (label.as_str(), *ns, s))),
        read,
    );
    let mut count = MetricFamily::of(&net::TCP_SOCKETS);
    let mut srtt = MetricFamily::of(&net::TCP_SRTT_SECONDS);
    let mut srtt_max = MetricFamily::of(&net::TCP_SRTT_MAX_SECONDS);
    let mut pmtu = MetricFamily::of(&net::TCP_PATH_MTU_BYTES);
    let mut mss = MetricFamily::of(&net::TCP_MSS_BYTES);
    let mut send_queue = MetricFamily::of(&net::TCP_SEND_QUEUE_BYTES);
    let mut notsent = MetricFamily::of(&net::TCP_NOTSENT_BYTES);
    let mut delivery = MetricFamily::of(&net::TCP_DELIVERY_RATE_BYTES_PER_SECOND);
    let mut app_limited = MetricFamily::of(&net::TCP_APP_LIMITED_SOCKETS);
    for (peer, socks) in &by_peer {
        let mut p = PeerSockets::default();
        for (_, s) in socks {
            p.merge(&PeerSockets::of(s));
        }
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
        send_queue.scalar(&labels, p.send_queue_bytes as f64);
        if let Some(v) = p.notsent_bytes {
            notsent.scalar(&labels, v as f64);
        }
        if let Some(v) = p.delivery_rate {
            delivery.scalar(&labels, v as f64);
            app_limited.scalar(&labels, p.app_limited as f64);
        }
    }
    let mut out = vec![
        count,
        srtt,
        srtt_max,
        pmtu,
        mss,
        send_queue,
        notsent,
        delivery,
        app_limited,
    ];
    for (m, get, unit) in PEER_COUNTERS {
        let mut f = MetricFamily::of(m);
        for (peer, c) in &counters {
            if let Some(v) = get(c) {
                f.scalar(&[(PEER, peer.as_str())], v as f64 / unit);
            }
        }
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn socket(cookie: u64, send_queue: u32, app_limited: bool) -> TcpSocket {
        TcpSocket {
            peer: "198.18.0.2".parse().unwrap(),
            cookie,
            srtt_us: 2000,
            pmtu: 1500,
            snd_mss: 1448,
            send_queue,
            notsent: Some(send_queue / 2),
            delivery_rate: Some(5_000_000),
            app_limited,
            busy_us: Some(1_500_000),
            rwnd_limited_us: Some(0),
            sndbuf_limited_us: Some(250_000),
            delivered: Some(1000),
            delivered_ce: Some(7),
        }
    }

    fn value(fams: &[MetricFamily], name: &str) -> Option<f64> {
        let f = fams.iter().find(|f| f.name == name)?;
        f.series.first().map(|s| match s.value {
            Value::Scalar(v) => v,
            _ => panic!("{name} is not a scalar"),
        })
    }

    #[test]
    fn send_side_gauges_and_counters_per_peer() {
        let peers = PeerLabels::new(8);
        let mut totals = TcpTotals::default();
        let read = HashSet::from([1]);
        // Sending, path-limited; sending, app-limited; idle with an old sample.
        let socks = vec![
            (1, socket(1, 64_000, false)),
            (1, socket(2, 8_000, true)),
            (1, socket(3, 0, false)),
        ];
        let f = socket_families(&peers, socks, &read, &mut totals);
        assert_eq!(value(&f, net::TCP_SEND_QUEUE_BYTES.name), Some(72_000.0));
        assert_eq!(value(&f, net::TCP_NOTSENT_BYTES.name), Some(36_000.0));
        assert_eq!(
            value(&f, net::TCP_DELIVERY_RATE_BYTES_PER_SECOND.name),
            Some(10e6),
            "the sockets with data not yet acknowledged"
        );
        assert_eq!(value(&f, net::TCP_APP_LIMITED_SOCKETS.name), Some(1.0));
        assert_eq!(value(&f, net::TCP_BUSY_SECONDS_TOTAL.name), Some(4.5));
        assert_eq!(
            value(&f, net::TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL.name),
            Some(0.75)
        );
        assert_eq!(
            value(&f, net::TCP_DELIVERED_CE_SEGMENTS_TOTAL.name),
            Some(21.0)
        );
        // All three closed: the gauges go, the counters stay.
        let f = socket_families(&peers, Vec::new(), &read, &mut totals);
        assert_eq!(value(&f, net::TCP_SOCKETS.name), None);
        assert_eq!(value(&f, net::TCP_NOTSENT_BYTES.name), None);
        assert_eq!(value(&f, net::TCP_BUSY_SECONDS_TOTAL.name), Some(4.5));
        assert_eq!(
            value(&f, net::TCP_DELIVERED_SEGMENTS_TOTAL.name),
            Some(3000.0)
        );
    }
}
