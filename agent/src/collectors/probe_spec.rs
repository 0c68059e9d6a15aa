//! One spec per probe: its name, program and hook, its readiness bit, the collector that
//! reads it, the maps it writes and the metrics it feeds. The registry (`COLLECTORS`) lists
//! them, in the order they attach.

use agent_common::{maps, ready};
use metric_names::{Metric, block, net};

/// Where a program attaches.
#[derive(Clone, Copy, Debug)]
pub enum Hook {
    /// `tp_btf/<event>`: typed tracepoint arguments.
    BtfTracePoint(&'static str),
    /// Classic tracepoint `<category>:<name>`.
    TracePoint(&'static str, &'static str),
    RawTracePoint(&'static str),
}

impl Hook {
    /// As docs/metrics.md writes it.
    pub fn doc(&self) -> String {
        match self {
            Hook::BtfTracePoint(event) => format!("tp_btf/{event}"),
            Hook::TracePoint(category, name) => format!("tracepoint/{category}/{name}"),
            Hook::RawTracePoint(event) => format!("raw_tp/{event}"),
        }
    }
}

/// When a probe's program is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// From start to exit.
    Always,
    /// Loaded at start, attached only while its collector needs it (`probes::on_demand`): a
    /// `tp_btf` hook whose events cost nothing while nothing needs the probe's work.
    OnDemand,
}

/// The collector that reads a probe's maps; it runs when any of its probes is up. The block
/// probes need the block layout, the others their own part of the network layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeCollector {
    Block,
    Retransmits,
    Drops,
    SocketPressure,
}

/// One probe.
#[derive(Clone, Copy, Debug)]
pub struct ProbeSpec {
    /// The `probe` label of `stornet_probe_up`, and the collector name of the flags.
    pub name: &'static str,
    /// The program in the eBPF object.
    pub program: &'static str,
    pub hook: Hook,
    pub attach: Attach,
    /// Its bit in the `PROBES_READY` global (`agent_common::ready`).
    pub ready: u32,
    pub collector: ProbeCollector,
    /// The maps it writes (`agent_common::maps`).
    pub maps: &'static [&'static str],
    /// The metrics its events feed (the block probes feed the block metrics together).
    pub metrics: &'static [Metric],
}

/// Attached while a reported device's queue may not have its dispatches stamped by the
/// kernel, or an option needs every dispatch (`block::demand`).
pub const BLOCK_ISSUE: ProbeSpec = ProbeSpec {
    name: "block_issue",
    program: "stornet_block_rq_issue",
    hook: Hook::BtfTracePoint("block_rq_issue"),
    attach: Attach::OnDemand,
    ready: ready::BLOCK_ISSUE,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::PROBED,
};

pub const BLOCK_COMPLETION: ProbeSpec = ProbeSpec {
    name: "block_completion",
    program: "stornet_block_rq_complete",
    hook: Hook::BtfTracePoint("block_rq_complete"),
    attach: Attach::Always,
    ready: ready::BLOCK_COMPLETION,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::PROBED,
};

pub const BLOCK_REQUEUE: ProbeSpec = ProbeSpec {
    name: "block_requeue",
    program: "stornet_block_rq_requeue",
    hook: Hook::BtfTracePoint("block_rq_requeue"),
    attach: Attach::Always,
    ready: ready::BLOCK_REQUEUE,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::PROBED,
};

/// The issuer probe's program on kernels whose `block_getrq` passes the queue first (5.10).
pub const BLOCK_ISSUER_AFTER_QUEUE: &str = "stornet_block_getrq_q";

/// Attached only when `[cgroups] paths` names cgroups to follow (see `wanted`).
pub const BLOCK_ISSUER: ProbeSpec = ProbeSpec {
    name: "block_issuer",
    program: "stornet_block_getrq",
    hook: Hook::BtfTracePoint("block_getrq"),
    attach: Attach::Always,
    ready: ready::BLOCK_ISSUER,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::CGROUP,
};

/// The bio probes' program on kernels whose `block_bio_queue` passes the queue first (5.10).
pub const BLOCK_BIO_QUEUE_AFTER_QUEUE: &str = "stornet_block_bio_queue_q";

