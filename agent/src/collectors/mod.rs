//! The registry of the agent's collectors: one table, [`COLLECTORS`], from which the probe
//! list, `check`, the collector flags, the config file's `[collectors]` keys and the checked
//! docs (docs/agent.md's collector table, docs/metrics.md's probe table) all come. Each entry
//! says its name, what it exports (from `metric_names`) and where its data comes from: an
//! eBPF probe (its [`ProbeSpec`]: program, hook, maps) or a snapshot (read at each scrape, or every second in the background: [`background`]).
//!
//! Adding a probe: its `ProbeSpec` in [`probe_spec`], one `probe(&…)` line here, its program
//! in agent-ebpf and its reader in `block` or `net`. A disabled collector attaches nothing
//! and exports nothing.

pub mod background;
pub mod flags;
pub mod probe_spec;

use metric_names::{Metric, block, host, net};
use probe_spec::*;

pub use flags::CollectorFlags;

/// Where a collector's data comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// An eBPF probe, loaded at start and attached then or when needed ([`Attach`]).
    Probe(&'static ProbeSpec),
    /// Read from procfs, sysfs or netlink: at each scrape, or in the background (`background::NAMES`).
    Snapshot(Snapshot),
}

/// The scrape-time readers. The network ones share one pass over the namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshot {
    /// Interface counters, MTU and qdisc statistics (rtnetlink).
    Netlink,
    /// Established TCP sockets per peer: count, RTT, path MTU, MSS, send queue, delivery and
    /// the time limited (sock_diag); each namespace's ECN echoes (/proc/net/netstat).
    SockDiag,
    /// Link speed and pause-frame counters (ethtool ioctls).
    Ethtool,
    /// Time tasks stalled waiting for CPU, IO and memory (/proc/pressure).
    Pressure,
    /// What each block device is and sits on, and its transport and peer (sysfs).
    BlockTopology,
}

/// One collector.
#[derive(Clone, Copy, Debug)]
pub struct CollectorSpec {
    /// As `--collector.<name>`, `[collectors]` and (for a probe) `stornet_probe_up` know it.
    pub name: &'static str,
    /// The metric families it exports.
    pub exports: &'static [Metric],
    pub source: Source,
}

const fn probe(spec: &'static ProbeSpec) -> CollectorSpec {
    CollectorSpec {
        name: spec.name,
        exports: spec.metrics,
        source: Source::Probe(spec),
    }
}

const fn snapshot(name: &'static str, s: Snapshot, exports: &'static [Metric]) -> CollectorSpec {
    CollectorSpec {
        name,
        exports,
        source: Source::Snapshot(s),
    }
}

pub const NETLINK: &str = "netlink";
pub const SOCK_DIAG: &str = "sock_diag";
pub const ETHTOOL: &str = "ethtool";
pub const PRESSURE: &str = "pressure";
pub const BLOCK_TOPOLOGY: &str = "block_topology";
/// The eBPF maps' fill (`self_metrics::map_fill`), a reader but not a collector one can turn
/// off.
pub const MAP_FILL: &str = "map_fill";

