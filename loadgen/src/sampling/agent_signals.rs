//! Which of stornet-agent's metrics loadgen reads (named by the `metric-names` crate, the
//! agent's own source of names, so a metric renamed there is renamed here at compile time),
//! how each folds into a per-interval value, and how those values fill the analysis model
//! (`analysis::Host`). Both a run's own scrapes and fleet mode's Prometheus queries go
//! through this table.

use std::collections::{BTreeMap, BTreeSet};

use analysis::{BlockOp, Host, Interface, Peer, Qdisc, Series};
use serde::{Deserialize, Serialize};

use metric_names::{Metric, agent, block, net};
use promclient::text::Sample;

/// A value of the model, as read from one metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    BlockQueueSum,
    BlockQueueCount,
    BlockServiceSum,
    BlockServiceCount,
    /// Requests completed (the IO-size histogram's count).
    BlockRequests,
    BlockErrors,
    BlockInflight,
    BlockQueueLimit,
    /// A device, one device it sends its IO to, and the remote that serves it
    /// (`stornet_block_device_info`).
    BlockParent,
    TcpRetransmits,
    TcpSrtt,
    TcpPathMtu,
    TcpMss,
    SkbDrops,
    QdiscDrops,
    QdiscOverlimits,
    QdiscBacklog,
    InterfaceMtu,
    InterfaceRxPackets,
    InterfaceTxPackets,
    InterfaceRxDrops,
    InterfaceTxDrops,
    InterfaceRxErrors,
    InterfaceTxErrors,
    /// Time tasks stalled waiting for a resource (PSI), by resource and kind.
    PressureStalled,
    /// The agent's start time: a change means it restarted and its counters began again.
    AgentStart,
}

/// How a family's samples become per-interval values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    /// A counter: the interval's increase. `born_at_zero`: the agent creates the series at
    /// its first event (eBPF-counted), so a series absent from a complete scrape is 0;
    /// otherwise (kernel counters read from netlink) a new series' history is unknown.
    Counter { born_at_zero: bool },
    /// A gauge: its value at the end of the interval.
    Gauge,
}

/// How samples that share the key labels combine (other labels are folded away).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    Sum,
    Min,
    Max,
}

/// Which series of a metric: its own, or a histogram's `_sum` or `_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Value,
    Sum,
    Count,
}

impl Part {
    fn suffix(self) -> &'static str {
        match self {
            Part::Value => "",
            Part::Sum => "_sum",
            Part::Count => "_count",
        }
    }
}

pub struct SignalFamily {
    pub field: Field,
    /// The agent's metric, named in one place (the `metric-names` crate).
    pub metric: Metric,
    pub part: Part,
    /// The labels that tell series apart, in key order.
    pub labels: &'static [&'static str],
    pub kind: MetricType,
    pub fold: Fold,
}

const EBPF: MetricType = MetricType::Counter { born_at_zero: true };
const SNAPSHOT: MetricType = MetricType::Counter {
    born_at_zero: false,
};
const DEV_OP: &[&str] = &["device", "op"];
const QDISC: &[&str] = &["netns", "interface", "qdisc", "handle", "parent"];
const IFACE: &[&str] = &["netns", "interface"];

const fn family(
    field: Field,
    metric: Metric,
    part: Part,
    labels: &'static [&'static str],
    kind: MetricType,
    fold: Fold,
) -> SignalFamily {
    SignalFamily {
        field,
        metric,
        part,
        labels,
        kind,
        fold,
    }
}

