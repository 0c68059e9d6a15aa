//! Socket buffer pressure: a socket over its memory limits (`sock_exceed_buf_limit`) and a
//! full receive queue (`sock_rcvqueue_full`).

use agent_common::net::{
    COUNTER_EXCEED_OTHER, COUNTER_EXCEED_RECV, COUNTER_EXCEED_SEND, COUNTER_RCVQUEUE_FULL,
    EXCEED_KIND_ARG, SK_MEM_RECV, SK_MEM_SEND,
};
use aya_ebpf::programs::BtfTracePointContext;

use super::count;
use crate::ready::ready;
use agent_common::ready as probe;

/// `sock_exceed_buf_limit(sk, prot, allocated, kind)`.
pub fn try_exceed_buf_limit(ctx: &BtfTracePointContext) -> Result<(), i32> {
    if !ready(probe::SOCK_EXCEED_BUF_LIMIT) {
        return Ok(());
    }
    let slot = match ctx.arg::<u64>(EXCEED_KIND_ARG) as u32 {
        SK_MEM_SEND => COUNTER_EXCEED_SEND,
        SK_MEM_RECV => COUNTER_EXCEED_RECV,
        _ => COUNTER_EXCEED_OTHER,
    };
    count(slot, 1);
    Ok(())
}

/// `sock_rcvqueue_full(sk, skb)`.
pub fn try_rcvqueue_full(_ctx: &BtfTracePointContext) -> Result<(), i32> {
    if ready(probe::SOCK_RCVQUEUE_FULL) {
        count(COUNTER_RCVQUEUE_FULL, 1);
    }
    Ok(())
}
