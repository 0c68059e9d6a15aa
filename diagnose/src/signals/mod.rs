//! The metric-to-model table: which of stornet-agent's metrics the analysis reads (named by
//! the `metric-names` crate, the agent's own source of names, so a metric renamed there is
//! renamed here at compile time), how each folds into a per-interval value, and where its
//! values go in the analysis model (`analysis::Host`). A load generator's own scrapes during
//! a run and fleet mode's Prometheus queries both go through this table, and docs/metrics.md
//! shows it (`docs`).
//!
//! Reading one more metric: a [`Field`], its entry in [`FAMILIES`] with the [`Place`] its
//! values go (a device's, peer's or interface's series, added to `analysis`'s model; only
//! families combined with others, [`Place::Custom`], need code in `host.rs`), and
//! `UPDATE=1 cargo test -p stornet-diagnose` to render docs/metrics.md's table.

#[cfg(test)]
mod docs;
mod host;

pub use host::host;

use std::collections::BTreeMap;

use analysis::{Device, Host, Interface, Peer, Series};
use serde::{Deserialize, Serialize};

use metric_names::labels::{
    DEVICE, HANDLE, INTERFACE, KIND, NETNS, OP, PARENT, PEER, QDISC as QDISC_KIND, REASON, RESOURCE,
};
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
    TcpNotsent,
    TcpDelivered,
    TcpSendQueue,
    TcpDeliveryRate,
    TcpBusy,
    TcpRwndLimited,
    TcpSndbufLimited,
    SkbDrops,
    QdiscDrops,
    QdiscOverlimits,
    QdiscBacklog,
    QdiscSentBytes,
    QdiscRate,
    InterfaceMtu,
    InterfaceRxPackets,
    InterfaceTxPackets,
    InterfaceRxDrops,
    InterfaceTxDrops,
    InterfaceRxErrors,
    InterfaceTxErrors,
    InterfaceRxBytes,
    InterfaceTxBytes,
    InterfaceSpeed,
    InterfaceRxPause,
    InterfaceTxPause,
    /// Time tasks stalled waiting for a resource (PSI), by resource and kind.
    PressureStalled,
    /// Time the followed cgroup's CPU quota held it off the CPU.
    CpuThrottled,
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

