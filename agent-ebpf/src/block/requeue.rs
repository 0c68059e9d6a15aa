//! `block_rq_requeue(struct request *rq)`: a request goes back to the block layer, to be
//! dispatched again later (the driver was busy, or asked for it).

use agent_common::block::DevOp;
use aya_ebpf::programs::BtfTracePointContext;

use super::{Request, control, inflight_add, kernel_path, ready, stamps, stats};

pub fn try_requeue(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready() {
        return Ok(());
    }
    let req = Request::read(ctx.arg(0));
    let ctl = control().ok_or(-1)?;
    // Only a dispatched request was counted in flight; it is counted again at its next
    // dispatch.
    if req.started {
        let counted = if kernel_path(ctl, &req, req.io_start_ns()) {
            ctl.track_since_ns != 0 && req.start_ns >= ctl.track_since_ns
        } else {
            stamps().remove(req.key()).is_ok()
        };
        if counted && let Some(slot) = req.queue_slot() {
            inflight_add(slot, -1);
        }
    }
    let dev = req.dev();
    if dev != 0
        && let Some(s) = stats(req.qid, &DevOp { dev, op: req.op })
    {
        s.requeues += 1;
    }
    Ok(())
}
