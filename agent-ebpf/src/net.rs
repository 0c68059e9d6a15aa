//! Network path: retransmits per peer, drops per kernel reason, socket buffer pressure. Each
//! event is counted in a kernel map; user space reads the maps at scrape time.

pub mod drops;
pub mod pressure;
pub mod retransmits;

use agent_common::net::{COUNTER_SLOTS, NetLayout};
use aya_ebpf::{EbpfContext, macros::map, maps::PerCpuArray, programs::BtfTracePointContext};

use crate::read;

/// Filled by user space from kernel BTF before load.
#[unsafe(no_mangle)]
static NET_LAYOUT: NetLayout = NetLayout::EMPTY;

/// Overflow and socket-pressure counters (`COUNTER_*` slots).
#[map]
static NET_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_SLOTS, 0);

/// One field of the layout. A volatile read of a frozen read-only global: the verifier sees
/// its value as a constant, so branches on argument positions a tracepoint lacks are pruned.
macro_rules! layout {
    ($field:ident) => {
        // SAFETY: a read-only global patched at load time.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!(crate::net::NET_LAYOUT.$field)) }
    };
}
pub(crate) use layout;

#[inline(always)]
fn ready(bit: u32) -> bool {
    layout!(ready) & bit != 0
}

/// Tracepoint argument `i` (a position resolved from BTF) as a raw 64-bit value. The
/// verifier allows direct context loads only at constant offsets, and the compiler merges
/// per-position loads into one from a computed pointer; so the argument array (kernel
/// memory) is read with bpf_probe_read_kernel instead.
#[inline(always)]
fn arg(ctx: &BtfTracePointContext, i: u32) -> u64 {
    read::at(ctx.as_ptr() as *const u8, i.wrapping_mul(8)).unwrap_or(0)
}

/// Adds one to a per-CPU counter slot.
#[inline(always)]
fn count(slot: u32, n: u64) {
    if let Some(p) = NET_COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += n };
    }
}
