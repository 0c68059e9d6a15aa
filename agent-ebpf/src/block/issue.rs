//! `block_rq_issue(struct request *rq)`: a request is dispatched to the driver.
//!
//! Attached only while user space finds a queue whose dispatches the kernel may not stamp
//! (or an option needs every dispatch): it stamps the dispatches the kernel does not stamp
//! itself (queue statistics off, passthrough); for the others it reads three fields and
//! returns. Counting requests in flight (`track_inflight`) is what makes it do more.

use agent_common::block::{DevOp, UNREC_STAMPS_FULL, UNREC_UNTRACKED};
use agent_common::hist::depth_slot;
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::programs::BtfTracePointContext;

use super::{Request, control, count, enter, kernel_stamps, stamps, stats};
use crate::ready::ready;
use agent_common::ready as probe;

pub fn try_issue(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_ISSUE) {
        return Ok(());
    }
    let ctl = control();
    let rq: *const u8 = ctx.arg(0);
    // Stamp the dispatch where the kernel will not (the completion takes the kernel's stamp
    // wherever it finds one).
    if ctl.probe_stamps != 0 || !kernel_stamps(rq) {
        stamp(rq);
    }
    if ctl.track_inflight == 0 {
        return Ok(());
    }
    let req = Request::read(rq);
    // One at a time: a tuple of both would make the compiler read an unset stack slot on
    // the path where the first is None, which verifiers before 5.11 refuse.
    let Some(slot) = req.queue_slot() else {
        count(UNREC_UNTRACKED);
        return Ok(());
    };
    let Some(mark) = req.mark() else {
        count(UNREC_UNTRACKED);
        return Ok(());
    };
    let depth = enter(&mark, slot);
    let dev = req.dev();
    // SAFETY: a map value; a plain store, the same value from every CPU.
    unsafe { (*slot).dev = dev };
    if dev == 0 {
        return Ok(());
    }
    let Some(s) = stats(req.qid, &DevOp { dev, op: req.op }) else {
        return Ok(());
    };
    let depth = if depth > 0 { depth as u64 } else { 0 };
    s.depth[depth_slot(depth)] += 1;
    s.depth_sum += depth;
    s.queue_slot = req.qid as u64 + 1;
    Ok(())
}

#[inline(always)]
fn stamp(rq: *const u8) {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if stamps().insert(rq as u64, now, 0).is_err() {
        count(UNREC_STAMPS_FULL);
    }
}
