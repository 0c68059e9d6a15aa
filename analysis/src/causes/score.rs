//! The scoring framework every cause uses: signal weights, the association of a cause's
//! signals with the latency, anomaly strength over a whole run, findings and the score.

use crate::context::Context;
use crate::prose::{describe_raised, describe_run};
use crate::report::{Candidate, Cause};
use crate::signals::{Signal, SignalKind};
use crate::thresholds::Thresholds;

/// Signal weights: a cause's own signals count fully, shared ones (retransmits, RTT) less.
pub(super) const SPECIFIC: f64 = 1.0;
const SHARED: f64 = 0.7;
/// A signal that did not rise in the raised intervals counts half.
const NOT_RISEN: f64 = 0.5;
/// Evidence of one kind only (share or signals) counts this much.
const SINGLE_EVIDENCE: f64 = 0.8;

/// Combines the share of latency with the signal evidence; unmet requirement scales down.
fn combine(share: Option<f64>, assoc: Option<f64>, met: bool, t: &Thresholds) -> f64 {
    let s = match (share, assoc) {
        (Some(s), Some(a)) => 0.5 * s + 0.5 * a,
        (Some(x), None) | (None, Some(x)) => SINGLE_EVIDENCE * x,
        (None, None) => 0.0,
    };
    (if met { s } else { t.unconfirmed_factor * s }).clamp(0.0, 1.0)
}

/// 0 below the threshold, 0.5 at it, 1 at a hundred times it (log scale).
pub(super) fn magnitude(value: f64, threshold: f64) -> f64 {
    if !(value >= threshold && threshold > 0.0) {
        return 0.0;
    }
    (0.5 + 0.25 * (value / threshold).log10()).min(1.0)
}

/// Best weighted correlation among signals, and the risen ones in order of strength.
pub(super) fn association(cx: &Context, picks: &[(usize, f64)]) -> (Option<f64>, Vec<usize>) {
    let mut best: Option<f64> = None;
    let mut risen: Vec<(usize, f64)> = Vec::new();
    for &(i, w) in picks {
        let sc = &cx.scores[i];
        let Some(rho) = sc.rho else { continue };
        let v = w * rho.max(0.0) * if sc.rose { 1.0 } else { NOT_RISEN } * explains(cx, i);
        best = Some(best.map_or(v, |b: f64| b.max(v)));
        if sc.rose {
            risen.push((i, v));
        }
    }
    risen.sort_by(|a, b| b.1.total_cmp(&a.1));
    (best, risen.into_iter().map(|r| r.0).collect())
}

/// How much of the latency's rise signal `i` can account for, from 0 to 1: a round trip's
/// rise in proportion to the p99's (`rtt_rise_share`); every other signal fully.
fn explains(cx: &Context, i: usize) -> f64 {
    if cx.signals[i].kind != SignalKind::Srtt {
        return 1.0;
    }
    rtt_rise_share(cx, i).map_or(1.0, |s| (s / cx.t.rtt_rise_share).min(1.0))
}

/// A round trip's rise in the raised intervals as a share of the p99's rise (unknown
/// without both).
pub(super) fn rtt_rise_share(cx: &Context, i: usize) -> Option<f64> {
    let sc = &cx.scores[i];
    match (sc.raised, sc.others, cx.rise_seconds) {
        (Some(r), Some(o), Some(rise)) if rise > 0.0 => Some((r - o).max(0.0) / rise),
        _ => None,
    }
}

/// Sentences for the given signals (strongest first), one per kind, in the order of
/// [`SignalKind`] (a `qdisc_*` drop reason counts as the qdisc's drops): in the raised
/// intervals against the others, or over the whole run.
pub(super) fn findings(cx: &Context, ordered: &[usize], max: usize) -> Vec<String> {
    sentences(
        cx,
        ordered,
        max,
        if cx.raised() {
            describe_raised
        } else {
            describe_run
        },
    )
}

/// As [`findings`], but as over the whole run (counts and rates) whatever the mode: for a
/// cause present all run long.
pub(super) fn run_findings(cx: &Context, ordered: &[usize], max: usize) -> Vec<String> {
    sentences(cx, ordered, max, describe_run)
}

