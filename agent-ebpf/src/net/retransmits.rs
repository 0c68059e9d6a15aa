//! Retransmitted TCP segments per peer, from `tcp_retransmit_skb` and `tcp_retransmit_synack`:
//! together what the kernel counts as `RetransSegs` in /proc/net/snmp, in every namespace.

use agent_common::net::{
    AF_INET, AF_INET6, COUNTER_CGROUP_RETRANS_OVERFLOW, COUNTER_RETRANS_OVERFLOW, CgroupPeerKey,
    MAX_CGROUP_PEER_KEYS, MAX_PEER_ENTRIES, OFFSET_NONE, PeerKey, ROOT_CGROUP_ID, RT_ERR_ARG,
    RT_SK_ARG, RT_SKB_ARG, SK_CGROUP_DATA_BITS, SYNACK_REQ_ARG,
};
use aya_ebpf::helpers::bpf_probe_read_kernel;
use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    macros::map,
    maps::PerCpuHashMap,
    programs::BtfTracePointContext,
};

use super::{count, layout};
use crate::read::field;
use crate::ready::ready;
use agent_common::ready as probe;

crate::ready::shared_map_names!(NET_RETRANSMITS, NET_CGROUP_RETRANSMITS);

/// Retransmitted segments per peer and CPU. Entries are allocated when first used
/// (`BPF_F_NO_PREALLOC`), so the worst-case size costs nothing on hosts with many CPUs.
#[map]
static NET_RETRANSMITS: PerCpuHashMap<PeerKey, u64> =
    PerCpuHashMap::with_max_entries(MAX_PEER_ENTRIES, BPF_F_NO_PREALLOC);

/// Retransmitted segments per (peer, cgroup of the socket) and CPU, with `[cgroups]` only.
#[map]
static NET_CGROUP_RETRANSMITS: PerCpuHashMap<CgroupPeerKey, u64> =
    PerCpuHashMap::with_max_entries(MAX_CGROUP_PEER_KEYS, BPF_F_NO_PREALLOC);

/// The remote address and network namespace of a socket whose `struct sock_common` is at
/// `common` (inside a typed pointer).
#[inline(always)]
fn peer(common: *const u8) -> PeerKey {
    let family: u16 = field(common, layout!(sk_family));
    let mut key = PeerKey {
        family,
        _pad: 0,
        netns: 0,
        addr: [0; 16],
    };
    let (sk_net, net_inum) = (layout!(sk_net), layout!(net_inum));
    if sk_net != OFFSET_NONE && net_inum != OFFSET_NONE {
        let net: *const u8 = field(common, sk_net);
        key.netns = field(net, net_inum);
    }
    if family == AF_INET {
        let a: u32 = field(common, layout!(sk_daddr));
        key.addr[..4].copy_from_slice(&a.to_ne_bytes());
    } else if family == AF_INET6 {
        let off = layout!(sk_v6_daddr);
        if off != OFFSET_NONE {
            let hi: u64 = field(common, off);
            let lo: u64 = field(common, off + 8);
            key.addr[..8].copy_from_slice(&hi.to_ne_bytes());
            key.addr[8..].copy_from_slice(&lo.to_ne_bytes());
        }
    }
    key
}

/// Adds `n` to `key`'s per-CPU counter in `map`; false when the map is full.
#[inline(always)]
fn add_to<K>(map: &PerCpuHashMap<K, u64>, key: &K, n: u64) -> bool {
    let add = |p: *mut u64| {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += n };
    };
    if let Some(p) = map.get_ptr_mut(key) {
        add(p);
        return true;
    }
    if map.insert(key, n, BPF_NOEXIST as u64).is_ok() {
        return true;
    }
    // The map is full (or the entry appeared meanwhile, from an interrupt on this CPU).
    match map.get_ptr_mut(key) {
        Some(p) => {
            add(p);
            true
        }
        None => false,
    }
}

