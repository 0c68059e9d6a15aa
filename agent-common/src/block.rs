//! Block path ABI: the request layout read from kernel BTF, the map keys and values the block
//! probes fill, and the control block user space writes.

use crate::hist::{DEPTH_SLOTS, LAT_SLOTS, SIZE_SLOTS};
use crate::{assert_size, user_pod};

/// Operation classes stornet reports (`op` label), in this order.
pub const OP_READ: u32 = 0;
pub const OP_WRITE: u32 = 1;
pub const OP_FLUSH: u32 = 2;
pub const OP_DISCARD: u32 = 3;
pub const OP_OTHER: u32 = 4;
pub const OP_COUNT: usize = 5;
pub const OP_NAMES: [&str; OP_COUNT] = ["read", "write", "flush", "discard", "other"];

/// The name of the load-time global holding the [`BlockLayout`].
pub const LAYOUT_GLOBAL: &str = "BLOCK_LAYOUT";

/// The name of the load-time global holding the [`OpClasses`].
pub const OP_CLASS_GLOBAL: &str = "BLOCK_OP_CLASS";

/// The op class (`OP_*`) of every value of the low byte of `cmd_flags` (a request's) or
/// `bi_opf` (a bio's): one load in a probe where comparing the `enum req_op` values takes a
/// chain of them. Built by [`op_classes`] from the layout, so the kernel's own values decide.
pub type OpClasses = [u8; OP_CLASS_ENTRIES];
pub const OP_CLASS_ENTRIES: usize = 256;

/// The [`OpClasses`] of a layout, whose `op_mask` must fit in a byte (`REQ_OP_BITS` is 8 on
/// every kernel stornet knows; user space refuses a layout with more).
pub const fn op_classes(l: &BlockLayout) -> OpClasses {
    let mut t = [OP_OTHER as u8; OP_CLASS_ENTRIES];
    let mut i = 0;
    while i < OP_CLASS_ENTRIES {
        let op = i as u32 & l.op_mask;
        t[i] = if op == l.req_op_read {
            OP_READ
        } else if op == l.req_op_write {
            OP_WRITE
        } else if op == l.req_op_flush {
            OP_FLUSH
        } else if op == l.req_op_discard {
            OP_DISCARD
        } else {
            OP_OTHER
        } as u8;
        i += 1;
    }
    t
}

