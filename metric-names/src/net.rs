//! The network path: probe-backed counters (retransmits, drops, socket pressure) and
//! scrape-time snapshots (interfaces, qdiscs, TCP sockets) per network namespace.

use crate::labels::{
    CGROUP, COUNTER, DIRECTION, FUNCTION, HANDLE, INTERFACE, MAP, NETNS, PARENT, PEER, QDISC,
    REASON, SNAPSHOT,
};
use crate::{Metric, counter, gauge};

// Probe-backed.

pub const TCP_RETRANSMITS_TOTAL: Metric = counter(
    "stornet_tcp_retransmits_total",
    "TCP segments retransmitted to a peer, in any network namespace \
     (tcp_retransmit_skb, tcp_retransmit_synack; as RetransSegs in /proc/net/snmp).",
)
.with_labels(&[PEER]);
pub const TCP_CGROUP_RETRANSMITS_TOTAL: Metric = counter(
    "stornet_tcp_cgroup_retransmits_total",
    "TCP segments retransmitted to a peer, by the cgroup of the socket (SYN-ACKs under \
     other; only with [cgroups] paths): per peer, they sum to stornet_tcp_retransmits_total.",
)
.with_labels(&[PEER, CGROUP]);
pub const TCP_RETRANSMITS_UNATTRIBUTED_TOTAL: Metric = counter(
    "stornet_tcp_retransmits_unattributed_total",
    "TCP segments the namespace's RetransSegs counted and no retransmit probe run saw \
     (e.g. tail-loss probes), since the agent first read the namespace: per-peer \
     retransmits of the namespace plus this equal its RetransSegs.",
)
.with_labels(&[NETNS]);
pub const SKB_DROPS_TOTAL: Metric = counter(
    "stornet_skb_drops_total",
    "Packets the kernel dropped, by its drop reason (kfree_skb; enum skb_drop_reason \
     of the running kernel; not_specified for all on kernels before 5.17), in any \
     network namespace.",
)
.with_labels(&[REASON]);
pub const SKB_DROPS_UNSPECIFIED_TOTAL: Metric = counter(
    "stornet_skb_drops_unspecified_total",
    "Drops with reason not_specified, by the kernel function that dropped the packet.",
)
.with_labels(&[FUNCTION]);
pub const SOCK_BUFFER_LIMIT_EXCEEDED_TOTAL: Metric = counter(
    "stornet_sock_buffer_limit_exceeded_total",
    "Times a socket asked for buffer memory beyond the protocol's limits \
     (sock_exceed_buf_limit), by direction.",
)
.with_labels(&[DIRECTION]);
pub const SOCK_RECEIVE_QUEUE_FULL_TOTAL: Metric = counter(
    "stornet_sock_receive_queue_full_total",
    "Packets refused because the socket's receive queue was full \
     (sock_rcvqueue_full; datagram and raw sockets, TCP counts these as drops).",
);
pub const MAP_FULL_TOTAL: Metric = counter(
    "stornet_net_map_full_total",
    "Events a full kernel map could not record by their key (still counted, as \
     peer=\"other\" or function=\"other\").",
)
.with_labels(&[MAP]);

// Scrape-time snapshots.

