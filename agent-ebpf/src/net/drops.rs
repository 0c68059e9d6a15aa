//! Dropped packets per kernel drop reason (`kfree_skb`), and the kernel code locations of the
//! drops that carry no reason (`not_specified`).

use agent_common::net::{
    COUNTER_UNSPECIFIED_OVERFLOW, DROP_LOCATION_ARG, DROP_REASON_ARG, DROP_REASON_SLOTS,
    DROP_REASON_SUBSYSTEM_SLOT, MAX_DROP_LOCATIONS,
};
use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    macros::map,
    maps::{PerCpuArray, PerCpuHashMap},
    programs::BtfTracePointContext,
};

use super::{count, layout};
use crate::ready::ready;
use agent_common::ready as probe;

crate::ready::shared_map_names!(NET_DROP_REASONS, NET_UNSPECIFIED_DROPS);

/// Drops per `enum skb_drop_reason` value.
#[map]
static NET_DROP_REASONS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASON_SLOTS, 0);

/// `not_specified` drops per kernel code address (the caller of `kfree_skb`) and CPU,
/// allocated when first used.
#[map]
static NET_UNSPECIFIED_DROPS: PerCpuHashMap<u64, u64> =
    PerCpuHashMap::with_max_entries(MAX_DROP_LOCATIONS, BPF_F_NO_PREALLOC);

#[inline(always)]
fn add_location(location: u64) {
    let add_to = |p: *mut u64| {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += 1 };
    };
    if let Some(p) = NET_UNSPECIFIED_DROPS.get_ptr_mut(location) {
        add_to(p);
        return;
    }
    if NET_UNSPECIFIED_DROPS
        .insert(location, 1, BPF_NOEXIST as u64)
        .is_ok()
    {
        return;
    }
    match NET_UNSPECIFIED_DROPS.get_ptr_mut(location) {
        Some(p) => add_to(p),
        None => count(COUNTER_UNSPECIFIED_OVERFLOW, 1),
    }
}

/// `kfree_skb(skb, location[, reason[, rx_sk]])`: kernels before 5.17 pass no reason, and
/// every drop counts as not specified (with its location).
pub fn try_kfree_skb(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::SKB_DROP) {
        return Ok(());
    }
    let reason = if layout!(drop_has_reason) != 0 {
        ctx.arg::<u64>(DROP_REASON_ARG) as u32
    } else {
        layout!(reason_not_specified)
    };
    let slot = reason.min(DROP_REASON_SUBSYSTEM_SLOT);
    if let Some(p) = NET_DROP_REASONS.get_ptr_mut(slot) {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += 1 };
    }
    if reason == layout!(reason_not_specified) {
        add_location(ctx.arg::<u64>(DROP_LOCATION_ARG));
    }
    Ok(())
}
