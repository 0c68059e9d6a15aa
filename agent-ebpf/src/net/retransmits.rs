//! Retransmitted TCP segments per peer, from `tcp_retransmit_skb` and `tcp_retransmit_synack`:
//! together what the kernel counts as `RetransSegs` in /proc/net/snmp, in every namespace.

use agent_common::net::{
    AF_INET, AF_INET6, COUNTER_RETRANS_OVERFLOW, MAX_PEER_ENTRIES, OFFSET_NONE, PeerKey,
    RT_ERR_ARG, RT_SK_ARG, RT_SKB_ARG, SYNACK_REQ_ARG,
};
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

crate::ready::shared_map_names!(NET_RETRANSMITS);

/// Retransmitted segments per peer and CPU. Entries are allocated when first used
/// (`BPF_F_NO_PREALLOC`), so the worst-case size costs nothing on hosts with many CPUs.
#[map]
static NET_RETRANSMITS: PerCpuHashMap<PeerKey, u64> =
    PerCpuHashMap::with_max_entries(MAX_PEER_ENTRIES, BPF_F_NO_PREALLOC);

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

#[inline(always)]
fn add(key: &PeerKey, n: u64) {
    let add_to = |p: *mut u64| {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += n };
    };
    if let Some(p) = NET_RETRANSMITS.get_ptr_mut(key) {
        add_to(p);
        return;
    }
    if NET_RETRANSMITS.insert(key, n, BPF_NOEXIST as u64).is_ok() {
        return;
    }
    // The map is full (or the entry appeared meanwhile, from an interrupt on this CPU).
    match NET_RETRANSMITS.get_ptr_mut(key) {
        Some(p) => add_to(p),
        None => count(COUNTER_RETRANS_OVERFLOW, n),
    }
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
    add(&key, segs.max(1) as u64);
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
    Ok(())
}