pub const NAMESPACE_UP: Metric = gauge(
    "stornet_net_namespace_up",
    "Whether the agent could read the network namespace's statistics (1) or not (0).",
)
.with_labels(&[NETNS]);
pub const SNAPSHOT_ERRORS_TOTAL: Metric = counter(
    "stornet_net_snapshot_errors_total",
    "Scrape-time network snapshots that could not be read, by namespace and part \
     (namespace: the whole namespace; qdisc, sock_diag, ethtool, pause_stats, snmp, netstat: \
     that part only, e.g. a kernel without the sock_diag module).",
)
.with_labels(&[NETNS, SNAPSHOT]);
pub const INTERFACE_MTU: Metric =
    gauge("stornet_interface_mtu", "Interface MTU, bytes.").with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_SPEED_BYTES_PER_SECOND: Metric = gauge(
    "stornet_interface_speed_bytes_per_second",
    "Link speed the driver reports (ethtool), bytes per second.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_RECEIVE_BYTES_TOTAL: Metric =
    counter("stornet_interface_receive_bytes_total", "Bytes received.")
        .with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_TRANSMIT_BYTES_TOTAL: Metric =
    counter("stornet_interface_transmit_bytes_total", "Bytes sent.")
        .with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_RECEIVE_PACKETS_TOTAL: Metric = counter(
    "stornet_interface_receive_packets_total",
    "Packets received.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_TRANSMIT_PACKETS_TOTAL: Metric =
    counter("stornet_interface_transmit_packets_total", "Packets sent.")
        .with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_RECEIVE_ERRORS_TOTAL: Metric = counter(
    "stornet_interface_receive_errors_total",
    "Receive errors the driver counted.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_TRANSMIT_ERRORS_TOTAL: Metric = counter(
    "stornet_interface_transmit_errors_total",
    "Transmit errors the driver counted.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_RECEIVE_DROPPED_TOTAL: Metric = counter(
    "stornet_interface_receive_dropped_total",
    "Received packets dropped by the interface (e.g. larger than its MTU).",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_TRANSMIT_DROPPED_TOTAL: Metric = counter(
    "stornet_interface_transmit_dropped_total",
    "Packets dropped on the way out of the interface.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_RECEIVE_MISSED_TOTAL: Metric = counter(
    "stornet_interface_receive_missed_total",
    "Packets lost because the NIC's receive ring was full.",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_PAUSE_FRAMES_TOTAL: Metric = counter(
    "stornet_interface_pause_frames_total",
    "Pause (flow control) frame counters of the driver's statistics (ethtool -S), \
     by the driver's counter name.",
)
.with_labels(&[NETNS, INTERFACE, COUNTER]);
pub const INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL: Metric = counter(
    "stornet_interface_receive_pause_frames_total",
    "Pause frames received: the link partner asked this interface to stop sending \
     (the kernel's standard statistics, ethtool -I -a; drivers that report them, Linux 5.10+).",
)
.with_labels(&[NETNS, INTERFACE]);
pub const INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL: Metric = counter(
    "stornet_interface_transmit_pause_frames_total",
    "Pause frames sent: this interface asked its link partner to stop sending \
     (the kernel's standard statistics, ethtool -I -a; drivers that report them, Linux 5.10+).",
)
.with_labels(&[NETNS, INTERFACE]);
pub const QDISC_RATE_BYTES_PER_SECOND: Metric = gauge(
    "stornet_qdisc_rate_bytes_per_second",
    "The rate a shaping qdisc lets out, bytes per second (tbf: its rate; htb: the ceilings \
     of its top classes, summed; cake: its bandwidth).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_SENT_BYTES_TOTAL: Metric = counter(
    "stornet_qdisc_sent_bytes_total",
    "Bytes the qdisc let out (tc -s qdisc: Sent … bytes).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_SENT_PACKETS_TOTAL: Metric = counter(
    "stornet_qdisc_sent_packets_total",
    "Packets the qdisc let out (tc -s qdisc: Sent … pkt).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_DROPS_TOTAL: Metric = counter(
    "stornet_qdisc_drops_total",
    "Packets the qdisc dropped (tc -s qdisc: dropped).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_OVERLIMITS_TOTAL: Metric = counter(
    "stornet_qdisc_overlimits_total",
    "Times the qdisc held packets back over its rate or limit (overlimits).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_REQUEUES_TOTAL: Metric = counter(
    "stornet_qdisc_requeues_total",
    "Packets the qdisc had to queue again (requeues).",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_BACKLOG_BYTES: Metric = gauge(
    "stornet_qdisc_backlog_bytes",
    "Bytes queued in the qdisc at scrape time.",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const QDISC_BACKLOG_PACKETS: Metric = gauge(
    "stornet_qdisc_backlog_packets",
    "Packets queued in the qdisc at scrape time.",
)
.with_labels(&[NETNS, INTERFACE, QDISC, HANDLE, PARENT]);
pub const TCP_SOCKETS: Metric = gauge(
    "stornet_tcp_sockets",
    "Established TCP sockets to the peer (sock_diag).",
)
.with_labels(&[PEER]);
pub const TCP_SRTT_SECONDS: Metric = gauge(
    "stornet_tcp_srtt_seconds",
    "Mean smoothed round-trip time over the peer's established sockets (TCP_INFO).",
)
.with_labels(&[PEER]);
pub const TCP_SRTT_MAX_SECONDS: Metric = gauge(
    "stornet_tcp_srtt_max_seconds",
    "Largest smoothed round-trip time among the peer's established sockets (TCP_INFO).",
)
.with_labels(&[PEER]);
pub const TCP_PATH_MTU_BYTES: Metric = gauge(
    "stornet_tcp_path_mtu_bytes",
    "Smallest path MTU among the peer's established sockets (TCP_INFO tcpi_pmtu).",
)
.with_labels(&[PEER]);
pub const TCP_MSS_BYTES: Metric = gauge(
    "stornet_tcp_mss_bytes",
    "Smallest send MSS among the peer's established sockets (TCP_INFO tcpi_snd_mss).",
)
.with_labels(&[PEER]);
pub const TCP_SEND_QUEUE_BYTES: Metric = gauge(
    "stornet_tcp_send_queue_bytes",
    "Bytes written to the peer's established sockets and not yet acknowledged, in flight \
     or not sent yet, summed (sock_diag; ss: Send-Q).",
)
.with_labels(&[PEER]);
pub const TCP_NOTSENT_BYTES: Metric = gauge(
    "stornet_tcp_notsent_bytes",
    "Bytes written to the peer's established sockets and not sent yet, summed \
     (TCP_INFO tcpi_notsent_bytes; ss: notsent).",
)
.with_labels(&[PEER]);
pub const TCP_DELIVERY_RATE_BYTES_PER_SECOND: Metric = gauge(
    "stornet_tcp_delivery_rate_bytes_per_second",
    "Latest delivery rate of the peer's sockets with data not yet acknowledged, summed, \
     bytes per second (TCP_INFO tcpi_delivery_rate; ss: delivery_rate).",
)
.with_labels(&[PEER]);
pub const TCP_APP_LIMITED_SOCKETS: Metric = gauge(
    "stornet_tcp_app_limited_sockets",
    "Of the peer's sockets with data not yet acknowledged, those whose latest delivery rate \
     sample the application limited, not the path: the socket had sent all it held \
     (TCP_INFO tcpi_delivery_rate_app_limited; ss: app_limited).",
)
.with_labels(&[PEER]);
pub const TCP_BUSY_SECONDS_TOTAL: Metric = counter(
    "stornet_tcp_busy_seconds_total",
    "Time the peer's sockets had data to send, summed over sockets, including the time \
     limited by the receive window or the send buffer (TCP_INFO tcpi_busy_time; ss: busy).",
)
.with_labels(&[PEER]);
pub const TCP_RECEIVE_WINDOW_LIMITED_SECONDS_TOTAL: Metric = counter(
    "stornet_tcp_receive_window_limited_seconds_total",
    "Time the peer's sockets had data to send and the peer's receive window held it back, \
     summed over sockets (TCP_INFO tcpi_rwnd_limited; ss: rwnd_limited).",
)
.with_labels(&[PEER]);
pub const TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL: Metric = counter(
    "stornet_tcp_send_buffer_limited_seconds_total",
    "Time the peer's sockets had sent all they held while the writer waited for room in \
     the send buffer, summed over sockets (TCP_INFO tcpi_sndbuf_limited; ss: sndbuf_limited).",
)
.with_labels(&[PEER]);
pub const TCP_DELIVERED_SEGMENTS_TOTAL: Metric = counter(
    "stornet_tcp_delivered_segments_total",
    "Segments the peer acknowledged, summed over sockets (TCP_INFO tcpi_delivered).",
)
.with_labels(&[PEER]);
pub const TCP_DELIVERED_CE_SEGMENTS_TOTAL: Metric = counter(
    "stornet_tcp_delivered_ce_segments_total",
    "Segments the peer acknowledged with an ECN echo, because the path marked congestion \
     instead of dropping, summed over sockets (TCP_INFO tcpi_delivered_ce).",
)
.with_labels(&[PEER]);
pub const NET_TCP_DELIVERED_CE_SEGMENTS_TOTAL: Metric = counter(
    "stornet_net_tcp_delivered_ce_segments_total",
    "Segments acknowledged with an ECN echo in the network namespace, all sockets \
     (/proc/net/netstat TcpExt TCPDeliveredCE).",
)
.with_labels(&[NETNS]);

pub const ALL: &[Metric] = &[
    TCP_RETRANSMITS_TOTAL,
    TCP_CGROUP_RETRANSMITS_TOTAL,
    TCP_RETRANSMITS_UNATTRIBUTED_TOTAL,
    SKB_DROPS_TOTAL,
    SKB_DROPS_UNSPECIFIED_TOTAL,
    SOCK_BUFFER_LIMIT_EXCEEDED_TOTAL,
    SOCK_RECEIVE_QUEUE_FULL_TOTAL,
    MAP_FULL_TOTAL,
    NAMESPACE_UP,
    SNAPSHOT_ERRORS_TOTAL,
    INTERFACE_MTU,
    INTERFACE_SPEED_BYTES_PER_SECOND,
    INTERFACE_RECEIVE_BYTES_TOTAL,
    INTERFACE_TRANSMIT_BYTES_TOTAL,
    INTERFACE_RECEIVE_PACKETS_TOTAL,
    INTERFACE_TRANSMIT_PACKETS_TOTAL,
    INTERFACE_RECEIVE_ERRORS_TOTAL,
    INTERFACE_TRANSMIT_ERRORS_TOTAL,
    INTERFACE_RECEIVE_DROPPED_TOTAL,
    INTERFACE_TRANSMIT_DROPPED_TOTAL,
    INTERFACE_RECEIVE_MISSED_TOTAL,
    INTERFACE_PAUSE_FRAMES_TOTAL,
    INTERFACE_RECEIVE_PAUSE_FRAMES_TOTAL,
    INTERFACE_TRANSMIT_PAUSE_FRAMES_TOTAL,
    QDISC_RATE_BYTES_PER_SECOND,
    QDISC_SENT_BYTES_TOTAL,
    QDISC_SENT_PACKETS_TOTAL,
    QDISC_DROPS_TOTAL,
    QDISC_OVERLIMITS_TOTAL,
    QDISC_REQUEUES_TOTAL,
    QDISC_BACKLOG_BYTES,
    QDISC_BACKLOG_PACKETS,
    TCP_SOCKETS,
    TCP_SRTT_SECONDS,
    TCP_SRTT_MAX_SECONDS,
    TCP_PATH_MTU_BYTES,
    TCP_MSS_BYTES,
    TCP_SEND_QUEUE_BYTES,
    TCP_NOTSENT_BYTES,
    TCP_DELIVERY_RATE_BYTES_PER_SECOND,
    TCP_APP_LIMITED_SOCKETS,
    TCP_BUSY_SECONDS_TOTAL,
    TCP_RECEIVE_WINDOW_LIMITED_SECONDS_TOTAL,
    TCP_SEND_BUFFER_LIMITED_SECONDS_TOTAL,
    TCP_DELIVERED_SEGMENTS_TOTAL,
    TCP_DELIVERED_CE_SEGMENTS_TOTAL,
    NET_TCP_DELIVERED_CE_SEGMENTS_TOTAL,
];