/// Kernel struct offsets and enum values the block probes need. User space fills this from
/// the running kernel's BTF and passes it as a load-time global; nothing is hard-coded.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// `struct request`: `q`, `cmd_flags`, `__data_len`, `start_time_ns`,
    /// `io_start_time_ns`, `state`, `tag` (driver tag), `mq_hctx`.
    pub rq_q: u32,
    pub rq_cmd_flags: u32,
    pub rq_data_len: u32,
    pub rq_start_time_ns: u32,
    pub rq_io_start_time_ns: u32,
    pub rq_state: u32,
    pub rq_tag: u32,
    pub rq_mq_hctx: u32,
    /// `struct blk_mq_hw_ctx`: `queue_num`.
    pub hctx_queue_num: u32,
    /// `struct request_queue`: `id`, `queue_flags`.
    pub q_id: u32,
    pub q_queue_flags: u32,
    /// Where the request's disk pointer lies: `request_queue.disk` (`disk_in_rq` 0), or
    /// `request.rq_disk` on kernels whose queue has no disk pointer (`disk_in_rq` 1).
    pub disk: u32,
    pub disk_in_rq: u32,
    /// `struct gendisk`: `major` and `first_minor`, the whole disk's `dev_t`.
    pub disk_major: u32,
    pub disk_first_minor: u32,
    /// `cmd_flags & op_mask` is the `enum req_op` value.
    pub op_mask: u32,
    /// `enum req_op` values of read, write, flush, discard and the two passthrough ops.
    pub req_op_read: u32,
    pub req_op_write: u32,
    pub req_op_flush: u32,
    pub req_op_discard: u32,
    pub req_op_drv_in: u32,
    pub req_op_drv_out: u32,
    /// Bit number of `QUEUE_FLAG_STATS` in `queue_flags`: set when the kernel stamps
    /// `io_start_time_ns` at dispatch.
    pub queue_flag_stats: u32,
    /// Non-zero where `block_rq_complete` passes a negative errno (`int error`, before
    /// `blk_status_t`); the probe then records `ERRNO_STATUS | errno`.
    pub error_is_errno: u32,
    /// `enum mq_rq_state` value `MQ_RQ_IDLE`: a request in this state was never dispatched
    /// (or was requeued).
    pub mq_rq_idle: u32,
    /// `struct request`: `bio`, the request's first bio (issuer attribution, and the bio
    /// probes' look at a completed request's bios; `OFFSET_NONE` when it did not resolve,
    /// and those probes stay down).
    pub rq_bio: u32,
    /// Which argument of `block_getrq` is the bio: 0 (`(struct bio *)`, 5.11 and later) or 1
    /// (`(struct request_queue *, struct bio *, int)`); user space loads the program for it.
    pub getrq_bio_arg: u32,
    /// Hidden disks (NVMe multipath paths), which newer kernels register without a `dev_t`
    /// in sysfs: `gendisk.part0` → `block_device.bd_device.devt` (the number sysfs shows, 0
    /// for such a disk) and `gendisk.diskseq`, which names it instead (see
    /// [`HIDDEN_MAJOR`]); OFFSET_NONE before 5.15.
    pub disk_part0: u32,
    pub bdev_devt: u32,
    pub disk_seq: u32,
    /// Bio-based devices (dm, md, NVMe multipath heads), timed per bio: the bio's device,
    /// `bio.bi_bdev` → `block_device.bd_disk` (5.12 and later), or `bio.bi_disk` itself
    /// (`bdev_disk` OFFSET_NONE); `gendisk.queue` → `request_queue.mq_ops` (none: the
    /// device makes no requests); `bio.bi_opf`, `bio.bi_iter.bi_size`, `bio.bi_status`.
    pub bio_bdev: u32,
    pub bdev_disk: u32,
    pub disk_queue: u32,
    pub q_mq_ops: u32,
    pub bio_opf: u32,
    pub bio_size: u32,
    pub bio_status: u32,
    /// `bio.bi_next`: the next bio of a request.
    pub bio_next: u32,
    /// Which argument of `block_bio_queue` is the bio: 0 (5.11 and later) or 1 (after the
    /// request queue); user space loads the program for it.
    pub bio_queue_arg: u32,
    /// Hidden disks before 5.15 (no `diskseq`): `gendisk.flags`, the `GENHD_FL_HIDDEN` bit
    /// (0: not known, such disks keep their major and minor) and `gendisk.disk_name`, whose
    /// words name the disk instead (see [`hidden_name_minor`]).
    pub disk_flags: u32,
    pub hidden_flag: u32,
    pub disk_name: u32,
}
assert_size!(BlockLayout, 168);

/// The minor stornet gives a hidden disk on kernels without `diskseq` (before 5.15): its
/// `disk_name` (32 bytes) read as four little-endian words, every byte from the first NUL on
/// taken as zero (drivers copy the name from an uninitialised buffer), folded (FNV-1a over
/// words, then mixed), low 20 bits. User space folds the names in /sys/class/block the same
/// way. Branch-free, so that the verifier walks it once (with a branch per byte, 5.10's
/// verifier did not finish under emulation).
pub const fn hidden_name_minor(words: [u64; 4]) -> u32 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    // All ones until a word with a NUL has been seen, then zero.
    let mut alive = u64::MAX;
    let mut i = 0;
    while i < 4 {
        let w = words[i];
        // The high bit of each zero byte (exact for the lowest one, which is all that is used).
        let zeros = w.wrapping_sub(ONES) & !w & HIGHS;
        let first = zeros & zeros.wrapping_neg();
        // The bytes before the first NUL (all of them where there is none).
        let keep = (first >> 7).wrapping_sub(1);
        h = (h ^ (w & keep & alive)).wrapping_mul(0x0000_0100_0000_01b3);
        alive &= ((zeros | zeros.wrapping_neg()) >> 63).wrapping_sub(1);
        i += 1;
    }
    // Multiplication carries a difference only upward: mix the high bits down (the
    // finalizer of MurmurHash3) before the low 20 are kept.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h as u32) & MINOR_MASK
}

