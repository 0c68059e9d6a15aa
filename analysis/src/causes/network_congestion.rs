//! `network_congestion`: congestion on the path to a peer (qdisc drops and backlog,
//! congestion drops), seen in retransmits and the round trip.

use super::network::{net_location, net_replica, net_share, net_signals};
use super::score::{
    association, candidate, counter_anomaly, findings, judge_signals, magnitude, score, weigh,
};
use crate::context::Context;
use crate::report::{Candidate, Cause};
use crate::signals::{DropClass, Signal, SignalKind, drop_class};

pub(super) fn is_congestion(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(s.kind, QdiscDrops | QdiscBacklog | QdiscOverlimits)
        || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Congestion)
}

/// `explained`: an MTU mismatch, counted loss or a starved CPU accounts for retransmits and round trips,
/// so only congestion's own signals (drops, backlog) count.
pub(super) fn network_congestion(cx: &Context, peer: Option<&str>, explained: bool) -> Candidate {
    let sigs = net_signals(cx, peer);
    let picks = weigh(cx, &sigs, is_congestion, |s| {
        matches!(s.kind, SignalKind::Retransmits | SignalKind::Srtt)
    });
    let mut c = candidate(
        Cause::NetworkCongestion,
        net_location(cx, peer),
        net_share(cx, peer),
    );
    c.replica = net_replica(cx, peer);
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        c.requirement_met = risen
            .iter()
            .any(|&i| is_congestion(&cx.signals[i]) || !explained);
        c.association = assoc;
        c.findings = findings(cx, &risen, 4);
    } else {
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| is_congestion(&cx.signals[*i]) || !explained)
            .filter_map(|&(i, _)| Some((i, congestion_anomaly(cx, i)?)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.score = score(cx, &c);
    c
}

/// Whole-run anomaly strength of a congestion signal (retransmits, drops, backlog).
pub(super) fn congestion_anomaly(cx: &Context, i: usize) -> Option<f64> {
    match cx.signals[i].kind {
        SignalKind::QdiscBacklog => Some(magnitude(cx.scores[i].run?, cx.t.backlog_bytes)),
        SignalKind::Retransmits | SignalKind::QdiscDrops | SignalKind::SkbDrops => {
            Some(counter_anomaly(cx, i))
        }
        _ => None,
    }
}
