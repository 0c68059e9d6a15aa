//! Network path: retransmits per peer, drops per kernel reason, socket buffer pressure. Each
//! event is counted in a kernel map; user space reads the maps at scrape time.

pub mod drops;
pub mod pressure;
pub mod retransmits;

use agent_common::net::{COUNTER_SLOTS, NetLayout};
use aya_ebpf::{macros::map, maps::PerCpuArray};

/// Filled by user space from kernel BTF before load, by this name.
const _: () = assert!(agent_common::maps::same(
    "NET_LAYOUT",
    agent_common::net::LAYOUT_GLOBAL
));
#[unsafe(no_mangle)]
static NET_LAYOUT: NetLayout = NetLayout::EMPTY;

crate::ready::shared_map_names!(NET_COUNTERS);

/// Overflow and socket-pressure counters (`COUNTER_*` slots).
#[map]
static NET_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTER_SLOTS, 0);

/// One field of the layout. A volatile read of a frozen read-only global: the verifier sees
/// its value as a constant, so branches on arguments a tracepoint lacks are pruned before
/// they are checked.
macro_rules! layout {
    ($field:ident) => {
        // SAFETY: a read-only global patched at load time.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!(crate::net::NET_LAYOUT.$field)) }
    };
}
pub(crate) use layout;

/// Adds one to a per-CPU counter slot.
#[inline(always)]
fn count(slot: u32, n: u64) {
    if let Some(p) = NET_COUNTERS.get_ptr_mut(slot) {
        // SAFETY: per-CPU value, only this CPU writes it.
        unsafe { *p += n };
    }
}
