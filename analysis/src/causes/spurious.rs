//! Retransmits the receiver found needless: it drops a segment whose data it already has
//! (drop reason `tcp_old_data`, or `tcp_old_sequence` when all of it precedes what it last
//! acknowledged), so the original arrived and only its acknowledgement came
//! late (a busy host, a delayed ACK). Such retransmits are no evidence of loss or of a
//! queue: in a healthy lab run, 48 retransmits toward two replicas came with 50 such drops,
//! and read as congestion before.

use crate::context::Context;
use crate::model::Host;
use crate::series::at;

/// The drop reasons of a segment whose data had all been received before: `tcp_old_data`
/// past what the receiver last acknowledged, `tcp_old_sequence` (kernels from 6.0) before it.
const ALREADY_RECEIVED: [&str; 2] = ["tcp_old_data", "tcp_old_sequence"];

/// Whether most retransmits toward `peer` in the analysed intervals were needless: the
/// drops of already received data on the analysed host and on the peer's host (drop reasons do not
/// say which connection; the receiver of a retransmit toward the peer is the peer's host,
/// and a host's agent may watch its neighbours' namespaces) reach half of them.
pub(super) fn mostly_spurious(cx: &Context, peer: Option<&str>) -> bool {
    let Some(peer) = peer else { return false };
    let idx = cx.intervals();
    let sum = |s: &crate::model::Series| idx.iter().filter_map(|&i| at(s, i)).sum::<f64>();
    let Some(resent) = cx.subject.peers.get(peer).map(|p| sum(&p.retransmits)) else {
        return false;
    };
    let mut hosts: Vec<&Host> = vec![cx.subject];
    if let Some(h) = cx.run.host_with_address(peer)
        && h.name != cx.subject.name
    {
        hosts.push(h);
    }
    let old: f64 = hosts
        .iter()
        .flat_map(|h| ALREADY_RECEIVED.iter().filter_map(|r| h.skb_drops.get(*r)))
        .map(sum)
        .sum();
    resent > 0.0 && old >= 0.5 * resent
}