/// The bytes of `disk_name` that [`hidden_name_minor`] folds.
pub const DISK_NAME_LEN: usize = 32;

/// `disk_name`'s bytes as the four little-endian words the probes read.
pub fn name_words(bytes: &[u8; DISK_NAME_LEN]) -> [u64; 4] {
    core::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    })
}

/// The major number stornet gives a disk without a `dev_t` of its own (a hidden NVMe
/// multipath path): its minor is the low 20 bits of the disk's `diskseq`, which sysfs shows.
/// No driver uses major 4095.
pub const HIDDEN_MAJOR: u32 = 0xfff;
pub const MINOR_MASK: u32 = (1 << 20) - 1;

/// An offset that did not resolve.
pub const OFFSET_NONE: u32 = u32::MAX;

/// Field loads of the block probes carry their offset in the instruction, as a compiled
/// C program's would: the probes emit each load with a marker in the instruction's offset,
/// `FIELD_MARK` plus the field's index in [`BlockLayout`] (its word), and user space writes
/// the field's offset there before load. One load per field instead of a read of the
/// layout, a register and an add: fewer instructions and registers on the per-IO path. A
/// field that did not resolve keeps its marker, a negative offset the verifier refuses
/// wherever the load can run.
pub const FIELD_MARK: i16 = i16::MIN;

/// Words of [`BlockLayout`], each a field a marker can name.
pub const LAYOUT_WORDS: usize = core::mem::size_of::<BlockLayout>() / 4;
const _: () = assert!(LAYOUT_WORDS < 256 && core::mem::align_of::<BlockLayout>() == 4);

/// What the probes write after the base register of a marked load (`base - k`): the
/// marker of the field at `layout_offset` in [`BlockLayout`], as a positive distance
/// below zero.
pub const fn field_mark_distance(layout_offset: usize) -> u32 {
    (-(FIELD_MARK as i32) - (layout_offset / 4) as i32) as u32
}

impl BlockLayout {
    /// The layout as the words markers index.
    pub fn words(&self) -> [u32; LAYOUT_WORDS] {
        // SAFETY: repr(C), u32 fields only, no padding (size asserted).
        unsafe { core::mem::transmute_copy(self) }
    }
}

/// A bio entering a bio-based device, kept until it completes (keyed by its address).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BioStart {
    pub start_ns: u64,
    pub dev: u32,
    pub op: u32,
    /// The device's request queue id (its direct-mapped stats slot).
    pub qid: u32,
    /// `bi_size` when the bio entered: completion consumes it.
    pub bytes: u32,
}
assert_size!(BioStart, 24);

/// Map key: a device (kernel `dev_t` of the whole disk, `MAJOR << 20 | MINOR`) and an op.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevOp {
    pub dev: u32,
    pub op: u32,
}
assert_size!(DevOp, 8);

/// Everything kept per (device, op), per CPU; user space sums the CPUs. The histograms are
/// slot counts on the scales of [`crate::hist`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpStats {
    // The sums first: with a fast slot's owner they share the first cache line, which every
    // completion reads and writes.
    pub queue_ns: u64,
    pub service_ns: u64,
    pub bytes: u64,
    pub depth_sum: u64,
    /// Dispatched requests handed back to the block layer to be dispatched again.
    pub requeues: u64,
    /// `1 + request_queue id` of the device (0: unknown), where its in-flight count lives.
    pub queue_slot: u64,
    /// Request start (created, or merged into) to dispatch to the driver.
    pub queue: [u64; LAT_SLOTS],
    /// Dispatch to completion.
    pub service: [u64; LAT_SLOTS],
    /// Bytes of each completed request.
    pub size: [u64; SIZE_SLOTS],
    /// Requests in flight on the device when each one was dispatched, itself included.
    pub depth: [u64; DEPTH_SLOTS],
}
assert_size!(OpStats, 8 * (2 * LAT_SLOTS + SIZE_SLOTS + DEPTH_SLOTS + 6));

impl OpStats {
    pub const ZERO: OpStats = OpStats {
        queue_ns: 0,
        service_ns: 0,
        bytes: 0,
        depth_sum: 0,
        requeues: 0,
        queue_slot: 0,
        queue: [0; LAT_SLOTS],
        service: [0; LAT_SLOTS],
        size: [0; SIZE_SLOTS],
        depth: [0; DEPTH_SLOTS],
    };

