//! Per-cgroup attribution (opt-in, `[cgroups]`): `block_getrq` runs in the task that creates a
//! request and records that task's cgroup v2 id under the request's first bio; the completion
//! finds it there (`account`) and adds the request to the (device, op, cgroup) counters.
//! The issuer probe is attached only when the option is on, so off it costs nothing.

use agent_common::block::{CgroupKey, CgroupStats, UNREC_CGROUPS_FULL};
use aya_ebpf::bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST};
use aya_ebpf::helpers::bpf_get_current_cgroup_id;
use aya_ebpf::macros::map;
use aya_ebpf::maps::{LruHashMap, PerCpuHashMap};
use aya_ebpf::programs::BtfTracePointContext;

use super::{at, count};
use crate::ready::ready;
use agent_common::block::{MAX_CGROUP_KEYS, MAX_ISSUERS};
use agent_common::ready as probe;

crate::ready::shared_map_names!(BLOCK_ISSUERS, BLOCK_CGROUPS);

/// The issuing cgroup of each request in flight, by the address of its first bio.
#[map]
static BLOCK_ISSUERS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_ISSUERS, 0);

/// Per (device, op, cgroup) counters, allocated on first use.
#[map]
static BLOCK_CGROUPS: PerCpuHashMap<CgroupKey, CgroupStats> =
    PerCpuHashMap::with_max_entries(MAX_CGROUP_KEYS, BPF_F_NO_PREALLOC);

/// `block_getrq`: a request was created for `bio` (argument `BIO`: 0 since 5.11, 1 before,
/// after the request queue), in the context of the task submitting it. One program per
/// position: a branch on the position compiles to a moved context pointer, which verifiers
/// before 5.11 refuse.
pub fn try_getrq<const BIO: usize>(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_ISSUER) {
        return Ok(());
    }
    let bio: u64 = ctx.arg(BIO);
    // SAFETY: no preconditions; the current task's cgroup on the v2 hierarchy.
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    let _ = BLOCK_ISSUERS.insert(bio, cgroup, 0);
    Ok(())
}

/// The (device, op, cgroup) counters of a completing request, its issuer entry consumed.
#[inline(always)]
pub fn account(rq: *const u8, dev: u32, op: u32) -> Option<&'static mut CgroupStats> {
    let bio: u64 = at!(rq, rq_bio);
    let cgroup = match BLOCK_ISSUERS.get_ptr(bio) {
        Some(p) => {
            // SAFETY: a map value, read once.
            let c = unsafe { *p };
            let _ = BLOCK_ISSUERS.remove(bio);
            c
        }
        // Created before the agent started, by the block layer itself (flushes), or merged
        // in front of another request's bios.
        None => 0,
    };
    let key = &CgroupKey { dev, op, cgroup };
    if let Some(p) = BLOCK_CGROUPS.get_ptr_mut(key) {
        // SAFETY: per-CPU value, only this CPU writes it while the program runs.
        return Some(unsafe { &mut *p });
    }
    // Inserted from zeroed map memory: a zeroed value on the stack compiles to a call of
    // `memset`, which would make this program one of two BPF functions (see `disk_dev`).
    let zero = super::zeroed::<CgroupStats>()?;
    let _ = BLOCK_CGROUPS.insert(key, zero, BPF_NOEXIST as u64);
    match BLOCK_CGROUPS.get_ptr_mut(key) {
        // SAFETY: as above.
        Some(p) => Some(unsafe { &mut *p }),
        None => {
            count(UNREC_CGROUPS_FULL);
            None
        }
    }
}
