//! The metric families of the snapshots: interface counters, MTU, speed and pause frames,
//! qdisc statistics and rates and the ECN echoes per namespace, and TCP socket statistics
//! per peer. Interfaces the filter leaves out have no series; those beyond the cap are
//! summed into `interface="other"` of their namespace (their root qdiscs by kind, their
//! counters kept monotonic; MTU has no sum and is left out).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::links;
use super::qdisc::{Qdisc, TC_H_ROOT, handle_name};
use super::sockdiag::TcpSocket;
use super::tcp_totals::{TcpCounts, TcpTotals};
use super::{NetSnapshot, PeerSockets};
use crate::host::interfaces::{InterfaceFilter, InterfaceLabels, Member, OTHER, OtherTotals};
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

/// A series of `interface="other"`: the metric, and its other label (the driver's counter
/// name of a pause counter, the kind of a root qdisc; empty for interface series).
type OtherKey = (&'static str, String);

/// The interface labels and the sums of `other`, kept from scrape to scrape, and this
/// scrape's values of the interfaces in `other`.
pub struct Interfaces {
    labels: InterfaceLabels,
    totals: OtherTotals<OtherKey>,
    counters: HashMap<Member, HashMap<OtherKey, u64>>,
    gauges: BTreeMap<(String, OtherKey), u64>,
}

impl Interfaces {
    pub fn new(max: usize) -> Interfaces {
        Interfaces {
            labels: InterfaceLabels::new(max),
            totals: OtherTotals::default(),
            counters: HashMap::new(),
            gauges: BTreeMap::new(),
        }
    }

    /// Starts a scrape of the namespaces `snaps`: frees the places of interfaces gone.
    pub fn start(&mut self, snaps: &[(String, NetSnapshot)], filter: &InterfaceFilter) {
        let present: HashSet<Member> = snaps
            .iter()
            .flat_map(|(ns, s)| {
                s.links
                    .iter()
                    .filter(|l| filter.allows(&l.name))
                    .map(|l| (ns.clone(), l.index))
            })
            .collect();
        self.labels.retain(&present);
        self.counters.clear();
        self.gauges.clear();
    }

    fn counter(&mut self, ns: &str, index: i32, key: OtherKey, v: u64) {
        *self
            .counters
            .entry((ns.to_string(), index))
            .or_default()
            .entry(key)
            .or_default() += v;
    }

    fn gauge(&mut self, ns: &str, key: OtherKey, v: u64) {
        *self.gauges.entry((ns.to_string(), key)).or_default() += v;
    }
}

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
    pub(super) fn add(
        &mut self,
        ns: &str,
        snap: &NetSnapshot,
        interfaces: bool,
        filter: &InterfaceFilter,
        state: &mut Interfaces,
    ) {
        // The interfaces reported: by name (Some), or in `other` (None).
        let mut names: HashMap<i32, Option<&str>> = HashMap::new();
        for l in snap.links.iter().filter(|l| filter.allows(&l.name)) {
            let own = state.labels.named(ns, l.index);
            names.insert(l.index, own.then_some(l.name.as_str()));
            if own {
                self.add_link(ns, snap, l, interfaces);
            } else {
                fold_link(ns, snap, l, interfaces, state);
            }
        }
        if let Some(v) = snap.delivered_ce {
            self.delivered_ce.scalar(&[(NETNS, ns)], v as f64);
        }
        for q in &snap.qdiscs {
            // A qdisc of an interface left out, or of one that came after the link dump
            // (reported at the next scrape), has no series.
            let Some(dev) = names.get(&q.ifindex) else {
                continue;
            };
            let Some(dev) = dev else {
                if q.parent == TC_H_ROOT {
                    fold_qdisc(ns, q, state);
                }
                continue;
            };
            let handle = handle_name(q.handle);
            let parent = handle_name(q.parent);
            let labels = [
                (NETNS, ns),
                (INTERFACE, *dev),
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

    /// The series of one interface reported by name.
    fn add_link(&mut self, ns: &str, snap: &NetSnapshot, l: &links::Link, interfaces: bool) {
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

    /// The `interface="other"` series of this scrape, from what `add` folded.
    pub(super) fn add_other(&mut self, state: &mut Interfaces) {
        let counters = state.totals.update(std::mem::take(&mut state.counters));
        let gauges = std::mem::take(&mut state.gauges);
        for ((ns, (metric, extra)), v) in counters.into_iter().chain(gauges) {
            let v = v as f64;
            if metric == net::INTERFACE_PAUSE_FRAMES_TOTAL.name {
                let labels = [(NETNS, ns.as_str()), (INTERFACE, OTHER), (COUNTER, &extra)];
                self.pause.scalar(&labels, v);
                continue;
            }
            if let Some(f) = self.qdisc_family(metric) {
                let labels = [
                    (NETNS, ns.as_str()),
                    (INTERFACE, OTHER),
                    (QDISC, extra.as_str()),
                    (HANDLE, OTHER),
                    (PARENT, "root"),
                ];
                f.scalar(&labels, v);
            } else if let Some(f) = self.link_family(metric) {
                f.scalar(&[(NETNS, ns.as_str()), (INTERFACE, OTHER)], v);
            }
        }
    }

    fn qdisc_family(&mut self, name: &str) -> Option<&mut MetricFamily> {
        std::iter::once(&mut self.qdisc_rate)
            .chain(self.qdisc.iter_mut().map(|(f, _)| f))
            .find(|f| f.name == name)
    }

    fn link_family(&mut self, name: &str) -> Option<&mut MetricFamily> {
        [&mut self.speed, &mut self.rx_pause, &mut self.tx_pause]
            .into_iter()
            .chain(self.counters.iter_mut().map(|(f, _)| f))
            .find(|f| f.name == name)
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

/// Adds an interface beyond the cap to its namespace's `other`: counters and summable
/// gauges (speed); not its MTU.
fn fold_link(
    ns: &str,
    snap: &NetSnapshot,
    l: &links::Link,
    interfaces: bool,
    state: &mut Interfaces,
) {
    let key = |m: &Metric| (m.name, String::new());
    if let Some(bps) = snap.speeds.get(&l.index) {
        state.gauge(ns, key(&net::INTERFACE_SPEED_BYTES_PER_SECOND), *bps / 8);
    }
    if let (true, Some(stats)) = (interfaces, &l.stats) {
        for (m, get) in LINK_COUNTERS {
            state.counter(ns, l.index, key(m), get(stats));
        }
    }
    for (name, v) in snap.pause.get(&l.index).into_iter().flatten() {
        let k = (net::INTERFACE_PAUSE_FRAMES_TOTAL.name, name.clone());
        state.counter(ns, l.index, k, *v);
    }
    if let Some(p) = snap.pause_stats.get(&l.index) {
        for (m, v) in [
            (&net::INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL, p.rx_frames),
            (&net::INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL, p.tx_frames),
        ] {
            if let Some(v) = v {
                state.counter(ns, l.index, key(m), v);
            }
        }
    }
}

/// Adds a root qdisc of an interface beyond the cap to `other`, by kind: counters, backlog
/// and a shaper's rate (a classful root such as `mq` already holds its children's sums).
fn fold_qdisc(ns: &str, q: &Qdisc, state: &mut Interfaces) {
    for (m, get) in QDISC_STATS {
        let key = (m.name, q.kind.clone());
        if m.kind == metric_names::MetricType::Counter {
            state.counter(ns, q.ifindex, key, get(q));
        } else {
            state.gauge(ns, key, get(q));
        }
    }
    if let Some(r) = q.rate {
        let key = (net::QDISC_RATE_BYTES_PER_SECOND.name, q.kind.clone());
        state.gauge(ns, key, r);
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
            send_queue,
            notsent: Some(send_queue / 2),
            app_limited,
            ..TcpSocket::example(cookie)
        }
    }

    fn value(fams: &[MetricFamily], name: &str) -> Option<f64> {
        let f = fams.iter().find(|f| f.name == name)?;
        f.series.first().map(|s| match s.value {
            Value::Scalar(v) => v,
            _ => panic!("{name} is not a scalar"),
        })
    }

    fn link(index: i32, name: &str, rx_bytes: u64) -> links::Link {
        links::Link {
            index,
            name: name.into(),
            loopback: false,
            mtu: Some(1500),
            stats: Some(links::LinkStats {
                rx_bytes,
                ..Default::default()
            }),
        }
    }

    fn qdisc(ifindex: i32, kind: &str, parent: u32, drops: u64) -> Qdisc {
        Qdisc {
            ifindex,
            kind: kind.into(),
            handle: 0x8001_0000,
            parent,
            drops,
            backlog_bytes: 100,
            ..Default::default()
        }
    }

    /// eth0, eth1 and two container veths, each with a root qdisc (eth1 with a child).
    fn snap(eth1_rx: u64, with_eth0: bool) -> NetSnapshot {
        let mut links = vec![
            link(2, "eth1", eth1_rx),
            link(3, "veth1a2b3c4", 7),
            link(4, "eth2", 5),
        ];
        let mut qdiscs = vec![
            qdisc(2, "mq", TC_H_ROOT, 10),
            qdisc(2, "fq_codel", 0x8001_0001, 10),
            qdisc(3, "noqueue", TC_H_ROOT, 0),
            qdisc(4, "mq", TC_H_ROOT, 1),
        ];
        if with_eth0 {
            links.insert(0, link(1, "eth0", 1));
            qdiscs.push(qdisc(1, "mq", TC_H_ROOT, 0));
        }
        let speeds = links.iter().map(|l| (l.index, 8_000_000_000)).collect();
        NetSnapshot {
            links,
            speeds,
            pause: HashMap::new(),
            pause_stats: HashMap::new(),
            qdiscs,
            sockets: Vec::new(),
            retrans_segs: None,
            delivered_ce: None,
            failed: Vec::new(),
        }
    }

    fn scrape(state: &mut Interfaces, s: NetSnapshot) -> Vec<MetricFamily> {
        let filter = crate::config::NetConfig::default().interface_filter();
        let snaps = vec![("h1".to_string(), s)];
        state.start(&snaps, &filter);
        let mut f = Families::new();
        f.add("h1", &snaps[0].1, true, &filter, state);
        f.add_other(state);
        f.into_vec()
    }

    fn series(fams: &[MetricFamily], name: &str, interface: &str) -> Vec<(Vec<String>, f64)> {
        let f = fams.iter().find(|f| f.name == name).unwrap();
        f.series
            .iter()
            .filter(|s| {
                s.labels
                    .iter()
                    .any(|(k, v)| k == INTERFACE && v == interface)
            })
            .map(|s| {
                let labels = s.labels.iter().map(|(_, v)| v.clone()).collect();
                match s.value {
                    Value::Scalar(v) => (labels, v),
                    _ => panic!("{name} is not a scalar"),
                }
            })
            .collect()
    }

    #[test]
    fn interfaces_beyond_the_cap_fold_into_other_and_filtered_ones_vanish() {
        let mut state = Interfaces::new(1);
        let f = scrape(&mut state, snap(1000, true));
        let rx = net::INTERFACE_RECEIVE_BYTES_TOTAL.name;
        assert_eq!(series(&f, rx, "eth0").len(), 1, "the first takes the place");
        assert!(
            series(&f, rx, "veth1a2b3c4").is_empty(),
            "left out by default"
        );
        assert_eq!(series(&f, rx, OTHER)[0].1, 1005.0, "eth1 and eth2");
        assert!(series(&f, net::INTERFACE_MTU.name, OTHER).is_empty());
        let speed = net::INTERFACE_SPEED_BYTES_PER_SECOND.name;
        assert_eq!(series(&f, speed, OTHER)[0].1, 2e9, "two 8 Gb/s links");
        // Root qdiscs by kind; the fq_codel below eth1's mq is in the mq's sums.
        let drops = series(&f, net::QDISC_DROPS_TOTAL.name, OTHER);
        assert_eq!(
            drops,
            [(
                vec![
                    "h1".into(),
                    "other".into(),
                    "mq".into(),
                    "other".into(),
                    "root".into()
                ],
                11.0
            )]
        );
        let backlog = series(&f, net::QDISC_BACKLOG_BYTES.name, OTHER);
        assert_eq!(backlog[0].1, 200.0);
        assert!(series(&f, net::QDISC_DROPS_TOTAL.name, "veth1a2b3c4").is_empty());

        // eth0 goes: its series go at once and eth1 takes the free place, while other keeps
        // eth1's last count (monotonic) and adds eth2's.
        let f = scrape(&mut state, snap(2000, false));
        assert!(series(&f, rx, "eth0").is_empty());
        assert_eq!(series(&f, rx, "eth1")[0].1, 2000.0);
        assert_eq!(series(&f, rx, OTHER)[0].1, 1005.0);
        assert_eq!(series(&f, net::QDISC_DROPS_TOTAL.name, OTHER)[0].1, 11.0);
        assert_eq!(
            series(&f, speed, OTHER)[0].1,
            1e9,
            "gauges are this scrape's"
        );
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
