//! Block path: queue time, service time, IO size, in-flight depth at dispatch, errors and
//! requeues per (device, op), aggregated in per-CPU maps.
//!
//! Design: the completion probe reads the request's own stamps, `start_time_ns` (set when the
//! request starts) and `io_start_time_ns` (set at dispatch when the queue keeps statistics),
//! so the common path is one program run per request, with no per-request map entry: no
//! hash insert at dispatch and delete at completion, which is most of what a start map keyed
//! by request costs (that is how bcc's biolatency works). Where the kernel does not stamp the
//! dispatch (queue statistics off, passthrough), the issue probe stamps it in a map keyed by
//! request; user space attaches it only while such a queue exists. Nothing on the default
//! per-IO path is shared between CPUs: the stats are per-CPU, summed at scrape time, and the
//! requests in flight are the kernel's own count.
//!
//! Opt-in (`track_inflight`): the depth each request meets at dispatch, from a shared atomic
//! count per request queue, moved only with the request's mark bit (see `MarkWords`), so a
//! request already in flight when the agent starts, or a probe run the kernel skipped,
//! cannot make it drift.

pub mod bio;
pub mod complete;
pub mod issue;
pub mod issuer;
pub mod requeue;

use agent_common::block::{
    BlockControl, BlockLayout, COUNTERS, DevOp, ErrorKey, FAST_SLOTS, FastSlot, HIDDEN_MAJOR,
    MARK_HCTX, MARK_QUEUES, MARK_TAGS, MAX_DEV_OPS, MAX_ERROR_KEYS, MAX_PROBE_STAMPS, MAX_QUEUES,
    MINOR_MASK, MarkWords, OFFSET_NONE, OP_CLASS_ENTRIES, OpClasses, OpStats, QueueSlot,
    UNREC_STATS_FULL, UNREC_UNSEEN_END, fast_index, hidden_name_minor,
};
use core::intrinsics::AtomicOrdering;

use aya_ebpf::bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap};

/// Filled by user space from kernel BTF before load, by this name.
const _: () = assert!(agent_common::maps::same(
    "BLOCK_LAYOUT",
    agent_common::block::LAYOUT_GLOBAL
));
#[unsafe(no_mangle)]
// SAFETY: all zeros is a valid `BlockLayout` (plain integers); user space fills it before load.
pub(crate) static BLOCK_LAYOUT: BlockLayout = unsafe { core::mem::zeroed() };

/// Filled by user space before load, by this name, from the layout (`op_classes`).
const _: () = assert!(agent_common::maps::same(
    "BLOCK_OP_CLASS",
    agent_common::block::OP_CLASS_GLOBAL
));
#[unsafe(no_mangle)]
static BLOCK_OP_CLASS: OpClasses = [0; OP_CLASS_ENTRIES];

/// Written by user space after load, through the map aya makes of its section: a global
/// rather than an array map, so that reading it is a load, not an (inlined) lookup with a
/// bounds check.
const _: () = assert!(agent_common::maps::same(
    ".data.block_control",
    agent_common::block::CONTROL_SECTION
));
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.block_control")]
static mut BLOCK_CONTROL: BlockControl = BlockControl {
    probe_stamps: 0,
    track_inflight: 0,
    cgroups: 0,
    bios_in_requests: 0,
};

crate::ready::shared_map_names!(
    BLOCK_STATS,
    BLOCK_FAST,
    BLOCK_ZERO,
    BLOCK_QUEUES,
    BLOCK_MARKS,
    BLOCK_STAMPS,
    BLOCK_ERRORS,
    BLOCK_COUNTERS,
);

/// Per (device, op) histograms and counters, allocated on first use.
#[map]
static BLOCK_STATS: PerCpuHashMap<DevOp, OpStats> =
    PerCpuHashMap::with_max_entries(MAX_DEV_OPS, BPF_F_NO_PREALLOC);

/// Per (device, op) stats by direct-mapped index (see `FastSlot`); the hash above takes the
/// (device, op) pairs whose slot another pair holds.
#[map]
static BLOCK_FAST: PerCpuArray<FastSlot> = PerCpuArray::with_max_entries(FAST_SLOTS, 0);

/// A zeroed `OpStats` to insert from (too large for the BPF stack), and zeroed memory for
/// smaller values (`zeroed`). Never written.
#[map]
static BLOCK_ZERO: Array<OpStats> = Array::with_max_entries(1, 0);

