//! `block_rq_issue(struct request *rq)`: a request is dispatched to the driver.
//!
//! In-flight counting must stay balanced: a request counted up here must be counted down at
//! completion (or requeue), and one that was not must not be. Requests already in flight when
//! the agent starts would otherwise be counted down only, for good on a device that is never
//! idle. So each probe decides from the request alone:
//!
//! - where the kernel stamps the dispatch, the request counts if its own `start_time_ns` is
//!   at or after `track_since_ns`, which user space sets to a moment after every probe is
//!   attached: such a request is seen by every probe;
//! - elsewhere, it counts if this probe stamped it in `BLOCK_STAMPS`, and the completion
//!   finds (and removes) that stamp.

use agent_common::block::{DevOp, UNREC_QUEUE_ID, UNREC_STAMPS_FULL};
use agent_common::hist::depth_slot;
use aya_ebpf::helpers::bpf_ktime_get_ns;
use aya_ebpf::programs::BtfTracePointContext;

use super::{Request, control, count, inflight_enter, ready, stamps, stats};

pub fn try_issue(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready() {
        return Ok(());
    }
    let Some(ctl) = control() else {
        return Ok(());
    };
    if ctl.track_since_ns == 0 {
        return Ok(());
    }
    let req = Request::read(ctx.arg(0));
    let counted = if ctl.probe_stamps == 0 && req.start_ns != 0 && req.kernel_stamps_dispatch() {
        req.start_ns >= ctl.track_since_ns
    } else {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        if stamps().insert(req.key(), now, 0).is_err() {
            count(UNREC_STAMPS_FULL);
            return Ok(());
        }
        true
    };
    if !counted {
        return Ok(());
    }
    let Some(slot) = req.queue_slot() else {
        count(UNREC_QUEUE_ID);
        return Ok(());
    };
    let dev = req.dev();
    let depth = inflight_enter(slot);
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
