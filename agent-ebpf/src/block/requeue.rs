//! `block_rq_requeue(struct request *rq)`: a request goes back to the block layer, to be
//! dispatched again later (the driver was busy, or asked for it).

use agent_common::block::DevOp;
use aya_ebpf::programs::BtfTracePointContext;

use super::{Request, control, leave_request, stamps, stats};
use crate::ready::ready;
use agent_common::ready as probe;

pub fn try_requeue(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::BLOCK_REQUEUE) {
        return Ok(());
    }
    let req = Request::read(ctx.arg(0));
    // Counted out until it is dispatched again. (Where the driver tag is already released,
    // the mark stays set and the tag's next request is counted in its place.)
    if control().track_inflight != 0 {
        leave_request(&req);
    }
    let _ = stamps().remove(req.key());
    let dev = req.dev();
    if dev != 0
        && let Some(s) = stats(req.qid, &DevOp { dev, op: req.op })
    {
        s.requeues += 1;
    }
    Ok(())
}