/// Bio-based devices (dm, md, NVMe multipath heads), timed per bio from entering the device
/// to completing; request-based devices stay with the request probes. Both bio probes are
/// attached while a reported bio-based device exists (`block::demand`).
pub const BLOCK_BIO_QUEUE: ProbeSpec = ProbeSpec {
    name: "block_bio_queue",
    program: "stornet_block_bio_queue",
    hook: Hook::BtfTracePoint("block_bio_queue"),
    attach: Attach::OnDemand,
    ready: ready::BLOCK_BIO_QUEUE,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::PROBED,
};

pub const BLOCK_BIO_COMPLETION: ProbeSpec = ProbeSpec {
    name: "block_bio_completion",
    program: "stornet_block_bio_complete",
    hook: Hook::BtfTracePoint("block_bio_complete"),
    attach: Attach::OnDemand,
    ready: ready::BLOCK_BIO_COMPLETION,
    collector: ProbeCollector::Block,
    maps: maps::BLOCK,
    metrics: block::PROBED,
};

/// The ready bits of the bio probes, which share their part of the layout.
pub const BIO_READY: u32 = ready::BLOCK_BIO_QUEUE | ready::BLOCK_BIO_COMPLETION;

/// Both retransmit probes count into the same maps and metrics.
const RETRANSMIT_MAPS: &[&str] = &[
    maps::NET_RETRANSMITS,
    maps::NET_CGROUP_RETRANSMITS,
    maps::NET_COUNTERS,
];
const RETRANSMIT_METRICS: &[Metric] = &[
    net::TCP_RETRANSMITS_TOTAL,
    net::TCP_CGROUP_RETRANSMITS_TOTAL,
    net::TCP_RETRANSMITS_UNATTRIBUTED_TOTAL,
    net::MAP_FULL_TOTAL,
];

pub const TCP_RETRANSMIT: ProbeSpec = ProbeSpec {
    name: "tcp_retransmit",
    program: "stornet_tcp_retransmit_skb",
    hook: Hook::BtfTracePoint("tcp_retransmit_skb"),
    attach: Attach::Always,
    ready: ready::TCP_RETRANSMIT,
    collector: ProbeCollector::Retransmits,
    maps: RETRANSMIT_MAPS,
    metrics: RETRANSMIT_METRICS,
};

pub const TCP_RETRANSMIT_SYNACK: ProbeSpec = ProbeSpec {
    name: "tcp_retransmit_synack",
    program: "stornet_tcp_retransmit_synack",
    hook: Hook::BtfTracePoint("tcp_retransmit_synack"),
    attach: Attach::Always,
    ready: ready::TCP_RETRANSMIT_SYNACK,
    collector: ProbeCollector::Retransmits,
    maps: RETRANSMIT_MAPS,
    metrics: RETRANSMIT_METRICS,
};

pub const SKB_DROP: ProbeSpec = ProbeSpec {
    name: "skb_drop",
    program: "stornet_kfree_skb",
    hook: Hook::BtfTracePoint("kfree_skb"),
    attach: Attach::Always,
    ready: ready::SKB_DROP,
    collector: ProbeCollector::Drops,
    maps: &[
        maps::NET_DROP_REASONS,
        maps::NET_UNSPECIFIED_DROPS,
        maps::NET_COUNTERS,
    ],
    metrics: &[
        net::SKB_DROPS_TOTAL,
        net::SKB_DROPS_UNSPECIFIED_TOTAL,
        net::MAP_FULL_TOTAL,
    ],
};

pub const SOCK_EXCEED_BUF_LIMIT: ProbeSpec = ProbeSpec {
    name: "sock_exceed_buf_limit",
    program: "stornet_sock_exceed_buf_limit",
    hook: Hook::BtfTracePoint("sock_exceed_buf_limit"),
    attach: Attach::Always,
    ready: ready::SOCK_EXCEED_BUF_LIMIT,
    collector: ProbeCollector::SocketPressure,
    maps: &[maps::NET_COUNTERS],
    metrics: &[net::SOCK_BUFFER_LIMIT_EXCEEDED_TOTAL],
};

pub const SOCK_RCVQUEUE_FULL: ProbeSpec = ProbeSpec {
    name: "sock_rcvqueue_full",
    program: "stornet_sock_rcvqueue_full",
    hook: Hook::BtfTracePoint("sock_rcvqueue_full"),
    attach: Attach::Always,
    ready: ready::SOCK_RCVQUEUE_FULL,
    collector: ProbeCollector::SocketPressure,
    maps: &[maps::NET_COUNTERS],
    metrics: &[net::SOCK_RECEIVE_QUEUE_FULL_TOTAL],
};