    /// The fields that add up over CPUs and devices (histogram slots, sums, counters), in
    /// one order. Destructured without `..`, so that a new field is placed here (or summed
    /// apart, as `queue_slot`) before anything builds.
    pub fn additive(&self) -> [&[u64]; 9] {
        let OpStats {
            queue,
            service,
            size,
            depth,
            queue_ns,
            service_ns,
            bytes,
            depth_sum,
            requeues,
            queue_slot: _,
        } = self;
        use core::slice::from_ref as one;
        [
            queue,
            service,
            size,
            depth,
            one(queue_ns),
            one(service_ns),
            one(bytes),
            one(depth_sum),
            one(requeues),
        ]
    }

    /// [`OpStats::additive`], to add into.
    pub fn additive_mut(&mut self) -> [&mut [u64]; 9] {
        let OpStats {
            queue,
            service,
            size,
            depth,
            queue_ns,
            service_ns,
            bytes,
            depth_sum,
            requeues,
            queue_slot: _,
        } = self;
        use core::slice::from_mut as one;
        [
            queue,
            service,
            size,
            depth,
            one(queue_ns),
            one(service_ns),
            one(bytes),
            one(depth_sum),
            one(requeues),
        ]
    }
}

/// A slot of the direct-mapped, per-CPU stats array: the (device, op) it holds on this CPU
/// (`dev` 0: free) and its stats. Found by index, so the probes need no hash lookup for the
/// devices that fit; the others go to the per-CPU hash.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastSlot {
    pub owner: DevOp,
    pub stats: OpStats,
}
assert_size!(FastSlot, 8 + core::mem::size_of::<OpStats>());

/// Slots of the direct-mapped stats array (a power of two): the queues with ids below
/// `FAST_SLOTS / OP_COUNT` never collide.
pub const FAST_SLOTS: u32 = 128;

/// The direct-mapped slot of (request queue id, op).
pub const fn fast_index(queue_id: u32, op: u32) -> u32 {
    queue_id.wrapping_mul(OP_COUNT as u32).wrapping_add(op) & (FAST_SLOTS - 1)
}

/// In-flight requests of one request queue (one per disk), indexed by the queue's `id`.
/// Shared by all CPUs (atomic updates); padded to a cache line so queues do not share one.
/// The count moves only with a request's mark (`BLOCK_MARKS`), so that it stays exact.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSlot {
    pub inflight: i64,
    /// `dev_t` of the queue's disk, written at each dispatch.
    pub dev: u32,
    pub _pad: [u32; 13],
}
assert_size!(QueueSlot, 64);

/// The section of the global holding the [`BlockControl`]: a map of its own (aya makes one
/// per `.data.*` section), which user space writes after load and the probes read as plain
/// memory, with no map lookup.
pub const CONTROL_SECTION: &str = ".data.block_control";

/// Settings user space writes after load. 8-aligned, so that the probes read it as two words.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockControl {
    /// Non-zero: stamp every dispatch with the issue probe (a map entry per request in
    /// flight) instead of reading the kernel's `io_start_time_ns`.
    pub probe_stamps: u32,
    /// Non-zero: count requests in flight at dispatch (`inflight_at_issue`), with a mark
    /// per request and shared atomic adds at dispatch and completion.
    pub track_inflight: u32,
    /// Non-zero: account each completed request to the cgroup that issued it (the issuer
    /// probe, attached only then, records it per request).
    pub cgroups: u32,
    /// Non-zero: look the bios of each completed request up among those timed through a
    /// bio-based device. md hands its own bio to the device below on some kernels (5.10),
    /// and the kernel traces no completion for a bio that completes as part of a request;
    /// user space sets this while an md array exists.
    pub bios_in_requests: u32,
}
assert_size!(BlockControl, 16);
const _: () = assert!(core::mem::align_of::<BlockControl>() == 8);

impl BlockControl {
    /// Non-zero when any setting is on (zero: the default configuration).
    #[inline(always)]
    pub fn options(&self) -> u32 {
        self.probe_stamps | self.track_inflight | self.cgroups | self.bios_in_requests
    }

