//! Network path ABI: what the retransmit, drop and socket-pressure probes read from kernel
//! BTF, and the keys and slots of the maps they count into.

use crate::{assert_size, user_pod};

/// The name of the load-time global holding the [`NetLayout`].
pub const LAYOUT_GLOBAL: &str = "NET_LAYOUT";

/// An offset the running kernel does not have (e.g. IPv6 addresses without CONFIG_IPV6).
pub const OFFSET_NONE: u32 = u32::MAX;

/// Tracepoint argument positions, the same on every kernel since 5.4 (user space checks each
/// one's type in kernel BTF): `tcp_retransmit_skb(sk, skb[, err])`,
/// `tcp_retransmit_synack(sk, req)`, `kfree_skb(skb, location[, reason[, rx_sk]])`,
/// `sock_exceed_buf_limit(sk, prot, allocated, kind)`. The programs read them as typed
/// arguments at constant positions, so they need no helper to read kernel memory (which
/// `lockdown=confidentiality` forbids).
pub const RT_SK_ARG: usize = 0;
pub const RT_SKB_ARG: usize = 1;
pub const RT_ERR_ARG: usize = 2;
pub const SYNACK_REQ_ARG: usize = 1;
pub const DROP_LOCATION_ARG: usize = 1;
pub const DROP_REASON_ARG: usize = 2;
pub const EXCEED_KIND_ARG: usize = 3;

/// The reason value counted for every drop on kernels whose `kfree_skb` carries no reason
/// (before 5.17); user space names it `not_specified`.
pub const REASON_NONE_SLOT: u32 = 2;

/// Kernel struct offsets and what the running kernel's tracepoints pass, for the network
/// probes. User space fills this from the running kernel's BTF and passes it as a load-time
/// global.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetLayout {
    /// Where `struct sock_common` lies in `struct sock` and in `struct request_sock`.
    pub sock_common: u32,
    pub req_common: u32,
    /// In `struct sock_common`: `skc_family`, `skc_daddr`, `skc_v6_daddr` (OFFSET_NONE
    /// without IPv6).
    pub sk_family: u32,
    pub sk_daddr: u32,
    pub sk_v6_daddr: u32,
    /// `sk_buff.cb` + `tcp_skb_cb.tcp_gso_segs`: segments in a TCP skb.
    pub skb_gso_segs: u32,
    /// `sock_common.skc_net.net` (the socket's network namespace) and `net.ns.inum` (its
    /// inode number, as /proc/<pid>/ns/net shows it); OFFSET_NONE when unresolved.
    pub sk_net: u32,
    pub net_inum: u32,
    /// Non-zero where `tcp_retransmit_skb` passes `err` (newer kernels fire it also for
    /// failed retransmits).
    pub rt_has_err: u32,
    /// Non-zero where `kfree_skb` passes the drop reason (5.17 and later).
    pub drop_has_reason: u32,
    /// The value of `SKB_DROP_REASON_NOT_SPECIFIED` on this kernel (`REASON_NONE_SLOT`
    /// where drops carry no reason).
    pub reason_not_specified: u32,
    /// Per-cgroup retransmits (`[cgroups]`; OFFSET_NONE when off or unresolved): where in
    /// `struct sock` its cgroup v2 lies (`sk_cgrp_data.cgroup`, or before 5.15 the tagged
    /// `sk_cgrp_data.val`, see [`SK_CGROUP_TAGGED`]).
    pub sk_cgroup: u32,
    /// Non-zero where `sk_cgroup` is the tagged value of kernels before 5.15.
    pub sk_cgroup_tagged: u32,
    /// `cgroup.kn` and `kernfs_node.id` (the cgroup's id, its directory's inode number).
    pub cgroup_kn: u32,
    pub kn_id: u32,
}
assert_size!(NetLayout, 60);

