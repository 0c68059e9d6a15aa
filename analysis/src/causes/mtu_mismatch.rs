//! `mtu_mismatch`: MTUs that differ on the path to a peer, seen in length drops and errors,
//! or segments larger than an MTU on the path that are lost where nothing counts them
//! (a bridge or switch port), seen in the retransmits toward the peer.

use super::network::{net_candidate, net_signals};
use super::network_congestion::overflowed;
use super::score::{association, counter_anomaly, findings, judge_signals, score, weigh};
use crate::context::Context;
use crate::mtu;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::signals::{DropClass, Signal, SignalKind, drop_class};

fn is_length(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(
        s.kind,
        InterfaceRxDrops | InterfaceTxDrops | InterfaceRxErrors | InterfaceTxErrors
    ) || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Length)
}

pub(super) fn mtu_mismatch(cx: &Context, peer: Option<&str>) -> Candidate {
    let mismatch = mtu::mismatch(cx.run, cx.subject, peer, cx.t);
    let oversized = peer.and_then(|p| mtu::oversized(cx.run, cx.subject, p));
    let sigs = net_signals(cx, peer);
    let retransmits = sigs
        .iter()
        .filter(|&&i| cx.signals[i].kind == SignalKind::Retransmits);
    let congested = overflowed(cx, &sigs);
    let picks = weigh(cx, &sigs, is_length, |s| s.kind == SignalKind::Retransmits);
    let mut c = net_candidate(cx, Cause::MtuMismatch, peer);
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        let length_rose = risen.iter().any(|&i| is_length(&cx.signals[i]));
        // Oversized segments lost uncounted: retransmits rose, and no queue overflowed.
        let lost_uncounted =
            oversized.is_some() && retransmits.clone().any(|&i| cx.scores[i].rose) && !congested;
        c.requirement_met = mismatch.is_some() && (length_rose || lost_uncounted);
        c.association = assoc;
        c.findings = findings(cx, &risen, 3);
    } else {
        let counts = |s: &Signal| {
            is_length(s) || (oversized.is_some() && !congested && s.kind == SignalKind::Retransmits)
        };
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| counts(&cx.signals[*i]) && mismatch.is_some())
            .map(|&(i, _)| (i, counter_anomaly(cx, i)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.findings.insert(
        0,
        mismatch.unwrap_or_else(|| prose::NO_MTU_DIFFERENCE.into()),
    );
    if let Some(o) = oversized {
        c.findings.insert(1, o);
    }
    c.score = score(cx, &c);
    c
}
