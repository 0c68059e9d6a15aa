//! Block path: queue time, service time, IO size, in-flight depth at dispatch, errors and
//! requeues per (device, op), aggregated in per-CPU maps.
//!
//! Design: the completion probe reads the request's own stamps, `start_time_ns` (set when the
//! request starts) and `io_start_time_ns` (set at dispatch when the queue keeps statistics),
//! so the common path keeps no per-request state: no map entry to insert at dispatch and
//! delete at completion, which is most of what a start map keyed by request costs (that is how
//! bcc's biolatency works). The issue probe is still needed for the depth each request meets
//! at dispatch (a shared atomic counter per request queue); it also stamps the dispatch itself,
//! in a map keyed by request, where the kernel does not (queue statistics off, passthrough).
//! See `issue.rs` for how in-flight counting stays exact across agent start.

pub mod complete;
pub mod issue;
pub mod requeue;

use agent_common::block::{
    BlockControl, BlockLayout, COUNTERS, DevOp, ErrorKey, FAST_SLOTS, FastSlot, MAX_DEV_OPS,
    MAX_ERROR_KEYS, MAX_PROBE_STAMPS, MAX_QUEUES, OP_DISCARD, OP_FLUSH, OP_OTHER, OP_READ,
    OP_WRITE, OpStats, QueueSlot, UNREC_STATS_FULL, fast_index,
};
use core::intrinsics::AtomicOrdering;

use aya_ebpf::bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap};

/// Filled by user space from kernel BTF before load.
#[unsafe(no_mangle)]
pub(crate) static BLOCK_LAYOUT: BlockLayout = unsafe { core::mem::zeroed() };

/// Per (device, op) histograms and counters, allocated on first use.
#[map]
static BLOCK_STATS: PerCpuHashMap<DevOp, OpStats> =
    PerCpuHashMap::with_max_entries(MAX_DEV_OPS, BPF_F_NO_PREALLOC);

/// Per (device, op) stats by direct-mapped index (see `FastSlot`); the hash above takes the
/// (device, op) pairs whose slot another pair holds.
#[map]
static BLOCK_FAST: PerCpuArray<FastSlot> = PerCpuArray::with_max_entries(FAST_SLOTS, 0);

/// A zeroed `OpStats` to insert from (too large for the BPF stack). Never written.
#[map]
static BLOCK_ZERO: Array<OpStats> = Array::with_max_entries(1, 0);

/// In-flight requests per request queue, indexed by the queue's `id`.
#[map]
static BLOCK_QUEUES: Array<QueueSlot> = Array::with_max_entries(MAX_QUEUES, 0);

/// Written by user space once the probes are attached (entry 0).
#[map]
static BLOCK_CONTROL: Array<BlockControl> = Array::with_max_entries(1, 0);

/// Dispatch time of requests the kernel does not stamp, keyed by request address. LRU, so a
/// request whose completion was never seen cannot hold its entry forever.
#[map]
static BLOCK_STAMPS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_PROBE_STAMPS, 0);

/// Completions with an error, per (device, op, blk_status_t). Rare: shared, atomic adds.
#[map]
static BLOCK_ERRORS: HashMap<ErrorKey, u64> = HashMap::with_max_entries(MAX_ERROR_KEYS, 0);

/// Event counters: what could not be recorded (`UNREC_*`), dispatch stamp sources (`STAMP_*`).
#[map]
static BLOCK_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(COUNTERS as u32, 0);

/// Reads one field of the load-time layout. Volatile, so that the compiler does not fold the
/// zero initializer; the verifier sees the frozen value as a constant.
macro_rules! lay {
    ($field:ident) => {
        // SAFETY: a plain read of an immutable global.
        unsafe { core::ptr::read_volatile(&raw const $crate::block::BLOCK_LAYOUT.$field) }
    };
}
pub(crate) use lay;

/// Loads a `T` at `base + off` straight from kernel memory. `base` is a typed (BTF) pointer:
/// the tracepoint's request or a pointer read from it, so the verifier checks the access
/// against the kernel's own types, and the JIT turns a fault into a zero read. This is much
/// cheaper than a `bpf_probe_read_kernel` call per field.
#[inline(always)]
pub fn load<T: Copy>(base: *const u8, off: u32) -> T {
    // SAFETY: see above; the access is checked by the verifier and guarded by the JIT.
    unsafe { core::ptr::read_volatile(base.wrapping_add(off as usize) as *const T) }
}

pub fn ready() -> bool {
    lay!(ready) != 0
}

/// The request fields every probe needs.
pub struct Request {
    pub rq: *const u8,
    pub q: *const u8,
    /// The request queue's `id`: small, dense, one per disk.
    pub qid: u32,
    pub op: u32,
    pub passthrough: bool,
    pub start_ns: u64,
    pub started: bool,
}

impl Request {
    #[inline(always)]
    pub fn read(rq: *const u8) -> Request {
        let cmd_flags: u32 = load(rq, lay!(rq_cmd_flags));
        let req_op = cmd_flags & lay!(op_mask);
        let op = if req_op == lay!(req_op_read) {
            OP_READ
        } else if req_op == lay!(req_op_write) {
            OP_WRITE
        } else if req_op == lay!(req_op_flush) {
            OP_FLUSH
        } else if req_op == lay!(req_op_discard) {
            OP_DISCARD
        } else {
            OP_OTHER
        };
        let state: u32 = load(rq, lay!(rq_state));
        let q = load(rq, lay!(rq_q));
        Request {
            rq,
            q,
            qid: load(q, lay!(q_id)),
            op,
            passthrough: req_op == lay!(req_op_drv_in) || req_op == lay!(req_op_drv_out),
            start_ns: load(rq, lay!(rq_start_time_ns)),
            started: state != lay!(mq_rq_idle),
        }
    }

