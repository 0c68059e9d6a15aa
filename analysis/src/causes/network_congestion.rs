//! `network_congestion`: congestion on the path to a peer (qdisc drops and backlog,
//! congestion drops), seen in retransmits and the round trip.

use super::network::{net_candidate, net_signals};
use super::score::{
    association, counter_anomaly, findings, judge_signals, magnitude, rtt_rise_share, run_findings,
    score, weigh,
};
use crate::context::Context;
use crate::report::{Candidate, Cause};
use crate::series::mean_over;
use crate::signals::{DropClass, Signal, SignalKind, drop_class};

pub(super) fn is_congestion(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(s.kind, QdiscDrops | QdiscBacklog | QdiscOverlimits)
        || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Congestion)
}

/// `explained`: an MTU mismatch, counted loss, a starved CPU or needless retransmits (the
/// receiver already had the data) account for retransmits and round trips, so only
/// congestion's own signals (a queue that overflowed or stood) count. `saturated`: the path
/// runs at its rate ([`super::network_saturation`]), which accounts for a longer round trip
/// but not for retransmits, and a queue that stands without dropping is what a path at its
/// rate has.
pub(super) fn network_congestion(
    cx: &Context,
    peer: Option<&str>,
    explained: bool,
    saturated: bool,
) -> Candidate {
    let sigs = net_signals(cx, peer);
    let picks = weigh(cx, &sigs, is_congestion, |s| {
        matches!(s.kind, SignalKind::Retransmits | SignalKind::Srtt)
    });
    let mut c = net_candidate(cx, Cause::NetworkCongestion, peer);
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        // A queue that overflowed or stood, or the peer's retransmits or RTT unless
        // something else explains them (a path at its rate lengthens the RTT). A short
        // queue alone (behind a burst of retransmits, on a shaper's port) is not
        // congestion, nor an RTT that rose by a sliver of the latency's rise (every path's
        // RTT grows a little on a busy host).
        let resent = risen.iter().any(|&i| match cx.signals[i].kind {
            SignalKind::Retransmits => true,
            SignalKind::Srtt => {
                !saturated && rtt_rise_share(cx, i).is_none_or(|s| s >= cx.t.min_rtt_rise_share)
            }
            _ => false,
        });
        let queues: Vec<usize> = overflowing(cx, &sigs)
            .filter(|&i| !(saturated && standing(cx, i)))
            .collect();
        c.requirement_met = !queues.is_empty() || (!explained && resent);
        c.findings = findings(cx, &risen, 4);
        // A queue that overflowed all run long does not rise with the intervals it raises:
        // it is weighed as over a whole run, its run-long counts the evidence.
        let mut run_long: Vec<(usize, f64)> = queues
            .into_iter()
            .filter(|i| !risen.contains(i))
            .filter_map(|i| Some((i, run_long_anomaly(cx, i)?)))
            .collect();
        run_long.sort_by(|a, b| b.1.total_cmp(&a.1));
        c.association = run_long.iter().map(|s| s.1).chain(assoc).reduce(f64::max);
        let order: Vec<usize> = run_long.iter().map(|s| s.0).collect();
        c.findings.extend(run_findings(cx, &order, 2));
    } else {
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| is_congestion(&cx.signals[*i]) || !explained)
            .filter(|(i, _)| !(saturated && standing(cx, *i)))
            .filter_map(|&(i, _)| Some((i, congestion_anomaly(cx, i)?)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.score = score(cx, &c);
    c
}

/// A qdisc's backlog: a queue that stood, which a saturated path has without any drop.
fn standing(cx: &Context, i: usize) -> bool {
    cx.signals[i].kind == SignalKind::QdiscBacklog
}

/// Whole-run anomaly strength of a congestion signal (retransmits, drops, backlog).
fn congestion_anomaly(cx: &Context, i: usize) -> Option<f64> {
    match cx.signals[i].kind {
        SignalKind::QdiscBacklog => Some(magnitude(cx.scores[i].run?, cx.t.backlog_bytes)),
        SignalKind::Retransmits | SignalKind::QdiscDrops | SignalKind::SkbDrops => {
            Some(counter_anomaly(cx, i))
        }
        _ => None,
    }
}

/// Whether the path's signals `sigs` show a queue that overflowed or stood: drops for a full
/// queue, or a backlog of at least `backlog_bytes`, as anomalies over the whole run or (raised)
/// among the signals that rose, at their level in the raised intervals. A queue that
/// overflows all run long explains raised intervals too: its drops need not rise for the
/// retransmits they cause to time out now and then. A short queue that forms behind a burst
/// of retransmits is not one, nor are a shaper's overlimits.
pub(super) fn overflowed(cx: &Context, sigs: &[usize]) -> bool {
    overflowing(cx, sigs).next().is_some()
}

/// The signals among `sigs` that show a queue that overflowed or stood ([`overflowed`]).
fn overflowing<'a>(cx: &'a Context, sigs: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
    sigs.iter().copied().filter(|&i| {
        let s = &cx.signals[i];
        let sc = &cx.scores[i];
        if !is_congestion(s) || s.kind == SignalKind::QdiscOverlimits {
            return false;
        }
        let rose = cx.raised()
            && sc.rose
            && (s.kind != SignalKind::QdiscBacklog
                || (sc.raised.is_some_and(|b| b >= cx.t.backlog_bytes) && holds_long(cx, i)));
        rose || run_long_anomaly(cx, i).is_some()
    })
}

/// Whether backlog signal `i` in the raised intervals holds a packet long enough to matter:
/// at its qdisc's rate (or, for one that does not shape, the bytes it let out), at least
/// `min_rtt_rise_share` of the latency's rise. 78 KiB queued at 200 Mbit/s is 3 ms, which
/// does not explain writes that became 100 ms slower; a rate that is not known does not
/// rule it out.
fn holds_long(cx: &Context, i: usize) -> bool {
    let (s, sc) = (&cx.signals[i], &cx.scores[i]);
    let idx = cx.intervals();
    let qdisc = cx.run.host(&s.host).and_then(|h| {
        h.qdiscs
            .iter()
            .find(|q| format!("{} {}", q.interface, q.qdisc) == s.key)
    });
    let rate = qdisc.and_then(|q| {
        mean_over(&q.rate_bytes_per_second, &idx)
            .or_else(|| mean_over(&q.sent_bytes, &idx).map(|b| b / cx.run.interval_seconds))
    });
    match (sc.raised, rate, cx.rise_seconds) {
        (Some(bytes), Some(rate), Some(rise)) if rate > 0.0 && rise > 0.0 => {
            bytes / rate >= cx.t.min_rtt_rise_share * rise
        }
        _ => true,
    }
}

/// The strength of signal `i` as an anomaly over the whole run, when it is one.
fn run_long_anomaly(cx: &Context, i: usize) -> Option<f64> {
    congestion_anomaly(cx, i).filter(|&a| a > 0.0)
}