impl NetLayout {
    /// Nothing resolved: every probe stays idle.
    pub const EMPTY: NetLayout = NetLayout {
        sock_common: OFFSET_NONE,
        req_common: OFFSET_NONE,
        sk_family: OFFSET_NONE,
        sk_daddr: OFFSET_NONE,
        sk_v6_daddr: OFFSET_NONE,
        skb_gso_segs: OFFSET_NONE,
        sk_net: OFFSET_NONE,
        net_inum: OFFSET_NONE,
        rt_has_err: 0,
        drop_has_reason: 0,
        reason_not_specified: u32::MAX,
        sk_cgroup: OFFSET_NONE,
        sk_cgroup_tagged: 0,
        cgroup_kn: OFFSET_NONE,
        kn_id: OFFSET_NONE,
    };
}

impl Default for NetLayout {
    fn default() -> Self {
        NetLayout::EMPTY
    }
}

pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

/// Map key: a TCP peer, the remote address of a socket, in a network namespace (its inode
/// number; 0 where the kernel's layout did not resolve). IPv4 uses the first 4 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PeerKey {
    pub family: u16,
    pub _pad: u16,
    pub netns: u32,
    pub addr: [u8; 16],
}
assert_size!(PeerKey, 24);

/// Map key of the per-cgroup retransmits: a peer and the cgroup v2 id of the socket (0
/// where it could not be read).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CgroupPeerKey {
    pub peer: PeerKey,
    pub cgroup: u64,
}
assert_size!(CgroupPeerKey, 32);

user_pod!(NetLayout, PeerKey, CgroupPeerKey);

/// Before 5.15, `sock_cgroup_data` is a `u64` that holds either the cgroup's address or, when
/// either of its two low bits is set, net_prio/net_cls data (the socket then belongs to the
/// root cgroup, as for a zero value).
pub const SK_CGROUP_TAGGED: u32 = 1;
pub const SK_CGROUP_DATA_BITS: u64 = 3;
/// The id of the cgroup v2 root.
pub const ROOT_CGROUP_ID: u64 = 1;

/// Distinct (peer, cgroup) pairs the per-cgroup retransmit map holds; entries of cgroups that
/// are gone are deleted by user space. A pair that finds it full counts for the peer with
/// cgroup 0 (`other`), or if that fails too in `COUNTER_CGROUP_RETRANS_OVERFLOW`.
pub const MAX_CGROUP_PEER_KEYS: u32 = 8192;

/// Distinct peers the retransmit map holds. Never deleted, so a peer keeps its kernel entry
/// for the agent's lifetime; retransmits of peers that find the map full are counted in
/// `COUNTER_RETRANS_OVERFLOW` (user space reports them as `peer="other"`).
pub const MAX_PEER_ENTRIES: u32 = 16384;

/// Slots of the drop-reason array: `enum skb_drop_reason` values below `DROP_REASON_SLOTS - 1`
/// count in their own slot; larger ones (subsystem reasons, `reason >> 16 != 0`) in the last.
pub const DROP_REASON_SLOTS: u32 = 1024;
pub const DROP_REASON_SUBSYSTEM_SLOT: u32 = DROP_REASON_SLOTS - 1;

/// Distinct kernel code locations of `not_specified` drops the location map holds; more are
/// counted in `COUNTER_UNSPECIFIED_OVERFLOW`.
pub const MAX_DROP_LOCATIONS: u32 = 4096;

/// Slots of the per-CPU counter array.
pub const COUNTER_RETRANS_OVERFLOW: u32 = 0;
pub const COUNTER_UNSPECIFIED_OVERFLOW: u32 = 1;
pub const COUNTER_EXCEED_SEND: u32 = 2;
pub const COUNTER_EXCEED_RECV: u32 = 3;
pub const COUNTER_EXCEED_OTHER: u32 = 4;
pub const COUNTER_RCVQUEUE_FULL: u32 = 5;
pub const COUNTER_CGROUP_RETRANS_OVERFLOW: u32 = 6;
pub const COUNTER_SLOTS: u32 = 7;

/// `kind` of `sock_exceed_buf_limit`: `SK_MEM_SEND` and `SK_MEM_RECV` are preprocessor
/// constants (absent from BTF), 0 and 1 since the tracepoint exists.
pub const SK_MEM_SEND: u32 = 0;
pub const SK_MEM_RECV: u32 = 1;
