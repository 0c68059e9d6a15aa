//! The label names of the agent's metrics, each once: the agent's exporters write them and
//! the analysis selects by them through these constants, and each [`Metric`](crate::Metric)
//! lists its own (`Metric::labels`), which docs/metrics.md is checked against.

// The agent and its probes.

/// A probe's name, as `stornet_probe_up` and the collector flags know it.
pub const PROBE: &str = "probe";
/// The agent's version (`stornet_agent_build_info`).
pub const VERSION: &str = "version";
/// The git commit the agent was built from (`stornet_agent_build_info`).
pub const REVISION: &str = "revision";
/// The running kernel's release string (`stornet_kernel_info`).
pub const RELEASE: &str = "release";
/// The kernel's lockdown mode: `none`, `integrity`, `confidentiality` or `unknown`.
pub const LOCKDOWN: &str = "lockdown";
/// An eBPF map's name.
pub const MAP: &str = "map";

// The block path.

/// A block device's kernel name (`vda`, `nvme0n1`), or `other` beyond the device cap.
pub const DEVICE: &str = "device";
/// A request's operation: `read`, `write`, `flush`, `discard` or `other`.
pub const OP: &str = "op";
/// Which queue limit: `nr_requests` or `device_queue_depth`.
pub const LIMIT: &str = "limit";
/// The kernel's block status of a failed request, in lower case (`ioerr`, `timeout`).
pub const ERROR: &str = "error";
/// Why something was not recorded (block), or the kernel's drop reason in lower case
/// without its `SKB_DROP_REASON_` prefix (network).
pub const REASON: &str = "reason";
/// Where a request's dispatch stamp came from: `kernel`, `probe` or `bio`.
pub const SOURCE: &str = "source";
/// The device a block device sits on (empty for a bottom device), or the parent handle of a
/// qdisc.
pub const PARENT: &str = "parent";
/// What a block device is (`disk`, `partition`, `dm`, …), or which pressure figure
/// (`some`, `full`).
pub const KIND: &str = "kind";
/// The transport of a network block device (`tcp`, `nbd`, …), empty for a local one.
pub const TRANSPORT: &str = "transport";

// Cgroups.

/// A cgroup's path under the cgroup v2 root, as `[cgroups] paths` names it, or `other`.
pub const CGROUP: &str = "cgroup";

// The network path.

/// A remote IP address (of a TCP peer, or of a network block device's target), or `other`
/// beyond the peer cap.
pub const PEER: &str = "peer";
/// A network namespace: `host`, or a configured one by name or `pid:N`.
pub const NETNS: &str = "netns";
/// The kernel function that dropped a packet without a reason.
pub const FUNCTION: &str = "function";
/// Which way a socket asked for buffer memory: `send`, `receive` (or `other`).
pub const DIRECTION: &str = "direction";
/// Which part of a namespace's snapshot failed: `namespace`, `qdisc`, `sock_diag`, `ethtool`,
/// `snmp`.
pub const SNAPSHOT: &str = "snapshot";
/// A reader of a scrape: `block`, `block_topology`, `pressure`, `network_snapshots`,
/// `skb_drops`, `tcp_retransmits`, `tcp_retransmit_cgroups`, `socket_pressure`,
/// `probe_status`, `map_fill`.
pub const COLLECTOR: &str = "collector";
/// A network interface's name.
pub const INTERFACE: &str = "interface";
/// The driver's own name of a pause-frame counter (`rx_pause_ctrl_phy`, `tx_pause_frames`).
pub const COUNTER: &str = "counter";
/// A qdisc's kind (`tbf`, `fq_codel`, …).
pub const QDISC: &str = "qdisc";
/// A qdisc's handle (`8001:`).
pub const HANDLE: &str = "handle";

// The host.

/// A resource tasks can stall on: `cpu`, `io` or `memory`.
pub const RESOURCE: &str = "resource";