/// Every family the analysis uses.
pub const FAMILIES: &[SignalFamily] = &[
    family(
        Field::BlockQueueSum,
        block::QUEUE_SECONDS,
        Part::Sum,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockQueueCount,
        block::QUEUE_SECONDS,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockServiceSum,
        block::SERVICE_SECONDS,
        Part::Sum,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockServiceCount,
        block::SERVICE_SECONDS,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockRequests,
        block::IO_SIZE_BYTES,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockErrors,
        block::ERRORS_TOTAL,
        Part::Value,
        DEV_OP,
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::BlockInflight,
        block::INFLIGHT,
        Part::Value,
        &["device"],
        MetricType::Gauge,
        Fold::Sum,
    ),
    // `limit` is nr_requests or the device's own queue depth: the smaller one binds.
    family(
        Field::BlockQueueLimit,
        block::QUEUE_LIMIT,
        Part::Value,
        &["device"],
        MetricType::Gauge,
        Fold::Min,
    ),
    family(
        Field::BlockParent,
        block::DEVICE_INFO,
        Part::Value,
        &["device", "parent", "peer"],
        MetricType::Gauge,
        Fold::Max,
    ),
    family(
        Field::TcpRetransmits,
        net::TCP_RETRANSMITS_TOTAL,
        Part::Value,
        &["peer"],
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::TcpSrtt,
        net::TCP_SRTT_SECONDS,
        Part::Value,
        &["peer"],
        MetricType::Gauge,
        Fold::Max,
    ),
    family(
        Field::TcpPathMtu,
        net::TCP_PATH_MTU_BYTES,
        Part::Value,
        &["peer"],
        MetricType::Gauge,
        Fold::Min,
    ),
    family(
        Field::TcpMss,
        net::TCP_MSS_BYTES,
        Part::Value,
        &["peer"],
        MetricType::Gauge,
        Fold::Min,
    ),
    family(
        Field::SkbDrops,
        net::SKB_DROPS_TOTAL,
        Part::Value,
        &["reason"],
        EBPF,
        Fold::Sum,
    ),
    family(
        Field::QdiscDrops,
        net::QDISC_DROPS_TOTAL,
        Part::Value,
        QDISC,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::QdiscOverlimits,
        net::QDISC_OVERLIMITS_TOTAL,
        Part::Value,
        QDISC,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::QdiscBacklog,
        net::QDISC_BACKLOG_BYTES,
        Part::Value,
        QDISC,
        MetricType::Gauge,
        Fold::Sum,
    ),
    family(
        Field::InterfaceMtu,
        net::INTERFACE_MTU,
        Part::Value,
        IFACE,
        MetricType::Gauge,
        Fold::Max,
    ),
    family(
        Field::InterfaceRxPackets,
        net::INTERFACE_RECEIVE_PACKETS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::InterfaceTxPackets,
        net::INTERFACE_TRANSMIT_PACKETS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::InterfaceRxDrops,
        net::INTERFACE_RECEIVE_DROPPED_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::InterfaceTxDrops,
        net::INTERFACE_TRANSMIT_DROPPED_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::InterfaceRxErrors,
        net::INTERFACE_RECEIVE_ERRORS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::InterfaceTxErrors,
        net::INTERFACE_TRANSMIT_ERRORS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::PressureStalled,
        metric_names::host::PRESSURE_STALLED_SECONDS_TOTAL,
        Part::Value,
        &["resource", "kind"],
        SNAPSHOT,
        Fold::Sum,
    ),
    family(
        Field::AgentStart,
        agent::START_TIME_SECONDS,
        Part::Value,
        &[],
        MetricType::Gauge,
        Fold::Max,
    ),
];

/// The block-layer latency histograms (`_bucket` series with `le`), for fleet mode's
/// percentiles.
pub const QUEUE_HISTOGRAM: &str = block::QUEUE_SECONDS.name;
pub const SERVICE_HISTOGRAM: &str = block::SERVICE_SECONDS.name;

/// The namespace label value of the agent's own network namespace.
const OWN_NAMESPACE: &str = "host";

pub fn family_of(field: Field) -> &'static SignalFamily {
    FAMILIES
        .iter()
        .find(|f| f.field == field)
        .expect("every field has a family")
}

impl SignalFamily {
    /// The name of the series read, e.g. `stornet_block_queue_seconds_sum`.
    pub fn series(&self) -> String {
        format!("{}{}", self.metric.name, self.part.suffix())
    }

    fn is_series(&self, name: &str) -> bool {
        name.strip_suffix(self.part.suffix()) == Some(self.metric.name)
    }
}

fn by_metric(name: &str) -> Option<&'static SignalFamily> {
    FAMILIES.iter().find(|f| f.is_series(name))
}

/// Whether a scrape needs samples of this metric.
pub fn wanted(metric: &str) -> bool {
    by_metric(metric).is_some()
}

/// One series of a field: the field and its key label values (missing labels are empty).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub field: Field,
    pub labels: Vec<String>,
}

