//! stornet's kernel side. Thin entry points; each calls a `try_` body in its module.
#![no_std]
#![no_main]
// Atomic read-modify-write: the BPF target has no `fetch_add` on atomics.
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod block;
#[allow(dead_code)] // bpf_probe_read_kernel helpers, for probes without typed pointers
mod read;

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};

#[btf_tracepoint(function = "block_rq_issue")]
pub fn block_rq_issue(ctx: BtfTracePointContext) -> i32 {
    let _ = block::issue::try_issue(&ctx);
    0
}

#[btf_tracepoint(function = "block_rq_complete")]
pub fn block_rq_complete(ctx: BtfTracePointContext) -> i32 {
    let _ = block::complete::try_complete(&ctx);
    0
}

#[btf_tracepoint(function = "block_rq_requeue")]
pub fn block_rq_requeue(ctx: BtfTracePointContext) -> i32 {
    let _ = block::requeue::try_requeue(&ctx);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
