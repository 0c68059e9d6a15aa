//! Bio-based devices: dm (linear, crypt, delay, …), md, NVMe multipath heads. They make no
//! requests of their own (the request probes see only the devices below them), so each bio
//! that enters one is timed from `block_bio_queue` to `block_bio_complete` and counted for
//! that device: its service time is all the time the IO spent in that layer and below.
//!
//! Request-based devices return after four reads at `block_bio_queue`; their bios are never
//! recorded, so their completions find nothing (one lookup) and are not counted twice. A bio
//! that a bio-based device hands down as it is completes as part of a request, for which the
//! kernel traces no bio completion unless the driver does (NVMe multipath does; md on 5.10
//! does not): while user space says so, the request completion looks its bios up too.

use agent_common::block::{
    BioStart, DevOp, ErrorKey, MAX_BIOS, OFFSET_NONE, OP_FLUSH, OP_WRITE, STAMP_BIO,
};
use agent_common::hist::{latency_slot, size_slot};
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::macros::map;
use aya_ebpf::maps::LruHashMap;
use aya_ebpf::programs::BtfTracePointContext;

use super::{at, count, count_error, disk_dev, lay, op_of, stats};
use crate::ready::ready;
use agent_common::ready as probe;

crate::ready::shared_map_names!(BLOCK_BIOS);

/// Bios in flight through bio-based devices, by address. LRU, so that a bio whose completion
/// is not seen cannot hold its entry forever.
#[map]
static BLOCK_BIOS: LruHashMap<u64, BioStart> = LruHashMap::with_max_entries(MAX_BIOS, 0);

/// `block_bio_queue`: a bio enters a device (argument `BIO`: 0 since 5.11, 1 before, after
/// the request queue; one program per position, as for the issuer probe).
pub fn try_queue<const BIO: usize>(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_BIO_QUEUE) {
        return Ok(());
    }
    let bio: *const u8 = ctx.arg(BIO);
    // The verifier sees `bdev_disk` as a constant and drops the other branch.
    let disk: *const u8 = if lay!(bdev_disk) == OFFSET_NONE {
        at!(bio, bio_bdev)
    } else {
        let bdev: *const u8 = at!(bio, bio_bdev);
        at!(bdev, bdev_disk)
    };
    if disk.is_null() {
        return Ok(());
    }
    let q: *const u8 = at!(disk, disk_queue);
    let mq_ops: u64 = at!(q, q_mq_ops);
    if mq_ops != 0 {
        return Ok(());
    }
    let bytes: u32 = at!(bio, bio_size);
    let mut op = op_of(at!(bio, bio_opf));
    // A write without data is a flush (`REQ_PREFLUSH`), as its request would be.
    if op == OP_WRITE && bytes == 0 {
        op = OP_FLUSH;
    }
    let start = BioStart {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        dev: disk_dev(disk),
        op,
        qid: at!(q, q_id),
        bytes,
    };
    let _ = BLOCK_BIOS.insert(bio as u64, start, 0);
    Ok(())
}

/// `block_bio_complete(q, bio)`: a bio the kernel traced at entry completes. Its entry, if it
/// entered a bio-based device, is consumed and the bio counted for that device (whatever
/// queue it completes on: an NVMe multipath head hands the bio itself to a path).
pub fn try_complete(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_BIO_COMPLETION) {
        return Ok(());
    }
    finish(ctx.arg(1), None);
    Ok(())
}

/// Bios of one request looked up at its completion; merged bios beyond these are left to
/// the map's LRU.
const REQUEST_BIOS: usize = 4;

/// A request completed with `status` (`block_rq_complete`, while user space sets
/// `bios_in_requests`): the kernel traces no completion for the bios of a request, so a bio
/// that a bio-based device handed down as it is (md on 5.10) completes here.
#[inline(always)]
pub fn complete_request_bios(rq: *const u8, status: u32) {
    if !ready(probe::BLOCK_BIO_COMPLETION) {
        return;
    }
    let mut bio: *const u8 = at!(rq, rq_bio);
    for _ in 0..REQUEST_BIOS {
        if bio.is_null() {
            return;
        }
        finish(bio, Some(status));
        bio = at!(bio, bio_next);
    }
}

/// Counts `bio` for the bio-based device it entered, if it entered one, and consumes its
/// entry. `request_status`: its request's, when it completes as part of one (its own
/// `bi_status` is set only after).
#[inline(always)]
fn finish(bio: *const u8, request_status: Option<u32>) {
    let key = bio as u64;
    let Some(p) = BLOCK_BIOS.get_ptr(key) else {
        return;
    };
    // SAFETY: a map value, copied once.
    let start = unsafe { *p };
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let _ = BLOCK_BIOS.remove(key);
    if start.dev == 0 {
        return;
    }
    let status = request_status.unwrap_or_else(|| {
        let status: u8 = at!(bio, bio_status);
        status as u32
    });
    if status != 0 {
        count_error(&ErrorKey {
            dev: start.dev,
            op: start.op,
            status,
            _pad: 0,
        });
    }
    let Some(s) = stats(
        start.qid,
        &DevOp {
            dev: start.dev,
            op: start.op,
        },
    ) else {
        return;
    };
    let service = now.saturating_sub(start.start_ns);
    s.size[size_slot(start.bytes as u64)] += 1;
    s.bytes += start.bytes as u64;
    s.service[latency_slot(service)] += 1;
    s.service_ns += service;
    count(STAMP_BIO);
}
