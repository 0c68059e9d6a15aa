//! Block path: per (device, op) completion counters from `block_rq_complete`.

use agent_common::block::{
    BlockLayout, DevOp, IoCount, MAX_DEV_OPS, OP_DISCARD, OP_FLUSH, OP_OTHER, OP_READ, OP_WRITE,
};
use agent_common::stats::MAP_BLOCK_COMPLETIONS;
use aya_ebpf::{macros::map, maps::PerCpuHashMap, programs::BtfTracePointContext};

use crate::{read, stats};

/// Filled by user space from kernel BTF before load.
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: BlockLayout = BlockLayout {
    rq_q: 0,
    rq_cmd_flags: 0,
    rq_data_len: 0,
    q_disk: 0,
    disk_part0: 0,
    bdev_dev: 0,
    op_mask: 0,
    req_op_read: 0,
    req_op_write: 0,
    req_op_flush: 0,
    req_op_discard: 0,
    ready: 0,
};

#[map]
static BLOCK_COMPLETIONS: PerCpuHashMap<DevOp, IoCount> =
    PerCpuHashMap::with_max_entries(MAX_DEV_OPS, 0);

#[inline(always)]
fn layout() -> BlockLayout {
    // SAFETY: a read-only global patched at load time; volatile keeps the compiler from
    // folding the zero initializer.
    unsafe { core::ptr::read_volatile(&BLOCK_LAYOUT) }
}

#[inline(always)]
fn op_class(l: &BlockLayout, cmd_flags: u32) -> u32 {
    match cmd_flags & l.op_mask {
        op if op == l.req_op_read => OP_READ,
        op if op == l.req_op_write => OP_WRITE,
        op if op == l.req_op_flush => OP_FLUSH,
        op if op == l.req_op_discard => OP_DISCARD,
        _ => OP_OTHER,
    }
}

/// `block_rq_complete(struct request *rq, blk_status_t error, unsigned int nr_bytes)`.
pub fn try_rq_complete(ctx: &BtfTracePointContext) -> Result<(), i32> {
    let l = layout();
    if l.ready == 0 {
        return Ok(());
    }
    let rq: *const u8 = ctx.arg(0);
    let nr_bytes: u32 = ctx.arg(2);
    let cmd_flags: u32 = read::at(rq, l.rq_cmd_flags)?;
    let q = read::ptr(rq, l.rq_q)?;
    let disk = read::ptr(q, l.q_disk)?;
    let part0 = read::ptr(disk, l.disk_part0)?;
    let dev: u32 = read::at(part0, l.bdev_dev)?;
    let key = DevOp {
        dev,
        op: op_class(&l, cmd_flags),
    };
    match BLOCK_COMPLETIONS.get_ptr_mut(key) {
        // SAFETY: per-CPU value, only this CPU writes it.
        Some(v) => unsafe {
            (*v).ios += 1;
            (*v).bytes += nr_bytes as u64;
        },
        None => {
            let v = IoCount {
                ios: 1,
                bytes: nr_bytes as u64,
            };
            if BLOCK_COMPLETIONS.insert(key, v, 0).is_err() {
                stats::map_update_failed(MAP_BLOCK_COMPLETIONS);
            }
        }
    }
    Ok(())
}