impl Key {
    pub fn new(field: Field, labels: &[&str]) -> Key {
        Key {
            field,
            labels: labels.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Values of one scrape, by key.
pub type Reading = BTreeMap<Key, f64>;

/// Folds a scrape's samples into one value per key. Values that are not finite are left out.
pub fn reading(samples: &[Sample]) -> Reading {
    let mut out = Reading::new();
    for s in samples {
        let Some(f) = by_metric(&s.name) else {
            continue;
        };
        if !s.value.is_finite() {
            continue;
        }
        let key = Key {
            field: f.field,
            labels: f
                .labels
                .iter()
                .map(|l| s.label(l).unwrap_or_default().to_string())
                .collect(),
        };
        out.entry(key)
            .and_modify(|v| {
                *v = match f.fold {
                    Fold::Sum => *v + s.value,
                    Fold::Min => v.min(s.value),
                    Fold::Max => v.max(s.value),
                }
            })
            .or_insert(s.value);
    }
    out
}

/// The model's name of an interface: its own name in the agent's namespace, `NS/NAME` in
/// another one.
pub fn interface_name(namespace: &str, interface: &str) -> String {
    if namespace.is_empty() || namespace == OWN_NAMESPACE {
        interface.to_string()
    } else {
        format!("{namespace}/{interface}")
    }
}

/// The replica address a latency leg is about: the address in a leg name such as
/// `replica 198.18.0.2:7000` (the port dropped), else the name itself.
pub fn replica_address(leg: &str) -> String {
    let last = leg.split_whitespace().last().unwrap_or(leg);
    if let Ok(sa) = last.parse::<std::net::SocketAddr>() {
        return sa.ip().to_string();
    }
    if let Ok(ip) = last.parse::<std::net::IpAddr>() {
        return ip.to_string();
    }
    leg.to_string()
}

/// Leaves out TCP peers that are the host's own addresses: a connection to itself is no
/// network path (an agent counts retransmits in every namespace, so its own address shows
/// up as the peer of connections toward it).
pub fn drop_own_peers(h: &mut Host) {
    let own = h.addresses.clone();
    h.peers.retain(|addr, _| !own.contains(addr));
}

/// Per-interval values of one agent (or one Prometheus instance), by key.
pub type Values = BTreeMap<Key, Series>;

fn ratio(a: Option<&Series>, b: Option<&Series>, n: usize) -> Series {
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    (0..n)
        .map(|i| {
            let (x, y) = (a.get(i).copied().flatten()?, b.get(i).copied().flatten()?);
            (y > 0.0).then(|| x / y)
        })
        .collect()
}

/// Fills a host of the analysis model from its per-interval values.
pub fn host(name: &str, addresses: Vec<String>, v: &Values, n: usize) -> Host {
    let get = |field: Field, labels: &[String]| {
        v.get(&Key {
            field,
            labels: labels.to_vec(),
        })
    };
    let keys = |field: Field| v.keys().filter(move |k| k.field == field);
    let mut h = Host {
        name: name.to_string(),
        addresses,
        ..Host::default()
    };

    // Block devices, per op.
    let dev_ops: BTreeSet<Vec<String>> = v
        .keys()
        .filter(|k| family_of(k.field).labels == DEV_OP)
        .map(|k| k.labels.clone())
        .collect();
    for l in &dev_ops {
        let ios = get(Field::BlockRequests, l).or(get(Field::BlockServiceCount, l));
        let op = BlockOp {
            ios: ios.cloned().unwrap_or_default(),
            queue_seconds: ratio(
                get(Field::BlockQueueSum, l),
                get(Field::BlockQueueCount, l),
                n,
            ),
            service_seconds: ratio(
                get(Field::BlockServiceSum, l),
                get(Field::BlockServiceCount, l),
                n,
            ),
            errors: get(Field::BlockErrors, l).cloned().unwrap_or_default(),
        };
        h.devices
            .entry(l[0].clone())
            .or_default()
            .ops
            .insert(l[1].clone(), op);
    }
    for k in keys(Field::BlockInflight) {
        h.devices.entry(k.labels[0].clone()).or_default().inflight = v[k].clone();
    }
    for k in keys(Field::BlockQueueLimit) {
        h.devices
            .entry(k.labels[0].clone())
            .or_default()
            .queue_limit = v[k].clone();
    }
    h.devices.retain(|name, _| !name.is_empty());
    // What each device with IO sits on, and who serves it over the network, as the last
    // interval that read it says.
    for k in keys(Field::BlockParent) {
        let (device, parent, peer) = (&k.labels[0], &k.labels[1], &k.labels[2]);
        let listed = v[k].iter().rev().find_map(|x| *x).is_some_and(|x| x > 0.0);
        let Some(d) = h.devices.get_mut(device).filter(|_| listed) else {
            continue;
        };
        if !parent.is_empty() && !d.parents.contains(parent) {
            d.parents.push(parent.clone());
        }
        if !peer.is_empty() {
            d.peer = Some(replica_address(peer));
        }
    }

    // TCP peers.
    let peer_fields = [
        Field::TcpRetransmits,
        Field::TcpSrtt,
        Field::TcpPathMtu,
        Field::TcpMss,
    ];
    for k in v.keys().filter(|k| peer_fields.contains(&k.field)) {
        // `other` folds peers beyond the agent's cap; a loopback peer is this host itself.
        let addr = &k.labels[0];
        let local = addr
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
        if addr.is_empty() || addr == "other" || local {
            continue;
        }
        let p: &mut Peer = h.peers.entry(addr.clone()).or_default();
        let s = v[k].clone();
        match k.field {
            Field::TcpRetransmits => p.retransmits = s,
            Field::TcpSrtt => p.srtt_seconds = s,
            Field::TcpPathMtu => p.path_mtu_bytes = s,
            _ => p.mss_bytes = s,
        }
    }

    for k in keys(Field::SkbDrops) {
        h.skb_drops.insert(k.labels[0].clone(), v[k].clone());
    }
    let cpu_some = ["cpu".to_string(), "some".to_string()];
    if let Some(s) = get(Field::PressureStalled, &cpu_some) {
        h.cpu_stalled_seconds = s.clone();
    }

    // Qdiscs: named by kind, with handle and parent only where needed to tell them apart.
    let qdiscs: BTreeSet<Vec<String>> = v
        .keys()
        .filter(|k| family_of(k.field).labels == QDISC)
        .map(|k| k.labels.clone())
        .collect();
    for l in &qdiscs {
        let same = |upto: usize| {
            qdiscs
                .iter()
                .filter(|o| o[..2] == l[..2] && o[2..upto] == l[2..upto])
                .count()
        };
        let name = if same(3) == 1 {
            l[2].clone()
        } else if same(4) == 1 {
            format!("{} {}", l[2], l[3])
        } else {
            format!("{} {} {}", l[2], l[3], l[4])
        };
        h.qdiscs.push(Qdisc {
            interface: interface_name(&l[0], &l[1]),
            qdisc: name,
            drops: get(Field::QdiscDrops, l).cloned().unwrap_or_default(),
            backlog_bytes: get(Field::QdiscBacklog, l).cloned().unwrap_or_default(),
            overlimits: get(Field::QdiscOverlimits, l).cloned().unwrap_or_default(),
        });
    }

    // Interfaces, without loopback.
    for k in v.keys().filter(|k| family_of(k.field).labels == IFACE) {
        if k.labels[1] == "lo" || k.labels[1].is_empty() {
            continue;
        }
        let i: &mut Interface = h
            .interfaces
            .entry(interface_name(&k.labels[0], &k.labels[1]))
            .or_default();
        let s = v[k].clone();
        match k.field {
            Field::InterfaceMtu => i.mtu_bytes = s,
            Field::InterfaceRxPackets => i.rx_packets = s,
            Field::InterfaceTxPackets => i.tx_packets = s,
            Field::InterfaceRxDrops => i.rx_drops = s,
            Field::InterfaceTxDrops => i.tx_drops = s,
            Field::InterfaceRxErrors => i.rx_errors = s,
            _ => i.tx_errors = s,
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use promclient::text::parse;

    #[test]
    fn every_field_has_exactly_one_family() {
        for f in FAMILIES {
            assert_eq!(family_of(f.field).metric, f.metric);
            assert_eq!(
                FAMILIES.iter().filter(|g| g.series() == f.series()).count(),
                1
            );
        }
    }

    #[test]
    fn a_scrape_folds_into_keys() {
        let text = "stornet_block_queue_limit{device=\"loop3\",limit=\"nr_requests\"} 128\n\
                    stornet_block_queue_limit{device=\"loop3\",limit=\"device_queue_depth\"} 31\n\
                    stornet_block_errors_total{device=\"loop3\",op=\"write\",error=\"ioerr\"} 2\n\
                    stornet_block_errors_total{device=\"loop3\",op=\"write\",error=\"timeout\"} 3\n\
                    stornet_block_queue_seconds_bucket{device=\"loop3\",op=\"write\",le=\"1\"} 3\n\
                    stornet_tcp_srtt_seconds{peer=\"198.18.0.2\"} NaN\n\
                    stornet_agent_start_time_seconds 1700000000\n\
                    unrelated_total 5\n";
        let r = reading(&parse(text).unwrap());
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(r[&Key::new(Field::BlockQueueLimit, &["loop3"])], 31.0);
        assert_eq!(r[&Key::new(Field::BlockErrors, &["loop3", "write"])], 5.0);
        assert_eq!(r[&Key::new(Field::AgentStart, &[])], 1.7e9);
    }

    #[test]
    fn values_fill_the_model() {
        let n = 2;
        let s = |a: f64, b: f64| -> Series { vec![Some(a), Some(b)] };
        let mut v = Values::new();
        let dev = ["loop3", "write"];
        v.insert(Key::new(Field::BlockQueueSum, &dev), s(0.2, 0.0));
        v.insert(Key::new(Field::BlockQueueCount, &dev), s(100.0, 0.0));
        v.insert(Key::new(Field::BlockServiceSum, &dev), s(1.0, 0.5));
        v.insert(Key::new(Field::BlockServiceCount, &dev), s(100.0, 50.0));
        v.insert(Key::new(Field::BlockRequests, &dev), s(100.0, 50.0));
        v.insert(Key::new(Field::BlockInflight, &["loop3"]), s(4.0, 4.0));
        v.insert(
            Key::new(Field::TcpRetransmits, &["198.18.0.2"]),
            s(3.0, 0.0),
        );
        v.insert(Key::new(Field::TcpRetransmits, &["other"]), s(9.0, 9.0));
        v.insert(Key::new(Field::TcpSrtt, &["127.0.0.1"]), s(1e-5, 1e-5));
        v.insert(Key::new(Field::SkbDrops, &["qdisc_drop"]), s(7.0, 1.0));
        for (h, p) in [("8001:", "root"), ("0:", "8001:1"), ("0:", "8001:2")] {
            v.insert(
                Key::new(Field::QdiscDrops, &["stn-a", "veth-a", "fq_codel", h, p]),
                s(1.0, 2.0),
            );
        }
        v.insert(
            Key::new(Field::QdiscDrops, &["host", "eth0", "tbf", "1:", "root"]),
            s(0.0, 0.0),
        );
        v.insert(
            Key::new(Field::InterfaceMtu, &["stn-a", "veth-a"]),
            s(9000.0, 9000.0),
        );
        v.insert(
            Key::new(Field::InterfaceMtu, &["stn-a", "lo"]),
            s(65536.0, 65536.0),
        );
        let h = host("h1", vec!["198.18.0.1".into()], &v, n);
        let op = &h.devices["loop3"].ops["write"];
        assert_eq!(op.queue_seconds, vec![Some(0.002), None], "0/0 is missing");
        assert_eq!(op.service_seconds, vec![Some(0.01), Some(0.01)]);
        assert_eq!(op.ios, s(100.0, 50.0));
        assert_eq!(h.devices["loop3"].inflight, s(4.0, 4.0));
        assert_eq!(h.peers.len(), 1, "`other` is no address, loopback no peer");
        assert_eq!(h.peers["198.18.0.2"].retransmits, s(3.0, 0.0));
        assert_eq!(h.skb_drops["qdisc_drop"], s(7.0, 1.0));
        let names: Vec<String> = h
            .qdiscs
            .iter()
            .map(|q| format!("{} {}", q.interface, q.qdisc))
            .collect();
        assert_eq!(
            names,
            [
                "eth0 tbf",
                "stn-a/veth-a fq_codel 0: 8001:1",
                "stn-a/veth-a fq_codel 0: 8001:2",
                "stn-a/veth-a fq_codel 8001:",
            ]
        );
        assert_eq!(h.interfaces.len(), 1, "loopback left out");
        assert_eq!(h.interfaces["stn-a/veth-a"].mtu_bytes, s(9000.0, 9000.0));
    }

    #[test]
    fn requests_come_from_the_io_size_count_or_else_the_service_count() {
        let mut v = Values::new();
        v.insert(
            Key::new(Field::BlockServiceCount, &["vda", "read"]),
            vec![Some(7.0)],
        );
        let h = host("h", Vec::new(), &v, 1);
        assert_eq!(h.devices["vda"].ops["read"].ios, vec![Some(7.0)]);
        assert!(h.devices["vda"].ops["read"].queue_seconds.is_empty());
    }

    #[test]
    fn the_hosts_own_address_is_no_peer() {
        let mut v = Values::new();
        for peer in ["198.18.0.1", "198.18.0.2"] {
            v.insert(Key::new(Field::TcpRetransmits, &[peer]), vec![Some(1.0)]);
        }
        let mut h = host("h1", vec!["198.18.0.1".into()], &v, 1);
        drop_own_peers(&mut h);
        assert_eq!(h.peers.keys().collect::<Vec<_>>(), ["198.18.0.2"]);
    }

    #[test]
    fn leg_names_give_replica_addresses() {
        assert_eq!(replica_address("replica 198.18.0.2:7000"), "198.18.0.2");
        assert_eq!(replica_address("replica [fd00::2]:7000"), "fd00::2");
        assert_eq!(replica_address("198.18.0.3"), "198.18.0.3");
        assert_eq!(replica_address("nop"), "nop");
    }
}