fn sentences(
    cx: &Context,
    ordered: &[usize],
    max: usize,
    describe: fn(&Context, usize) -> String,
) -> Vec<String> {
    let kind = |i: usize| {
        let s = &cx.signals[i];
        if s.kind == SignalKind::SkbDrops && s.key.starts_with("qdisc_") {
            SignalKind::QdiscDrops
        } else {
            s.kind
        }
    };
    let mut ordered = ordered.to_vec();
    ordered.sort_by_key(|&i| kind(i));
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for i in ordered {
        if out.len() < max && !seen.contains(&kind(i)) {
            seen.push(kind(i));
            out.push(describe(cx, i));
        }
    }
    out
}

/// The signals among `sigs` that speak for a cause, weighted: those only it explains
/// (`specific`) count fully, those other causes share (`shared`) count less.
pub(super) fn weigh(
    cx: &Context,
    sigs: &[usize],
    specific: impl Fn(&Signal) -> bool,
    shared: impl Fn(&Signal) -> bool,
) -> Vec<(usize, f64)> {
    sigs.iter()
        .filter_map(|&i| {
            let s = &cx.signals[i];
            if specific(s) {
                Some((i, SPECIFIC))
            } else if shared(s) {
                Some((i, SHARED))
            } else {
                None
            }
        })
        .collect()
}

/// Anomaly strength of a counter over the whole run: enough events, at a high enough rate,
/// and enough of what they are a share of: retransmits of the segments sent to the peer
/// when the agent counted them, else events per IO (when IOPS are known); the strength
/// grows with that share. Per segment, because a few retransmits a busy host's stalls
/// cause are many per IO of large writes (23 in 801 writes of 64 KiB: 0.03 per IO, yet
/// 0.06% of the segments) while a buffer that drops bursts resends whole percents.
pub(super) fn counter_anomaly(cx: &Context, i: usize) -> f64 {
    let t = cx.t;
    let total = cx.scores[i].run.unwrap_or(0.0);
    let secs = cx.seconds_with_data(i);
    if total < t.anomaly_min_events || secs <= 0.0 || total / secs < t.anomaly_events_per_second {
        return 0.0;
    }
    if let Some(sent) = cx.segments_sent(i) {
        return magnitude(total / sent, t.retransmits_per_segment);
    }
    match cx.ios() {
        Some(ios) => magnitude(total / ios, t.events_per_io),
        None => magnitude(total / secs, t.anomaly_events_per_second),
    }
}

/// Whole-run judgement from anomalous signals (index, strength): the strongest is the
/// association.
pub(super) fn judge_signals(cx: &Context, c: &mut Candidate, anomalies: &[(usize, f64)]) {
    let mut found: Vec<(usize, f64)> = anomalies.iter().copied().filter(|a| a.1 > 0.0).collect();
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    let strength = found.first().map_or(0.0, |a| a.1);
    let order: Vec<usize> = found.iter().map(|a| a.0).collect();
    let sentences = findings(cx, &order, 3);
    judge(cx, c, strength, sentences);
}

/// Whole-run judgement: an anomaly of this strength, in a part holding at least
/// `min_share` of the latency (when the breakdown is known).
pub(super) fn judge(cx: &Context, c: &mut Candidate, strength: f64, findings: Vec<String>) {
    c.association = (strength > 0.0).then_some(strength);
    c.requirement_met = strength > 0.0 && c.share.is_none_or(|s| s >= cx.t.min_share);
    c.findings.extend(findings);
}

/// Raised intervals: evidence combined, unconfirmed candidates scaled down. Whole run:
/// only an anomaly makes a candidate.
pub(super) fn score(cx: &Context, c: &Candidate) -> f64 {
    if cx.raised() || c.requirement_met {
        combine(c.share, c.association, c.requirement_met, cx.t)
    } else {
        0.0
    }
}

pub(super) fn candidate(cause: Cause, location: String, share: Option<f64>) -> Candidate {
    Candidate {
        cause,
        location,
        replica: None,
        score: 0.0,
        share,
        association: None,
        requirement_met: false,
        findings: Vec::new(),
    }
}