/// Counts `n` retransmits toward `key`.
#[inline(always)]
fn add(key: &PeerKey, n: u64) {
    if !add_to(&NET_RETRANSMITS, key, n) {
        count(COUNTER_RETRANS_OVERFLOW, n);
    }
}

/// Counts `n` retransmits toward `key` for `cgroup` too, when that is on (a branch the
/// verifier prunes when it is off).
#[inline(always)]
fn add_for_cgroup(key: &PeerKey, cgroup: u64, n: u64) {
    let mut ck = CgroupPeerKey { peer: *key, cgroup };
    if add_to(&NET_CGROUP_RETRANSMITS, &ck, n) {
        return;
    }
    ck.cgroup = 0;
    if !add_to(&NET_CGROUP_RETRANSMITS, &ck, n) {
        count(COUNTER_CGROUP_RETRANS_OVERFLOW, n);
    }
}

/// The cgroup v2 id of socket `sk` (a typed pointer), 0 where it cannot be read.
#[inline(always)]
fn cgroup_of(sk: *const u8) -> u64 {
    let (kn_off, id_off) = (layout!(cgroup_kn), layout!(kn_id));
    if layout!(sk_cgroup_tagged) == 0 {
        // Typed loads all the way: allowed under every lockdown mode.
        let cgroup: *const u8 = field(sk, layout!(sk_cgroup));
        let kn: *const u8 = field(cgroup, kn_off);
        return field(kn, id_off);
    }
    // Before 5.15 the cgroup is an untyped address: read with the helper (which
    // lockdown=confidentiality forbids: user space leaves this part off there).
    let v: u64 = field(sk, layout!(sk_cgroup));
    if v == 0 || v & SK_CGROUP_DATA_BITS != 0 {
        return ROOT_CGROUP_ID;
    }
    // SAFETY: bpf_probe_read_kernel checks the address; a bad one gives an error, not a fault.
    let kn = unsafe { bpf_probe_read_kernel((v + kn_off as u64) as *const u64) }.unwrap_or(0);
    if kn == 0 {
        return 0;
    }
    // SAFETY: as above.
    unsafe { bpf_probe_read_kernel((kn + id_off as u64) as *const u64) }.unwrap_or(0)
}

/// `tcp_retransmit_skb(sk, skb[, err])`. Counts the skb's segments (`tcp_skb_pcount`), as the
/// kernel does for RetransSegs: also when the device refused the packet (err > 0), not when
/// the retransmit was abandoned before transmission (err < 0).
pub fn try_retransmit(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::TCP_RETRANSMIT) {
        return Ok(());
    }
    if layout!(rt_has_err) != 0 && (ctx.arg::<u64>(RT_ERR_ARG) as i32) < 0 {
        return Ok(());
    }
    let sk: *const u8 = ctx.arg(RT_SK_ARG);
    let skb: *const u8 = ctx.arg(RT_SKB_ARG);
    let segs: u16 = field(skb, layout!(skb_gso_segs));
    let key = peer(sk.wrapping_add(layout!(sock_common) as usize));
    let n = segs.max(1) as u64;
    add(&key, n);
    if layout!(sk_cgroup) != OFFSET_NONE {
        add_for_cgroup(&key, cgroup_of(sk), n);
    }
    Ok(())
}

/// `tcp_retransmit_synack(sk, req)`: fires only for SYN-ACKs actually sent again.
pub fn try_retransmit_synack(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::TCP_RETRANSMIT_SYNACK) {
        return Ok(());
    }
    let req: *const u8 = ctx.arg(SYNACK_REQ_ARG);
    let key = peer(req.wrapping_add(layout!(req_common) as usize));
    add(&key, 1);
    // A request has no cgroup of its own (its listener's lies behind a union the verifier
    // reads as an integer): counted under `other`.
    if layout!(sk_cgroup) != OFFSET_NONE {
        add_for_cgroup(&key, 0, 1);
    }
    Ok(())
}
