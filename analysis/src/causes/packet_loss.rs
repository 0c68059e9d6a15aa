//! `packet_loss`: packets lost on the path to a peer with no full queue behind the loss (a
//! bad cable, optic or NIC, a filter), seen in drops the kernel counts for such a reason
//! (interface errors; checksum and filter drops) and the retransmits they cause. Loss that
//! no host counts (inside a switch) cannot be told from congestion, and stays
//! `network_congestion`.

use super::network::{net_candidate, net_signals};
use super::network_congestion::overflowed;
use super::score::{
    association, counter_anomaly, findings, judge_signals, run_findings, score, weigh,
};
use crate::context::Context;
use crate::report::{Candidate, Cause};
use crate::signals::{DropClass, Signal, SignalKind, drop_class};

fn is_loss(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(s.kind, InterfaceRxErrors | InterfaceTxErrors)
        || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Loss)
}

/// `mtu_met`: an MTU mismatch on this path accounts for its errors and drops.
pub(super) fn packet_loss(cx: &Context, peer: Option<&str>, mtu_met: bool) -> Candidate {
    let sigs = net_signals(cx, peer);
    let picks = weigh(cx, &sigs, is_loss, |s| s.kind == SignalKind::Retransmits);
    let mut c = net_candidate(cx, Cause::PacketLoss, peer);
    let congested = overflowed(cx, &sigs);
    // Loss on this path shows in retransmits toward its peer: drops counted host-wide
    // alone do not say which path lost them.
    let retransmits = || {
        sigs.iter()
            .filter(|&&i| cx.signals[i].kind == SignalKind::Retransmits)
    };
    // Loss present all run long (anomalous over the run) also explains the raised
    // intervals: its rate need not rise for the retransmits it causes to time out now and
    // then.
    let steady = |i: usize| counter_anomaly(cx, i) > 0.0;
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        let lost = risen.iter().any(|&i| is_loss(&cx.signals[i]))
            || picks
                .iter()
                .any(|&(i, _)| is_loss(&cx.signals[i]) && steady(i));
        let resent = peer.is_none() || retransmits().any(|&i| cx.scores[i].rose || steady(i));
        c.requirement_met = lost && resent && !congested && !mtu_met;
        c.association = assoc;
        c.findings = findings(cx, &risen, 3);
        if c.findings.is_empty() {
            // Steady loss: its run-long counts are the evidence.
            let order: Vec<usize> = picks.iter().map(|p| p.0).filter(|&i| steady(i)).collect();
            c.findings = run_findings(cx, &order, 3);
        }
    } else {
        let resent = peer.is_none() || retransmits().any(|&i| steady(i));
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| is_loss(&cx.signals[*i]) && resent && !congested && !mtu_met)
            .map(|&(i, _)| (i, counter_anomaly(cx, i)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.score = score(cx, &c);
    c
}