    /// [`BlockControl::options`] as two 8-byte words: two loads and an OR.
    #[inline(always)]
    pub fn any_option(&self) -> bool {
        // SAFETY: 16 bytes of plain integers, 8-aligned (see the assert below).
        let words = unsafe { &*(self as *const BlockControl as *const [u64; 2]) };
        words[0] | words[1] != 0
    }
}

/// Map key of the per-cgroup counters: a device, an op and the issuing task's cgroup v2 id
/// (0: the issuer was not seen).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CgroupKey {
    pub dev: u32,
    pub op: u32,
    pub cgroup: u64,
}
assert_size!(CgroupKey, 16);

/// What is counted per (device, op, cgroup), per CPU: sums only, no histograms, so that a
/// cgroup costs four counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupStats {
    pub ios: u64,
    pub bytes: u64,
    /// Summed over the requests timed (those with a dispatch stamp, and a start stamp for
    /// the queue time).
    pub queue_ns: u64,
    pub service_ns: u64,
}
assert_size!(CgroupStats, 32);

impl CgroupStats {
    pub fn add(&mut self, o: &CgroupStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.queue_ns += o.queue_ns;
        self.service_ns += o.service_ns;
    }
}

/// Marks of dispatched requests: one bit per driver tag of one hardware queue of one request
/// queue, set at dispatch and cleared at completion or requeue. A tag is held by one request
/// at a time, so each bit has one writer at a time and an atomic add of a bit known to be
/// clear (or set) sets (or clears) it. A completion the probes miss (the kernel skips a BPF
/// run now and then) leaves its bit set, and the next request with that tag finds it set and
/// is not counted again: the in-flight count heals itself instead of drifting.
pub type MarkWords = [u64; MARK_TAGS as usize / 64];
/// Request queues (by id), hardware queues and driver tags the marks cover; requests beyond
/// are timed but not counted in flight (`UNREC_UNTRACKED`).
pub const MARK_QUEUES: u32 = 256;
pub const MARK_HCTX: u32 = 64;
pub const MARK_TAGS: u32 = 1024;

/// Set in `ErrorKey::status` when the value is a kernel errno rather than a `blk_status_t`
/// (kernels whose `block_rq_complete` passes `int error`).
pub const ERRNO_STATUS: u32 = 1 << 31;

/// Key of the error counters: a device, an op and the kernel's `blk_status_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorKey {
    pub dev: u32,
    pub op: u32,
    pub status: u32,
    pub _pad: u32,
}
assert_size!(ErrorKey, 16);

user_pod!(
    BlockLayout,
    DevOp,
    OpStats,
    FastSlot,
    QueueSlot,
    BlockControl,
    ErrorKey,
    CgroupKey,
    CgroupStats,
    BioStart
);

/// Most (device, op) pairs the kernel keeps; entries are allocated on first use.
pub const MAX_DEV_OPS: u32 = 4096;
/// Request queues whose in-flight count is kept (indexed by the queue's `id`).
pub const MAX_QUEUES: u32 = MARK_QUEUES;
/// Most requests in flight stamped by the issue probe (where the kernel does not stamp).
pub const MAX_PROBE_STAMPS: u32 = 65536;
/// Most (device, op, status) error counters.
pub const MAX_ERROR_KEYS: u32 = 1024;
/// Most (device, op, cgroup) counters; user space removes those of cgroups that are gone.
pub const MAX_CGROUP_KEYS: u32 = 8192;
/// Most requests whose issuer is kept between their creation and their completion (LRU: a
/// request whose completion is not seen cannot hold an entry for long).
pub const MAX_ISSUERS: u32 = 16384;
/// Most bios of bio-based devices in flight (LRU, as above).
pub const MAX_BIOS: u32 = 16384;