/// In-flight requests per request queue, indexed by the queue's `id`.
#[map]
static BLOCK_QUEUES: Array<QueueSlot> = Array::with_max_entries(MAX_QUEUES, 0);

/// Dispatched-request marks, per (request queue id, hardware queue): see `MarkWords`.
#[map]
static BLOCK_MARKS: Array<MarkWords> = Array::with_max_entries(MARK_QUEUES * MARK_HCTX, 0);

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

/// Reads field `$field` of the load-time layout at `$base`: one load, whose offset user space
/// writes into the instruction (`agent_common::block::FIELD_MARK`).
macro_rules! at {
    ($base:expr, $field:ident) => {
        <_ as $crate::read::Marked>::at::<
            {
                agent_common::block::field_mark_distance(core::mem::offset_of!(
                    agent_common::block::BlockLayout,
                    $field
                ))
            },
        >($base)
    };
}
pub(crate) use at;

pub use crate::read::field as load;

/// The request fields every probe needs.
pub struct Request {
    pub rq: *const u8,
    pub q: *const u8,
    /// The request queue's `id`: small, dense, one per disk.
    pub qid: u32,
    pub op: u32,
    pub start_ns: u64,
}

impl Request {
    #[inline(always)]
    pub fn read(rq: *const u8) -> Request {
        let op = op_of(at!(rq, rq_cmd_flags));
        let q = at!(rq, rq_q);
        Request {
            rq,
            q,
            qid: at!(q, q_id),
            op,
            start_ns: at!(rq, rq_start_time_ns),
        }
    }

    /// Whether the request was dispatched (read only on the rare paths that need it).
    #[inline(always)]
    pub fn started(&self) -> bool {
        let state: u32 = at!(self.rq, rq_state);
        state != lay!(mq_rq_idle)
    }

    /// `dev_t` of the request's whole disk (partitions count towards their disk).
    #[inline(always)]
    pub fn dev(&self) -> u32 {
        Self::disk_dev_of(self.rq, self.q)
    }

    /// `dev_t` of the whole disk of request `rq` on queue `q`.
    #[inline(always)]
    pub fn disk_dev_of(rq: *const u8, q: *const u8) -> u32 {
        // The verifier sees `disk_in_rq` as a constant and drops the other branch.
        let disk: *const u8 = if lay!(disk_in_rq) != 0 {
            at!(rq, disk)
        } else {
            at!(q, disk)
        };
        disk_dev(disk)
    }

    #[inline(always)]
    pub fn io_start_ns(&self) -> u64 {
        at!(self.rq, rq_io_start_time_ns)
    }

    /// The in-flight slot of the request's queue, if its id is in range.
    #[inline(always)]
    pub fn queue_slot(&self) -> Option<*mut QueueSlot> {
        BLOCK_QUEUES.get_ptr_mut(self.qid)
    }

    /// The word and bit of the request's mark (by hardware queue and driver tag), if its
    /// queue, hardware queue and tag are in range.
    #[inline(always)]
    pub fn mark(&self) -> Option<Mark> {
        let tag: i32 = at!(self.rq, rq_tag);
        let hctx: *const u8 = at!(self.rq, rq_mq_hctx);
        let hw: u32 = at!(hctx, hctx_queue_num);
        if tag < 0 || tag as u32 >= MARK_TAGS || hw >= MARK_HCTX || self.qid >= MARK_QUEUES {
            return None;
        }
        let words = BLOCK_MARKS.get_ptr_mut(self.qid * MARK_HCTX + hw)?;
        let tag = tag as usize;
        // SAFETY: a map value; `tag / 64` is below its length (checked above).
        let word = unsafe {
            (*words)
                .as_mut_ptr()
                .add((tag / 64) % (MARK_TAGS as usize / 64))
        };
        Some(Mark {
            word,
            bit: 1 << (tag % 64),
        })
    }

    #[inline(always)]
    pub fn key(&self) -> u64 {
        self.rq as u64
    }
}

