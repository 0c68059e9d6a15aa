//! `block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes)`: the
//! driver completed `nr_bytes` of a request.

use agent_common::block::{
    DevOp, ERRNO_STATUS, ErrorKey, OP_OTHER, OP_READ, OP_WRITE, OpStats, STAMP_KERNEL, STAMP_PROBE,
    UNREC_NO_DISPATCH_STAMP, UNREC_NO_START_STAMP,
};
use agent_common::hist::{LAT_SLOTS, latency_slot, latency_slot_short, size_slot};
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::programs::BtfTracePointContext;
use core::intrinsics::{likely, unlikely};

use super::{
    Request, any_option, at, bio, control, count, count_error, issuer, kernel_path, kernel_stamps,
    lay, leave_request, op_of, stamps, stats,
};
use crate::ready::ready;
use agent_common::ready as probe;

pub fn try_complete(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_COMPLETION) {
        return Ok(());
    }
    let rq: *const u8 = ctx.arg(0);
    let nr_bytes: u32 = ctx.arg(2);
    // A partial completion: the request goes on; it is counted when its last part completes.
    let remaining: u32 = at!(rq, rq_data_len);
    if nr_bytes < remaining {
        return Ok(());
    }
    // The clock first: fewer values live across the helper call, which the compiler would
    // otherwise keep on the stack.
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    // The default configuration on a queue the kernel stamps, the common case: no option to
    // look at, one stats slot, straight through (what the general path does then). It reads
    // only what it needs and keeps nothing for the general path, which reads again what it
    // needs: the compiler then keeps this path's values in registers.
    if likely(!any_option()) {
        let io_start: u64 = at!(rq, rq_io_start_time_ns);
        let op = op_of(at!(rq, rq_cmd_flags));
        if likely(io_start != 0 && op != OP_OTHER) {
            return complete_stamped(ctx, rq, nr_bytes, now, io_start, op);
        }
    }
    complete_general(ctx, rq, nr_bytes, now)
}

/// A read or write completing no bytes is the end of a flush sequence: the device work was
/// the flush request and the data part, each counted when it completed.
#[inline(always)]
fn flush_end(nr_bytes: u32, op: u32) -> bool {
    nr_bytes == 0 && (op == OP_READ || op == OP_WRITE)
}

/// The completion's status: `blk_status_t` (a u8), or a negative errno on kernels that pass
/// `int error`.
#[inline(always)]
fn status_of(ctx: &BtfTracePointContext) -> u32 {
    let raw = ctx.arg::<u64>(1);
    if lay!(error_is_errno) != 0 {
        match (raw as i32).unsigned_abs() {
            0 => 0,
            errno => ERRNO_STATUS | errno,
        }
    } else {
        raw as u8 as u32
    }
}

/// The default configuration's completion of a request the kernel stamped at dispatch.
#[inline(always)]
fn complete_stamped(
    ctx: &BtfTracePointContext,
    rq: *const u8,
    nr_bytes: u32,
    now: u64,
    io_start: u64,
    op: u32,
) -> Result<(), i32> {
    if unlikely(flush_end(nr_bytes, op)) {
        return Ok(());
    }
    let q: *const u8 = at!(rq, rq_q);
    let dev = Request::disk_dev_of(rq, q);
    if unlikely(dev == 0) {
        return Ok(());
    }
    let status = status_of(ctx);
    if unlikely(status != 0) {
        count_error(&ErrorKey {
            dev,
            op,
            status,
            _pad: 0,
        });
    }
    let Some(s) = stats(at!(q, q_id), &DevOp { dev, op }) else {
        return Ok(());
    };
    add_size(s, nr_bytes);
    add_latency(
        &mut s.service,
        &mut s.service_ns,
        now.wrapping_sub(io_start),
    );
    let start_ns: u64 = at!(rq, rq_start_time_ns);
    if unlikely(start_ns == 0) {
        count(UNREC_NO_START_STAMP);
        return Ok(());
    }
    add_latency(
        &mut s.queue,
        &mut s.queue_ns,
        io_start.wrapping_sub(start_ns),
    );
    Ok(())
}