/// Per-CPU event counters (indexes into `BLOCK_COUNTERS`): first what the probes could not
/// record, per reason, then where the dispatch stamps of timed requests came from.
pub const UNREC_STATS_FULL: u32 = 0;
pub const UNREC_ERRORS_FULL: u32 = 1;
pub const UNREC_STAMPS_FULL: u32 = 2;
pub const UNREC_NO_DISPATCH_STAMP: u32 = 3;
pub const UNREC_NO_START_STAMP: u32 = 4;
pub const UNREC_UNTRACKED: u32 = 5;
pub const UNREC_UNSEEN_END: u32 = 6;
pub const UNREC_CGROUPS_FULL: u32 = 7;
pub const UNREC_COUNT: usize = 8;
/// Not counted by the probes (the common case, kept off the per-IO path): user space derives
/// it from the timed requests and the probe-stamped ones.
pub const STAMP_KERNEL: u32 = 8;
pub const STAMP_PROBE: u32 = 9;
/// IOs of bio-based devices, timed per bio from entering the device to completing.
pub const STAMP_BIO: u32 = 10;
pub const COUNTERS: usize = 11;
/// `reason` label of each `UNREC_*` counter.
pub const UNREC_NAMES: [&str; UNREC_COUNT] = [
    "stats_map_full",
    "error_map_full",
    "stamp_map_full",
    "no_dispatch_stamp",
    "no_start_stamp",
    "untracked_depth",
    "unseen_end",
    "cgroup_map_full",
];

/// Splits a kernel `dev_t` into (major, minor).
pub const fn dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_fold_up_to_their_nul() {
        let mut seen = [0u32; 6];
        for (k, len) in [1usize, 7, 8, 9, 16, 31].into_iter().enumerate() {
            let (mut clean, mut dirty) = ([0u8; 32], [0xa5u8; 32]);
            for i in 0..len {
                clean[i] = b'a' + (i % 26) as u8;
                dirty[i] = clean[i];
            }
            dirty[len] = 0;
            let minor = hidden_name_minor(name_words(&clean));
            assert_eq!(
                minor,
                hidden_name_minor(name_words(&dirty)),
                "a name of {len} bytes"
            );
            assert!(minor <= MINOR_MASK);
            assert!(
                !seen[..k].contains(&minor),
                "names of {len} bytes and less collide"
            );
            seen[k] = minor;
        }
    }

    #[test]
    fn fast_indexes_of_small_queue_ids_are_distinct() {
        let n = FAST_SLOTS / OP_COUNT as u32;
        let mut seen = [false; FAST_SLOTS as usize];
        for q in 0..n {
            for op in 0..OP_COUNT as u32 {
                let i = fast_index(q, op) as usize;
                assert!(!seen[i], "queue {q} op {op} collides");
                seen[i] = true;
            }
        }
        assert!(fast_index(u32::MAX, 4) < FAST_SLOTS);
    }

    #[test]
    fn op_classes_follow_the_layout_values() {
        // 6.x numbering (read 0, write 1, flush 2, discard 3, drv_in 34) and one with the
        // values moved, as a kernel could number them.
        for (read, write, flush, discard) in [(0, 1, 2, 3), (3, 2, 1, 0)] {
            let l = BlockLayout {
                op_mask: 0xff,
                req_op_read: read,
                req_op_write: write,
                req_op_flush: flush,
                req_op_discard: discard,
                ..BlockLayout::default()
            };
            let t = op_classes(&l);
            // The flag bits above the op byte never reach the table (it is indexed by the
            // low byte), and every other op value is `other`.
            for flags in [0u32, 1, 2, 3, 34, 35, 0xff, 1 << 11 | 1, 0x8000_0003] {
                let op = flags & 0xff;
                let want = match op {
                    o if o == read => OP_READ,
                    o if o == write => OP_WRITE,
                    o if o == flush => OP_FLUSH,
                    o if o == discard => OP_DISCARD,
                    _ => OP_OTHER,
                };
                assert_eq!(t[(flags & 0xff) as usize] as u32, want, "flags {flags:#x}");
            }
        }
        // A narrower mask folds the byte's upper bits away.
        let l = BlockLayout {
            op_mask: 0x7f,
            req_op_write: 1,
            req_op_read: 0,
            req_op_flush: 2,
            req_op_discard: 3,
            ..BlockLayout::default()
        };
        assert_eq!(op_classes(&l)[0x81] as u32, OP_WRITE);
    }

    #[test]
    fn dev_t_split() {
        assert_eq!(dev_major_minor((7 << 20) | 3), (7, 3));
        assert_eq!(dev_major_minor((259 << 20) | 1_048_575), (259, 1_048_575));
    }
}