/// A zeroed `T` to insert into a map from, for any `T` no larger than `OpStats`.
#[inline(always)]
pub fn zeroed<T>() -> Option<&'static T> {
    const { assert!(core::mem::size_of::<T>() <= core::mem::size_of::<OpStats>()) };
    let p = BLOCK_ZERO.get_ptr(0)?;
    // SAFETY: a map value of all zero bytes, never written, at least as large as `T`; every
    // caller's `T` is plain integers, for which zero is a valid value.
    Some(unsafe { &*(p as *const T) })
}

/// `dev_t` of a whole disk: its `part0`'s number, or before 5.15 its major and first minor,
/// which every kernel keeps in the same form; 0 for no disk (a request without one, such as
/// an NVMe admin or fabrics command). The pointer is checked rather than read through:
/// a load that faults is caught by the JIT's exception table, but a 5.10 guest panicked
/// in that table's search when a request without a disk completed over NVMe/TCP.
#[inline(always)]
pub fn disk_dev(disk: *const u8) -> u32 {
    if disk.is_null() {
        return 0;
    }
    if lay!(disk_seq) != OFFSET_NONE {
        // 5.15 and later: the number sysfs shows for the disk, or for a hidden disk, which
        // shows none (its `bd_dev` is set, but nothing names it), its sequence number.
        let part0: *const u8 = at!(disk, disk_part0);
        let dev: u32 = at!(part0, bdev_devt);
        if dev >> 20 != 0 {
            return dev;
        }
        let seq: u64 = at!(disk, disk_seq);
        return (HIDDEN_MAJOR << 20) | (seq as u32 & MINOR_MASK);
    }
    // Before 5.15 a hidden disk keeps its major and minor inside, but sysfs shows neither:
    // it is named by its name instead.
    if lay!(hidden_flag) != 0 {
        let flags: u32 = at!(disk, disk_flags);
        if flags & lay!(hidden_flag) != 0 {
            let name = lay!(disk_name);
            let words = [
                load(disk, name),
                load(disk, name + 8),
                load(disk, name + 16),
                load(disk, name + 24),
            ];
            return (HIDDEN_MAJOR << 20) | hidden_name_minor(words);
        }
    }
    let major: i32 = at!(disk, disk_major);
    let minor: i32 = at!(disk, disk_first_minor);
    ((major as u32) << 20) | (minor as u32 & MINOR_MASK)
}

/// The op class of `cmd_flags` (a request's) or `bi_opf` (a bio's): the same encoding, its
/// op in the low byte (the table folds `op_mask` in).
#[inline(always)]
pub fn op_of(flags: u32) -> u32 {
    // SAFETY: a plain read of an immutable global, at an index below its length.
    unsafe {
        core::ptr::read_volatile((&raw const BLOCK_OP_CLASS as *const u8).add(flags as u8 as usize))
            as u32
    }
}

/// Whether the kernel stamps `io_start_time_ns` when it dispatches this request (queue
/// statistics on, not passthrough), as `blk_mq_start_request` decides.
#[inline(always)]
pub fn kernel_stamps(rq: *const u8) -> bool {
    let cmd_flags: u32 = at!(rq, rq_cmd_flags);
    let req_op = cmd_flags & lay!(op_mask);
    if req_op == lay!(req_op_drv_in) || req_op == lay!(req_op_drv_out) {
        return false;
    }
    let q: *const u8 = at!(rq, rq_q);
    let flags: u64 = at!(q, q_queue_flags);
    (flags >> lay!(queue_flag_stats)) & 1 == 1
}

/// The settings user space last wrote. Volatile reads: user space changes them while the
/// programs run, and the compiler must not take the zeros it was built with.
#[inline(always)]
pub fn control() -> BlockControl {
    // SAFETY: a plain read of a global that only user space writes.
    unsafe { core::ptr::read_volatile(&raw const BLOCK_CONTROL) }
}

/// Whether any setting is on (`BlockControl::options`), read as two words.
#[inline(always)]
pub fn any_option() -> bool {
    let words = (&raw const BLOCK_CONTROL) as *const u64;
    // SAFETY: the global is 16 bytes, 8-aligned (`BlockControl`'s own asserts).
    unsafe { core::ptr::read_volatile(words) | core::ptr::read_volatile(words.add(1)) != 0 }
}

/// Whether the completion takes the kernel's own dispatch stamp: wherever there is one (the
/// issue probe, if attached, did not stamp the request then), unless probe stamps are
/// asked for.
#[inline(always)]
pub fn kernel_path(ctl: &BlockControl, io_start_ns: u64) -> bool {
    ctl.probe_stamps == 0 && io_start_ns != 0
}

