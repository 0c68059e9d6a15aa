//! Failed map updates, per map (indices in `agent_common::stats`), summed by user space.

use agent_common::stats::MAX_COUNTED_MAPS;
use aya_ebpf::{macros::map, maps::PerCpuArray};

#[map]
static MAP_UPDATE_FAILURES: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_COUNTED_MAPS, 0);

/// Counts one update of map `index` that did not happen (map full, or out of memory).
#[inline(always)]
pub fn map_update_failed(index: u32) {
    if let Some(n) = MAP_UPDATE_FAILURES.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, only this CPU writes it.
        unsafe { *n += 1 };
    }
}