/// Every collector: the probes in the order they attach and are listed, then the snapshots.
pub const COLLECTORS: &[CollectorSpec] = &[
    probe(&BLOCK_ISSUE),
    probe(&BLOCK_COMPLETION),
    probe(&BLOCK_REQUEUE),
    probe(&BLOCK_ISSUER),
    probe(&BLOCK_BIO_QUEUE),
    probe(&BLOCK_BIO_COMPLETION),
    probe(&TCP_RETRANSMIT),
    probe(&TCP_RETRANSMIT_SYNACK),
    probe(&SKB_DROP),
    probe(&SOCK_EXCEED_BUF_LIMIT),
    probe(&SOCK_RCVQUEUE_FULL),
    snapshot(
        NETLINK,
        Snapshot::Netlink,
        &[
            net::INTERFACE_MTU,
            net::INTERFACE_RECEIVE_BYTES_TOTAL,
            net::INTERFACE_TRANSMIT_BYTES_TOTAL,
            net::INTERFACE_RECEIVE_PACKETS_TOTAL,
            net::INTERFACE_TRANSMIT_PACKETS_TOTAL,
            net::INTERFACE_RECEIVE_ERRORS_TOTAL,
            net::INTERFACE_TRANSMIT_ERRORS_TOTAL,
            net::INTERFACE_RECEIVE_DROPPED_TOTAL,
            net::INTERFACE_TRANSMIT_DROPPED_TOTAL,
            net::INTERFACE_RECEIVE_MISSED_TOTAL,
            net::QDISC_DROPS_TOTAL,
            net::QDISC_OVERLIMITS_TOTAL,
            net::QDISC_REQUEUES_TOTAL,
            net::QDISC_BACKLOG_BYTES,
            net::QDISC_BACKLOG_PACKETS,
            net::QDISC_SENT_BYTES_TOTAL,
            net::QDISC_SENT_PACKETS_TOTAL,
            net::QDISC_RATE_BYTES_PER_SECOND,
            net::NAMESPACE_UP,
            net::SNAPSHOT_ERRORS_TOTAL,
        ],
    ),
    snapshot(
        SOCK_DIAG,
        Snapshot::SockDiag,
        &[
            net::TCP_SOCKETS,
            net::TCP_SRTT_SECONDS,
            net::TCP_SRTT_MAX_SECONDS,
            net::TCP_PATH_MTU_BYTES,
            net::TCP_MSS_BYTES,
            net::TCP_SEND_QUEUE_BYTES,
            net::TCP_NOTSENT_BYTES,
            net::TCP_DELIVERY_RATE_BYTES_PER_SECOND,
            net::TCP_APP_LIMITED_SOCKETS,
            net::TCP_BUSY_SECONDS_TOTAL,
            net::TCP_RECEIVE_WINDOW_LIMITED_SECONDS_TOTAL,
            net::TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL,
            net::TCP_DELIVERED_SEGMENTS_TOTAL,
            net::TCP_DELIVERED_CE_SEGMENTS_TOTAL,
            net::NET_TCP_DELIVERED_CE_SEGMENTS_TOTAL,
            net::NAMESPACE_UP,
            net::SNAPSHOT_ERRORS_TOTAL,
        ],
    ),
    snapshot(
        ETHTOOL,
        Snapshot::Ethtool,
        &[
            net::INTERFACE_SPEED_BYTES_PER_SECOND,
            net::INTERFACE_PAUSE_FRAMES_TOTAL,
            net::INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL,
            net::INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL,
            net::NAMESPACE_UP,
            net::SNAPSHOT_ERRORS_TOTAL,
        ],
    ),
    snapshot(
        PRESSURE,
        Snapshot::Pressure,
        &[
            host::PRESSURE_STALLED_SECONDS_TOTAL,
            host::CPU_THROTTLED_SECONDS_TOTAL,
        ],
    ),
    snapshot(
        BLOCK_TOPOLOGY,
        Snapshot::BlockTopology,
        &[block::DEVICE_INFO],
    ),
];

/// Every probe, in the order they attach and are listed.
pub fn probes() -> impl Iterator<Item = &'static ProbeSpec> {
    COLLECTORS.iter().filter_map(|c| match c.source {
        Source::Probe(p) => Some(p),
        Source::Snapshot(_) => None,
    })
}

/// The snapshot collectors, with their names.
pub fn snapshots() -> impl Iterator<Item = (&'static str, Snapshot)> {
    COLLECTORS.iter().filter_map(|c| match c.source {
        Source::Snapshot(s) => Some((c.name, s)),
        Source::Probe(_) => None,
    })
}

/// Every collector name: the probes, then the snapshots.
pub fn names() -> impl Iterator<Item = &'static str> {
    COLLECTORS.iter().map(|c| c.name)
}

pub fn is_known(name: &str) -> bool {
    names().any(|n| n == name)
}

impl ProbeCollector {
    /// The probes this collector reads.
    pub fn probes(self) -> impl Iterator<Item = &'static ProbeSpec> {
        probes().filter(move |p| p.collector == self)
    }
}

/// The probe table of docs/metrics.md's network section: probe, hook, the metrics it feeds.
pub fn network_docs_table() -> String {
    let mut out = String::from("| probe | hook | feeds |\n|---|---|---|\n");
    for p in probes().filter(|p| p.collector != ProbeCollector::Block) {
        let feeds: Vec<String> = p.metrics.iter().map(|m| format!("`{}`", m.name)).collect();
        out.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            p.name,
            p.hook.doc(),
            feeds.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests;
