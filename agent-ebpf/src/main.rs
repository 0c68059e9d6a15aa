//! stornet's kernel side. Thin entry points; each calls a `try_` body in its module.
//! Every program's name starts with `stornet_`, so `bpftool prog` (which shows the first 15
//! characters) tells stornet's programs apart from any other.
#![no_std]
#![no_main]
// Atomic read-modify-write: the BPF target has no `fetch_add` on atomics.
#![feature(core_intrinsics)]
// Field loads with their offset in the instruction (`read::Marked`).
#![feature(asm_experimental_arch)]
#![allow(
    internal_features,
    reason = "core_intrinsics is the one way to an atomic add on the BPF target"
)]

mod block;
mod net;
mod read;
mod ready;

use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};

#[btf_tracepoint(function = "block_rq_issue")]
pub fn stornet_block_rq_issue(ctx: BtfTracePointContext) -> i32 {
    let _ = block::issue::try_issue(&ctx);
    0
}

#[btf_tracepoint(function = "block_rq_complete")]
pub fn stornet_block_rq_complete(ctx: BtfTracePointContext) -> i32 {
    let _ = block::complete::try_complete(&ctx);
    0
}

#[btf_tracepoint(function = "block_rq_requeue")]
pub fn stornet_block_rq_requeue(ctx: BtfTracePointContext) -> i32 {
    let _ = block::requeue::try_requeue(&ctx);
    0
}

#[btf_tracepoint(function = "block_getrq")]
pub fn stornet_block_getrq(ctx: BtfTracePointContext) -> i32 {
    let _ = block::issuer::try_getrq::<0>(&ctx);
    0
}

/// `block_getrq(q, bio, rw)` before 5.11: the agent loads this one there instead.
#[btf_tracepoint(function = "block_getrq")]
pub fn stornet_block_getrq_q(ctx: BtfTracePointContext) -> i32 {
    let _ = block::issuer::try_getrq::<1>(&ctx);
    0
}

#[btf_tracepoint(function = "block_bio_queue")]
pub fn stornet_block_bio_queue(ctx: BtfTracePointContext) -> i32 {
    let _ = block::bio::try_queue::<0>(&ctx);
    0
}

/// `block_bio_queue(q, bio)` before 5.11: the agent loads this one there instead.
#[btf_tracepoint(function = "block_bio_queue")]
pub fn stornet_block_bio_queue_q(ctx: BtfTracePointContext) -> i32 {
    let _ = block::bio::try_queue::<1>(&ctx);
    0
}

#[btf_tracepoint(function = "block_bio_complete")]
pub fn stornet_block_bio_complete(ctx: BtfTracePointContext) -> i32 {
    let _ = block::bio::try_complete(&ctx);
    0
}

/// Empty programs on the hooks the block probes use: what any BPF program on these hooks
/// costs, the floor against which `cargo xtask bench block-overhead` measures the probes'
/// own work. The agent never loads them.
#[btf_tracepoint(function = "block_rq_issue")]
pub fn stornet_floor_block_rq_issue(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "block_rq_complete")]
pub fn stornet_floor_block_rq_complete(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// The empty program plus the one clock reading a service time needs: what the cheapest
/// probe that times IO costs on the completion hook, the reference of the bench's target
/// for the completion probe's own work. The agent never loads it.
#[btf_tracepoint(function = "block_rq_complete")]
pub fn stornet_clock_block_rq_complete(_ctx: BtfTracePointContext) -> i32 {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    // Used, so that the call stays (it does anyway: helpers are opaque calls).
    (now >> 63) as i32
}

#[btf_tracepoint(function = "tcp_retransmit_skb")]
pub fn stornet_tcp_retransmit_skb(ctx: BtfTracePointContext) -> i32 {
    let _ = net::retransmits::try_retransmit(&ctx);
    0
}

#[btf_tracepoint(function = "tcp_retransmit_synack")]
pub fn stornet_tcp_retransmit_synack(ctx: BtfTracePointContext) -> i32 {
    let _ = net::retransmits::try_retransmit_synack(&ctx);
    0
}

#[btf_tracepoint(function = "kfree_skb")]
pub fn stornet_kfree_skb(ctx: BtfTracePointContext) -> i32 {
    let _ = net::drops::try_kfree_skb(&ctx);
    0
}

#[btf_tracepoint(function = "sock_exceed_buf_limit")]
pub fn stornet_sock_exceed_buf_limit(ctx: BtfTracePointContext) -> i32 {
    let _ = net::pressure::try_exceed_buf_limit(&ctx);
    0
}

#[btf_tracepoint(function = "sock_rcvqueue_full")]
pub fn stornet_sock_rcvqueue_full(ctx: BtfTracePointContext) -> i32 {
    let _ = net::pressure::try_rcvqueue_full(&ctx);
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