/// A request's mark bit.
pub struct Mark {
    word: *mut u64,
    bit: u64,
}

impl Mark {
    #[inline(always)]
    fn is_set(&self) -> bool {
        // SAFETY: a map value; only this request's holder writes this bit.
        unsafe { core::ptr::read_volatile(self.word) & self.bit != 0 }
    }
}

/// At dispatch: marks the request and counts it in flight, unless its mark is still set by a
/// request whose completion was missed (that one is then counted in its place). Returns the
/// requests in flight on the queue, itself included. The add returns nothing (a fetching add
/// needs BPF ISA v3), so the count is read right after it: at that moment this request is in
/// flight, and the count is that of the requests in flight, whatever other CPUs did between.
#[inline(always)]
pub fn enter(mark: &Mark, slot: *mut QueueSlot) -> i64 {
    if mark.is_set() {
        count(UNREC_UNSEEN_END);
    } else {
        // SAFETY: map values; the bit is clear, so adding it sets it without a carry.
        unsafe {
            atomic_add(mark.word, mark.bit);
            atomic_add(&raw mut (*slot).inflight, 1);
        }
    }
    // SAFETY: a map value.
    unsafe { core::ptr::read_volatile(&raw const (*slot).inflight) }
}

/// At completion or requeue: clears the request's mark and counts it out, if it is marked.
#[inline(always)]
pub fn leave(mark: &Mark, slot: *mut QueueSlot) {
    if mark.is_set() {
        // SAFETY: map values; the bit is set, so subtracting it clears it without a borrow.
        unsafe {
            atomic_add(mark.word, mark.bit.wrapping_neg());
            atomic_add(&raw mut (*slot).inflight, -1);
        }
    }
}

/// Counts a completed or requeued request out of its queue, if it is tracked. (The checks
/// are nested rather than a tuple of both: see `issue::try_issue`.)
#[inline(always)]
pub fn leave_request(req: &Request) {
    if let Some(slot) = req.queue_slot()
        && let Some(mark) = req.mark()
    {
        leave(&mark, slot);
    }
}

/// Atomic add, result unused (the BPF target has no `AtomicI64::fetch_add`).
///
/// # Safety
/// `p` must be valid for reads and writes.
#[inline(always)]
pub unsafe fn atomic_add<T: Copy>(p: *mut T, delta: T) {
    // SAFETY: the caller keeps `p` valid for reads and writes.
    unsafe { core::intrinsics::atomic_xadd::<T, T, { AtomicOrdering::Relaxed }>(p, delta) };
}

/// This CPU's stats of (device, op) on queue `qid`: its direct-mapped slot if free or its
/// own, else its hash entry, created zeroed on first use.
#[inline(always)]
pub fn stats(qid: u32, key: &DevOp) -> Option<&'static mut OpStats> {
    if let Some(p) = BLOCK_FAST.get_ptr_mut(fast_index(qid, key.op)) {
        // SAFETY: per-CPU value, only this CPU writes it while the program runs.
        let slot = unsafe { &mut *p };
        // The owner compared as one word: one load and one compare (`DevOp` is two u32s,
        // `dev` first, at the start of the slot).
        // SAFETY: the slot begins with its owner, 8 bytes, 8-aligned.
        let owner = unsafe { core::ptr::read(p as *const u64) };
        if owner == owner_word(key) {
            return Some(&mut slot.stats);
        }
        if owner as u32 == 0 {
            slot.owner = *key;
            return Some(&mut slot.stats);
        }
    }
    stats_in_hash(key)
}

/// `DevOp` as the little-endian word its two fields make in memory.
const _: () = assert!(
    core::mem::offset_of!(FastSlot, owner) == 0
        && core::mem::offset_of!(DevOp, dev) == 0
        && core::mem::offset_of!(DevOp, op) == 4
        && core::mem::align_of::<FastSlot>() == 8
);
#[inline(always)]
fn owner_word(key: &DevOp) -> u64 {
    key.dev as u64 | (key.op as u64) << 32
}

/// The hash map's stats of (device, op), created zeroed on first use.
#[inline(always)]
fn stats_in_hash(key: &DevOp) -> Option<&'static mut OpStats> {
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