    /// `dev_t` of the whole disk (partitions count towards their disk).
    #[inline(always)]
    pub fn dev(&self) -> u32 {
        let disk: *const u8 = load(self.q, lay!(q_disk));
        let part0: *const u8 = load(disk, lay!(disk_part0));
        load(part0, lay!(bdev_dev))
    }

    #[inline(always)]
    pub fn io_start_ns(&self) -> u64 {
        load(self.rq, lay!(rq_io_start_time_ns))
    }

    /// The in-flight slot of the request's queue, if its id is in range.
    #[inline(always)]
    pub fn queue_slot(&self) -> Option<*mut QueueSlot> {
        BLOCK_QUEUES.get_ptr_mut(self.qid)
    }

    /// Whether the kernel stamps `io_start_time_ns` when it dispatches this request (queue
    /// statistics on, not passthrough), as `blk_mq_start_request` decides.
    #[inline(always)]
    pub fn kernel_stamps_dispatch(&self) -> bool {
        let flags: u64 = load(self.q, lay!(q_queue_flags));
        !self.passthrough && (flags >> lay!(queue_flag_stats)) & 1 == 1
    }

    #[inline(always)]
    pub fn key(&self) -> u64 {
        self.rq as u64
    }
}

pub fn control() -> Option<&'static BlockControl> {
    BLOCK_CONTROL.get(0)
}

/// Whether a dispatched request's issue was counted in its queue's in-flight count, decided
/// the same way at issue, requeue and completion (see `issue.rs`). `probe_stamped` is whether
/// the issue probe holds a stamp for it (removed here).
#[inline(always)]
pub fn kernel_path(ctl: &BlockControl, req: &Request, io_start_ns: u64) -> bool {
    ctl.probe_stamps == 0 && req.start_ns != 0 && io_start_ns != 0
}

/// Adds `delta` to a queue's in-flight count.
#[inline(always)]
pub fn inflight_add(slot: *mut QueueSlot, delta: i64) {
    // SAFETY: a map value, valid while the program runs; shared, hence atomic.
    unsafe { atomic_add(&raw mut (*slot).inflight, delta) };
}

/// Counts a dispatch in its queue's in-flight count and returns the count. The add returns
/// nothing (a fetching add needs BPF ISA v3), so the count is read right after it: at that
/// moment this request is in flight and the count is that of the requests in flight, itself
/// included, whatever other CPUs did in between.
#[inline(always)]
pub fn inflight_enter(slot: *mut QueueSlot) -> i64 {
    inflight_add(slot, 1);
    // SAFETY: as above.
    unsafe { core::ptr::read_volatile(&raw const (*slot).inflight) }
}

/// Atomic add, result unused (the BPF target has no `AtomicI64::fetch_add`).
///
/// # Safety
/// `p` must be valid for reads and writes.
#[inline(always)]
pub unsafe fn atomic_add<T: Copy>(p: *mut T, delta: T) {
    unsafe { core::intrinsics::atomic_xadd::<T, T, { AtomicOrdering::Relaxed }>(p, delta) };
}

/// This CPU's stats of (device, op) on queue `qid`: its direct-mapped slot if free or its
/// own, else its hash entry, created zeroed on first use.
#[inline(always)]
pub fn stats(qid: u32, key: &DevOp) -> Option<&'static mut OpStats> {
    if let Some(p) = BLOCK_FAST.get_ptr_mut(fast_index(qid, key.op)) {
        // SAFETY: per-CPU value, only this CPU writes it while the program runs.
        let slot = unsafe { &mut *p };
        if slot.owner == *key {
            return Some(&mut slot.stats);
        }
        if slot.owner.dev == 0 {
            slot.owner = *key;
            return Some(&mut slot.stats);
        }
    }
    if let Some(p) = BLOCK_STATS.get_ptr_mut(key) {
        // SAFETY: per-CPU value, only this CPU writes it while the program runs.
        return Some(unsafe { &mut *p });
    }
    let zero = BLOCK_ZERO.get(0)?;
    // Another CPU may have inserted it meanwhile: the lookup below decides.
    let _ = BLOCK_STATS.insert(key, zero, BPF_NOEXIST as u64);
    match BLOCK_STATS.get_ptr_mut(key) {
        // SAFETY: as above.
        Some(p) => Some(unsafe { &mut *p }),
        None => {
            count(UNREC_STATS_FULL);
            None
        }
    }
}

pub fn count(counter: u32) {
    if let Some(p) = BLOCK_COUNTERS.get_ptr_mut(counter) {
        // SAFETY: per-CPU value.
        unsafe { *p += 1 };
    }
}

pub fn count_error(key: &ErrorKey) {
    if let Some(p) = BLOCK_ERRORS.get_ptr_mut(key) {
        // SAFETY: a map value; shared, hence atomic.
        unsafe { atomic_add(p, 1u64) };
        return;
    }
    if BLOCK_ERRORS.insert(key, 1, BPF_NOEXIST as u64).is_err() {
        // Lost a race with another CPU (counted there) or the map is full.
        match BLOCK_ERRORS.get_ptr_mut(key) {
            // SAFETY: as above.
            Some(p) => unsafe {
                atomic_add(p, 1u64);
            },
            None => count(agent_common::block::UNREC_ERRORS_FULL),
        }
    }
}

pub fn stamps() -> &'static LruHashMap<u64, u64> {
    &BLOCK_STAMPS
}