/// Every other completion: an option on, a request without the kernel's dispatch stamp, a
/// passthrough command.
#[inline(always)]
fn complete_general(
    ctx: &BtfTracePointContext,
    rq: *const u8,
    nr_bytes: u32,
    now: u64,
) -> Result<(), i32> {
    let req = Request::read(rq);
    if flush_end(nr_bytes, req.op) {
        return Ok(());
    }
    let status = status_of(ctx);
    let io_start = req.io_start_ns();
    let ctl = &control();
    if ctl.bios_in_requests != 0 {
        bio::complete_request_bios(rq, status);
    }
    let (dispatch, source) = if kernel_path(ctl, io_start) {
        // A kernel that stamps passthrough commands (before 6.x excluded them from queue
        // statistics) stamped one the issue probe, if attached, stamped too: drop that.
        if req.op == OP_OTHER && !kernel_stamps(rq) {
            let _ = stamps().remove(req.key());
        }
        (io_start, STAMP_KERNEL)
    } else {
        let map = stamps();
        match map.get_ptr(req.key()) {
            Some(p) => {
                // SAFETY: a map value, read once.
                let t = unsafe { *p };
                let _ = map.remove(req.key());
                (t, STAMP_PROBE)
            }
            // Dispatched before the agent started, or the stamp was evicted: the kernel's own
            // stamp, if any, still gives the service time (not when probe stamps are forced,
            // so that they can be checked on their own).
            None if ctl.probe_stamps == 0 => (io_start, STAMP_KERNEL),
            None => (0, STAMP_PROBE),
        }
    };
    if ctl.track_inflight != 0 {
        leave_request(&req);
    }
    let dev = req.dev();
    if status != 0 && dev != 0 {
        count_error(&ErrorKey {
            dev,
            op: req.op,
            status,
            _pad: 0,
        });
    }
    if dev == 0 {
        return Ok(());
    }
    let Some(s) = stats(req.qid, &DevOp { dev, op: req.op }) else {
        return Ok(());
    };
    add_size(s, nr_bytes);
    // Opt-in: one issuer lookup and one counter entry more per request.
    let mut cg = if ctl.cgroups != 0 {
        issuer::account(rq, dev, req.op)
    } else {
        None
    };
    if let Some(c) = cg.as_deref_mut() {
        c.ios += 1;
        c.bytes += nr_bytes as u64;
    }
    if dispatch == 0 {
        if req.started() {
            count(UNREC_NO_DISPATCH_STAMP);
        }
        return Ok(());
    }
    // Kernel stamps are the common case: user space derives their count from the timed
    // requests, so that the per-IO path touches no counter of its own.
    if source == STAMP_PROBE {
        count(STAMP_PROBE);
    }
    let service = elapsed(now, dispatch);
    add_service(s, service);
    if let Some(c) = cg.as_deref_mut() {
        c.service_ns += service;
    }
    if req.start_ns == 0 {
        count(UNREC_NO_START_STAMP);
        return Ok(());
    }
    let queue = elapsed(dispatch, req.start_ns);
    add_queue(s, queue);
    if let Some(c) = cg {
        c.queue_ns += queue;
    }
    Ok(())
}

/// `to - from`, 0 if `to` is earlier (a difference of 2^63 ns or more, 292 years, being
/// taken as such): branch-free, where `saturating_sub` compiles to several branches (the BPF
/// target has no select).
#[inline(always)]
fn elapsed(to: u64, from: u64) -> u64 {
    elapsed_of(to.wrapping_sub(from))
}

/// `d`, a wrapping difference, or 0 where it is negative.
#[inline(always)]
fn elapsed_of(d: u64) -> u64 {
    d & !(((d as i64) >> 63) as u64)
}
/// Adds the time `to - from` (`d`, wrapping) to a histogram and its sum, as
/// `add_service`/`add_queue` do with `elapsed`: one compare where it lies between 1 ns and
/// 4.29 s, the common case; the clamp and the general slot otherwise.
#[inline(always)]
fn add_latency(hist: &mut [u64; LAT_SLOTS], sum: &mut u64, d: u64) {
    let n = d.wrapping_sub(1);
    if likely(n < 1 << 32) {
        hist[latency_slot_short(n)] += 1;
        *sum += d;
    } else {
        let ns = elapsed_of(d);
        hist[latency_slot(ns)] += 1;
        *sum += ns;
    }
}

#[inline(always)]
fn add_size(s: &mut OpStats, bytes: u32) {
    s.size[size_slot(bytes as u64)] += 1;
    s.bytes += bytes as u64;
}

#[inline(always)]
fn add_service(s: &mut OpStats, ns: u64) {
    s.service[latency_slot(ns)] += 1;
    s.service_ns += ns;
}

#[inline(always)]
fn add_queue(s: &mut OpStats, ns: u64) {
    s.queue[latency_slot(ns)] += 1;
    s.queue_ns += ns;
}