/// Where a family's values go in the model.
#[derive(Clone, Copy)]
pub enum Place {
    /// `devices[device].NAME`, keyed by `device`.
    Device(&'static str, fn(&mut Device) -> &mut Series),
    /// `peers[peer].NAME`, keyed by `peer`; a peer that is no other host (`other`, loopback)
    /// is left out.
    Peer(&'static str, fn(&mut Peer) -> &mut Series),
    /// `interfaces[name].NAME`, keyed by `netns`, `interface` (named by [`interface_name`]);
    /// loopback is left out.
    Interface(&'static str, fn(&mut Interface) -> &mut Series),
    /// Combined with other families, or picked out by label, in `host.rs`: the text says
    /// where (Markdown, for the docs).
    Custom(&'static str),
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
    pub place: Place,
}

const EBPF: MetricType = MetricType::Counter { born_at_zero: true };
const SNAPSHOT: MetricType = MetricType::Counter {
    born_at_zero: false,
};
pub(crate) const DEV_OP: &[&str] = &[DEVICE, OP];
pub(crate) const QDISC: &[&str] = &[NETNS, INTERFACE, QDISC_KIND, HANDLE, PARENT];
pub(crate) const IFACE: &[&str] = &[NETNS, INTERFACE];

const fn family(
    field: Field,
    metric: Metric,
    part: Part,
    labels: &'static [&'static str],
    kind: MetricType,
    fold: Fold,
    place: Place,
) -> SignalFamily {
    SignalFamily {
        field,
        metric,
        part,
        labels,
        kind,
        fold,
        place,
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
        Place::Custom(
            "`devices[device].ops[op].queue_seconds`: `_sum` / `_count`, the mean per request",
        ),
    ),
    family(
        Field::BlockQueueCount,
        block::QUEUE_SECONDS,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
        Place::Custom(
            "`devices[device].ops[op].queue_seconds`: `_sum` / `_count`, the mean per request",
        ),
    ),
    family(
        Field::BlockServiceSum,
        block::SERVICE_SECONDS,
        Part::Sum,
        DEV_OP,
        EBPF,
        Fold::Sum,
        Place::Custom(
            "`devices[device].ops[op].service_seconds`: `_sum` / `_count`, the mean per request",
        ),
    ),
    family(
        Field::BlockServiceCount,
        block::SERVICE_SECONDS,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
        Place::Custom(
            "`devices[device].ops[op].service_seconds`: `_sum` / `_count`; and `ios` where the IO-size count is missing",
        ),
    ),
    family(
        Field::BlockRequests,
        block::IO_SIZE_BYTES,
        Part::Count,
        DEV_OP,
        EBPF,
        Fold::Sum,
        Place::Custom("`devices[device].ops[op].ios`"),
    ),
    family(
        Field::BlockErrors,
        block::ERRORS_TOTAL,
        Part::Value,
        DEV_OP,
        EBPF,
        Fold::Sum,
        Place::Custom("`devices[device].ops[op].errors`"),
    ),
    family(
        Field::BlockInflight,
        block::INFLIGHT,
        Part::Value,
        &[DEVICE],
        MetricType::Gauge,
        Fold::Sum,
        Place::Device("inflight", |d| &mut d.inflight),
    ),
    // `limit` is nr_requests or the device's own queue depth: the smaller one binds.
    family(
        Field::BlockQueueLimit,
        block::QUEUE_LIMIT,
        Part::Value,
        &[DEVICE],
        MetricType::Gauge,
        Fold::Min,
        Place::Device("queue_limit", |d| &mut d.queue_limit),
    ),
    family(
        Field::BlockParent,
        block::DEVICE_INFO,
        Part::Value,
        &[DEVICE, PARENT, PEER],
        MetricType::Gauge,
        Fold::Max,
        Place::Custom(
            "`devices[device].parents[]` and `.peer`, as the last interval that read them says",
        ),
    ),
    family(
        Field::TcpRetransmits,
        net::TCP_RETRANSMITS_TOTAL,
        Part::Value,
        &[PEER],
        EBPF,
        Fold::Sum,
        Place::Peer("retransmits", |p| &mut p.retransmits),
    ),
    family(
        Field::TcpSrtt,
        net::TCP_SRTT_SECONDS,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Max,
        Place::Peer("srtt_seconds", |p| &mut p.srtt_seconds),
    ),
    family(
        Field::TcpPathMtu,
        net::TCP_PATH_MTU_BYTES,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Min,
        Place::Peer("path_mtu_bytes", |p| &mut p.path_mtu_bytes),
    ),
    family(
        Field::TcpMss,
        net::TCP_MSS_BYTES,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Min,
        Place::Peer("mss_bytes", |p| &mut p.mss_bytes),
    ),
    family(
        Field::TcpNotsent,
        net::TCP_NOTSENT_BYTES,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Sum,
        Place::Peer("notsent_bytes", |p| &mut p.notsent_bytes),
    ),
    family(
        Field::TcpSendQueue,
        net::TCP_SEND_QUEUE_BYTES,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Sum,
        Place::Peer("send_queue_bytes", |p| &mut p.send_queue_bytes),
    ),
    family(
        Field::TcpDeliveryRate,
        net::TCP_DELIVERY_RATE_BYTES_PER_SECOND,
        Part::Value,
        &[PEER],
        MetricType::Gauge,
        Fold::Sum,
        Place::Peer("delivery_rate_bytes_per_second", |p| {
            &mut p.delivery_rate_bytes_per_second
        }),
    ),
    // Sums over the peer's sockets, read from TCP_INFO: a closed socket takes its time
    // away (a fall, read as missing), so they are not born at zero.
    family(
        Field::TcpBusy,
        net::TCP_BUSY_SECONDS_TOTAL,
        Part::Value,
        &[PEER],
        SNAPSHOT,
        Fold::Sum,
        Place::Peer("busy_seconds", |p| &mut p.busy_seconds),
    ),
    family(
        Field::TcpRwndLimited,
        net::TCP_RECEIVE_WINDOW_LIMITED_SECONDS_TOTAL,
        Part::Value,
        &[PEER],
        SNAPSHOT,
        Fold::Sum,
        Place::Peer("rwnd_limited_seconds", |p| &mut p.rwnd_limited_seconds),
    ),
    family(
        Field::TcpSndbufLimited,
        net::TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL,
        Part::Value,
        &[PEER],
        SNAPSHOT,
        Fold::Sum,
        Place::Peer("sndbuf_limited_seconds", |p| &mut p.sndbuf_limited_seconds),
    ),
    family(
        Field::TcpDelivered,
        net::TCP_DELIVERED_SEGMENTS_TOTAL,
        Part::Value,
        &[PEER],
        SNAPSHOT,
        Fold::Sum,
        Place::Peer("delivered_segments", |p| &mut p.delivered_segments),
    ),
    family(
        Field::SkbDrops,
        net::SKB_DROPS_TOTAL,
        Part::Value,
        &[REASON],
        EBPF,
        Fold::Sum,
        Place::Custom("`skb_drops[reason]`"),
    ),
    family(
        Field::QdiscDrops,
        net::QDISC_DROPS_TOTAL,
        Part::Value,
        QDISC,
        SNAPSHOT,
        Fold::Sum,
        Place::Custom("`qdiscs[].drops`"),
    ),
    family(
        Field::QdiscOverlimits,
        net::QDISC_OVERLIMITS_TOTAL,
        Part::Value,
        QDISC,
        SNAPSHOT,
        Fold::Sum,
        Place::Custom("`qdiscs[].overlimits`"),
    ),
    family(
        Field::QdiscBacklog,
        net::QDISC_BACKLOG_BYTES,
        Part::Value,
        QDISC,
        MetricType::Gauge,
        Fold::Sum,
        Place::Custom("`qdiscs[].backlog_bytes`"),
    ),
    family(
        Field::QdiscSentBytes,
        net::QDISC_SENT_BYTES_TOTAL,
        Part::Value,
        QDISC,
        SNAPSHOT,
        Fold::Sum,
        Place::Custom("`qdiscs[].sent_bytes`"),
    ),
    family(
        Field::QdiscRate,
        net::QDISC_RATE_BYTES_PER_SECOND,
        Part::Value,
        QDISC,
        MetricType::Gauge,
        Fold::Sum,
        Place::Custom("`qdiscs[].rate_bytes_per_second`"),
    ),
    family(
        Field::InterfaceMtu,
        net::INTERFACE_MTU,
        Part::Value,
        IFACE,
        MetricType::Gauge,
        Fold::Max,
        Place::Interface("mtu_bytes", |i| &mut i.mtu_bytes),
    ),
    family(
        Field::InterfaceRxPackets,
        net::INTERFACE_RECEIVE_PACKETS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("rx_packets", |i| &mut i.rx_packets),
    ),
    family(
        Field::InterfaceTxPackets,
        net::INTERFACE_TRANSMIT_PACKETS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("tx_packets", |i| &mut i.tx_packets),
    ),
    family(
        Field::InterfaceRxDrops,
        net::INTERFACE_RECEIVE_DROPPED_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("rx_drops", |i| &mut i.rx_drops),
    ),
    family(
        Field::InterfaceTxDrops,
        net::INTERFACE_TRANSMIT_DROPPED_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("tx_drops", |i| &mut i.tx_drops),
    ),
    family(
        Field::InterfaceRxErrors,
        net::INTERFACE_RECEIVE_ERRORS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("rx_errors", |i| &mut i.rx_errors),
    ),
    family(
        Field::InterfaceTxErrors,
        net::INTERFACE_TRANSMIT_ERRORS_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("tx_errors", |i| &mut i.tx_errors),
    ),
    family(
        Field::InterfaceRxBytes,
        net::INTERFACE_RECEIVE_BYTES_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("rx_bytes", |i| &mut i.rx_bytes),
    ),
    family(
        Field::InterfaceTxBytes,
        net::INTERFACE_TRANSMIT_BYTES_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("tx_bytes", |i| &mut i.tx_bytes),
    ),
    family(
        Field::InterfaceSpeed,
        net::INTERFACE_SPEED_BYTES_PER_SECOND,
        Part::Value,
        IFACE,
        MetricType::Gauge,
        Fold::Max,
        Place::Interface("speed_bytes_per_second", |i| &mut i.speed_bytes_per_second),
    ),
    family(
        Field::InterfaceRxPause,
        net::INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("rx_pause_frames", |i| &mut i.rx_pause_frames),
    ),
    family(
        Field::InterfaceTxPause,
        net::INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL,
        Part::Value,
        IFACE,
        SNAPSHOT,
        Fold::Sum,
        Place::Interface("tx_pause_frames", |i| &mut i.tx_pause_frames),
    ),
    family(
        Field::PressureStalled,
        metric_names::host::PRESSURE_STALLED_SECONDS_TOTAL,
        Part::Value,
        &[RESOURCE, KIND],
        SNAPSHOT,
        Fold::Sum,
        Place::Custom("`cpu_stalled_seconds`: `resource=\"cpu\"`, `kind=\"some\"`"),
    ),
    family(
        Field::CpuThrottled,
        metric_names::host::CPU_THROTTLED_SECONDS_TOTAL,
        Part::Value,
        &[],
        SNAPSHOT,
        Fold::Sum,
        Place::Custom("`cpu_throttled_seconds`"),
    ),
    family(
        Field::AgentStart,
        agent::START_TIME_SECONDS,
        Part::Value,
        &[],
        MetricType::Gauge,
        Fold::Max,
        Place::Custom("none: a change marks a restart, and the counters of that interval missing"),
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

#[cfg(test)]
mod tests {
    /// The labels a family keys its series by are labels its metric declares: a label
    /// renamed on the agent's side cannot leave the analysis reading nothing.
    #[test]
    fn every_family_keys_by_labels_its_metric_has() {
        for f in super::FAMILIES {
            for l in f.labels {
                assert!(
                    f.metric.labels.contains(l),
                    "{}: label {l} is not one of {:?}",
                    f.metric.name,
                    f.metric.labels
                );
            }
        }
    }

    use super::*;
    use promclient::text::parse;

    /// A place names the series it fills as the model's JSON does, and is keyed by the
    /// labels that say which device, peer or interface.
    #[test]
    fn places_name_the_series_they_fill() {
        let one: Series = vec![Some(1.0)];
        for f in FAMILIES {
            let (name, json, keys) = match f.place {
                Place::Device(name, field) => {
                    let mut d = Device::default();
                    *field(&mut d) = one.clone();
                    (name, serde_json::to_value(d).unwrap(), vec![DEVICE])
                }
                Place::Peer(name, field) => {
                    let mut p = Peer::default();
                    *field(&mut p) = one.clone();
                    (name, serde_json::to_value(p).unwrap(), vec![PEER])
                }
                Place::Interface(name, field) => {
                    let mut i = Interface::default();
                    *field(&mut i) = one.clone();
                    (name, serde_json::to_value(i).unwrap(), IFACE.to_vec())
                }
                Place::Custom(_) => continue,
            };
            assert_eq!(json[name], serde_json::json!([1.0]), "{}", f.metric.name);
            assert_eq!(f.labels.to_vec(), keys, "{}", f.metric.name);
        }
    }

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
    fn leg_names_give_replica_addresses() {
        assert_eq!(replica_address("replica 198.18.0.2:7000"), "198.18.0.2");
        assert_eq!(replica_address("replica [fd00::2]:7000"), "fd00::2");
        assert_eq!(replica_address("198.18.0.3"), "198.18.0.3");
        assert_eq!(replica_address("nop"), "nop");
    }
}
