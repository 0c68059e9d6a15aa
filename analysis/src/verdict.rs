//! Runs the analysis per host and direction and names the cause, with its confidence and
//! evidence.

use serde::{Deserialize, Serialize};

use crate::baseline::{Baseline, baseline, p99_series, raised};
use crate::breakdown::{PartKind, PartShare, Parts};
use crate::causes::{Candidate, Cause, Context, Mode, rank};
use crate::histogram::merged;
use crate::model::{Direction, Host, Latency, Run};
use crate::series::{all, at, mean_over, median};
use crate::signals::{SignalKind, SignalScore, collect, score};
use crate::text::{count, level, part_phrase, pct, secs};
use crate::thresholds::Thresholds;

/// How a direction was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Fewer intervals than the analysis needs.
    InsufficientData,
    /// No raised intervals: the run is judged as a whole.
    Steady,
    /// Raised intervals judged against the others.
    Raised,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub cause: Cause,
    /// 0..=1; `confidence_explained` says how it was reached.
    pub confidence: f64,
    pub confidence_explained: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Where the cause acts ("path to replica 198.18.0.2").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectionResult {
    pub direction: Direction,
    pub state: State,
    /// Intervals with a p99 value.
    pub intervals: usize,
    pub baseline: Option<Baseline>,
    pub raised_intervals: Vec<usize>,
    /// p99 of the raised intervals (raised) or of the run (steady), from merged histograms
    /// when recorded, else the median of the intervals' p99.
    pub p99_seconds: Option<f64>,
    pub breakdown: Vec<PartShare>,
    pub candidates: Vec<Candidate>,
    pub signals: Vec<SignalScore>,
    pub cause: Cause,
    pub confidence: f64,
    pub confidence_explained: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostAnalysis {
    pub host: String,
    pub verdict: Verdict,
    pub directions: Vec<DirectionResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    pub hosts: Vec<HostAnalysis>,
}

/// Analyses every host that has read or write latency.
pub fn report(run: &Run, t: &Thresholds) -> Report {
    let hosts: Vec<HostAnalysis> = run
        .hosts
        .iter()
        .filter(|h| h.read.is_some() || h.write.is_some())
        .map(|h| host(run, h, t))
        .collect();
    let chosen = hosts
        .iter()
        .map(|h| &h.verdict)
        .max_by(|a, b| telling((a.cause, a.confidence), (b.cause, b.confidence)));
    let verdict = match chosen {
        None => Verdict {
            cause: Cause::InsufficientData,
            confidence: 0.0,
            confidence_explained: "no verdict: no host in the run has read or write latency".into(),
            host: None,
            direction: None,
            location: None,
            evidence: vec!["no host in the run has read or write latency".into()],
        },
        Some(v) => {
            let mut v = v.clone();
            for other in hosts.iter().filter(|h| Some(&h.host) != v.host.as_ref()) {
                v.evidence.push(format!(
                    "host {}: {} (confidence {:.2})",
                    other.host, other.verdict.cause, other.verdict.confidence
                ));
            }
            v
        }
    };
    Report { verdict, hosts }
}

/// Analyses one host's reads and writes.
pub fn host(run: &Run, h: &Host, t: &Thresholds) -> HostAnalysis {
    let directions: Vec<DirectionResult> = Direction::ALL
        .iter()
        .filter_map(|&d| Some(direction(run, h, d, h.latency(d)?, t)))
        .collect();
    let chosen = directions
        .iter()
        .max_by(|a, b| telling((a.cause, a.confidence), (b.cause, b.confidence)));
    let Some(chosen) = chosen else {
        let none = insufficient(Direction::Write, 0, run.len(), t);
        return HostAnalysis {
            host: h.name.clone(),
            verdict: Verdict {
                cause: none.cause,
                confidence: 0.0,
                confidence_explained: none.confidence_explained,
                host: Some(h.name.clone()),
                direction: None,
                location: None,
                evidence: vec![format!("host {} has no read or write latency", h.name)],
            },
            directions,
        };
    };
    let mut evidence = chosen.evidence.clone();
    for other in directions
        .iter()
        .filter(|d| d.direction != chosen.direction)
    {
        let at = other
            .location
            .as_ref()
            .map_or(String::new(), |l| format!(" at {l}"));
        evidence.push(format!(
            "{}s: {}{at} (confidence {:.2})",
            other.direction, other.cause, other.confidence
        ));
    }
    let verdict = Verdict {
        cause: chosen.cause,
        confidence: chosen.confidence,
        confidence_explained: chosen.confidence_explained.clone(),
        host: Some(h.name.clone()),
        direction: Some(chosen.direction),
        location: chosen.location.clone(),
        evidence,
    };
    HostAnalysis {
        host: h.name.clone(),
        verdict,
        directions,
    }
}

/// Which of two findings tells more: a named cause beats an unexplained rise, which beats
/// healthy, which beats no data; within a class, the higher confidence wins. Directions,
/// hosts and sweep points are all chosen by this one rule.
pub fn telling(a: (Cause, f64), b: (Cause, f64)) -> std::cmp::Ordering {
    let class = |c: Cause| match c {
        c if c.is_root_cause() => 3,
        Cause::Unexplained => 2,
        Cause::None => 1,
        _ => 0,
    };
    class(a.0).cmp(&class(b.0)).then(a.1.total_cmp(&b.1))
}

fn insufficient(d: Direction, present: usize, n: usize, t: &Thresholds) -> DirectionResult {
    let why = format!(
        "only {present} of {n} intervals have a {d} p99; the analysis needs at least {}",
        t.min_intervals
    );
    DirectionResult {
        direction: d,
        state: State::InsufficientData,
        intervals: present,
        baseline: None,
        raised_intervals: Vec::new(),
        p99_seconds: None,
        breakdown: Vec::new(),
        candidates: Vec::new(),
        signals: Vec::new(),
        cause: Cause::InsufficientData,
        confidence: 0.0,
        confidence_explained: format!("no verdict: {why}"),
        location: None,
        evidence: vec![why],
    }
}

fn direction(run: &Run, h: &Host, d: Direction, lat: &Latency, t: &Thresholds) -> DirectionResult {
    let n = run.len();
    let p99 = p99_series(lat, n);
    let present: Vec<usize> = (0..n).filter(|&i| at(&p99, i).is_some()).collect();
    let Some(base) = baseline(&p99, t).filter(|_| present.len() >= t.min_intervals) else {
        return insufficient(d, present.len(), n, t);
    };
    let raised_idx = raised(&p99, &base, lat, t);
    let is_raised = raised_idx.len() >= t.min_raised_intervals;
    let others: Vec<usize> = (0..n).filter(|i| !raised_idx.contains(i)).collect();
    let parts = Parts::build_with(h, d, n, t);
    let signals = collect(run, h, d, &parts);
    let (mode, shares, scores, p99_over) = if is_raised {
        (
            Mode::Raised {
                raised: &raised_idx,
                others: &others,
            },
            parts.rise_shares(&raised_idx, &others),
            score(&signals, &p99, Some(&raised_idx), t),
            raised_idx.clone(),
        )
    } else {
        (
            Mode::Whole,
            parts.mean_shares(&all(n)),
            score(&signals, &p99, None, t),
            present.clone(),
        )
    };
    let cx = Context {
        run,
        subject: h,
        direction: d,
        t,
        parts: &parts,
        shares: &shares,
        signals: &signals,
        scores: &scores,
        mode,
    };
    let candidates = rank(&cx);
    let p99_value = merged(&lat.histograms, &p99_over)
        .filter(|_| {
            p99_over
                .iter()
                .all(|&i| lat.histograms.get(i).is_some_and(Option::is_some))
        })
        .and_then(|m| m.quantile(0.99))
        .or_else(|| {
            median(
                &mut p99_over
                    .iter()
                    .filter_map(|&i| at(&p99, i))
                    .collect::<Vec<_>>(),
            )
        });
    let mut r = DirectionResult {
        direction: d,
        state: if is_raised {
            State::Raised
        } else {
            State::Steady
        },
        intervals: present.len(),
        baseline: Some(base),
        raised_intervals: if is_raised {
            raised_idx.clone()
        } else {
            Vec::new()
        },
        p99_seconds: p99_value,
        breakdown: shares.clone(),
        candidates: Vec::new(),
        signals: Vec::new(),
        cause: Cause::None,
        confidence: 0.0,
        confidence_explained: String::new(),
        location: None,
        evidence: Vec::new(),
    };
    decide(&cx, &mut r, &candidates);
    r.candidates = candidates;
    r.signals = scores.clone();
    r
}

/// Names the cause from the ranked candidates and writes the evidence.
fn decide(cx: &Context, r: &mut DirectionResult, candidates: &[Candidate]) {
    let t = cx.t;
    let top = candidates.first().filter(|c| c.score > 0.0);
    r.evidence.push(headline(cx, r));
    r.evidence.extend(where_it_goes(cx));
    r.evidence.extend(slot_wait(cx));
    match (r.state, top) {
        (State::Raised, Some(c)) if c.score >= t.min_cause_score => named(r, c, candidates),
        (State::Steady, Some(c)) => named(r, c, candidates),
        (State::Raised, _) => {
            r.cause = Cause::Unexplained;
            let best = top.map_or("no candidate could be formed".into(), |c| {
                format!(
                    "the best candidate, {} at {}, scores {:.2}",
                    c.cause, c.location, c.score
                )
            });
            r.confidence_explained = format!(
                "no cause named: {best}, below the {:.2} needed",
                t.min_cause_score
            );
            r.evidence.push(format!(
                "no measured part or signal explains the rise ({best}); CPU, the application or an unmeasured hop remain possible"
            ));
        }
        _ => healthy(cx, r),
    }
}

fn named(r: &mut DirectionResult, c: &Candidate, candidates: &[Candidate]) {
    let runner = candidates
        .iter()
        .find(|o| o.cause != c.cause && o.score > 0.0);
    let second = runner.map_or(0.0, |o| o.score);
    r.cause = c.cause;
    r.location = Some(c.location.clone());
    r.confidence = (c.score - 0.5 * second).clamp(0.0, 1.0);
    let what = if r.state == State::Raised {
        "of the rise"
    } else {
        "of the latency"
    };
    let signal = if r.state == State::Raised {
        "signal correlation"
    } else {
        "anomaly strength"
    };
    let how = match (c.share, c.association) {
        (Some(s), Some(a)) => format!("0.5 × {} {what} there + 0.5 × {signal} {a:.2}", pct(s)),
        (Some(s), None) => format!("0.8 × {} {what} there, no signal to confirm it", pct(s)),
        (None, Some(a)) => format!("0.8 × {signal} {a:.2}, no latency breakdown to place it"),
        (None, None) => "no evidence".into(),
    };
    let unmet = if c.requirement_met {
        ""
    } else {
        "; its defining condition is not met, so it keeps 30%"
    };
    let next = runner.map_or("no other cause scores".into(), |o| {
        format!(
            "the next cause, {} at {}, scores {:.2}",
            o.cause, o.location, o.score
        )
    });
    r.confidence_explained = format!(
        "{} at {} scores {:.2} ({how}{unmet}); {next}; confidence = {:.2} - 0.5 × {second:.2} = {:.2}",
        c.cause, c.location, c.score, c.score, r.confidence
    );
    r.evidence.extend(c.findings.iter().cloned());
    if !c.requirement_met {
        r.evidence.push(format!(
            "not confirmed: none of the signals that define {} was measured or rose",
            c.cause
        ));
    }
}

fn headline(cx: &Context, r: &DirectionResult) -> String {
    let d = cx.direction;
    let p99 = r.p99_seconds.map_or("-".into(), secs);
    let base = r
        .baseline
        .as_ref()
        .map_or("-".into(), |b| secs(b.p99_seconds));
    match r.state {
        State::Raised => format!(
            "p99 {d} latency {p99} against a {base} baseline in {} of {} intervals",
            r.raised_intervals.len(),
            r.intervals
        ),
        _ => format!(
            "p99 {d} latency {p99} over {} intervals, none raised above the run's own baseline: the run is judged as a whole",
            r.intervals
        ),
    }
}

/// Where the latency (rise) goes: the largest part, others after it.
fn where_it_goes(cx: &Context) -> Option<String> {
    let mut top: Vec<&PartShare> = cx
        .shares
        .iter()
        .filter(|s| matches!(s.part, PartKind::LocalDevice | PartKind::Replica))
        .collect();
    top.sort_by(|a, b| b.share.total_cmp(&a.share));
    let amount = |s: &PartShare| match s.baseline_seconds {
        Some(b) => format!("{} -> {}", secs(b), secs(s.seconds)),
        None => secs(s.seconds),
    };
    let describe = |s: &PartShare| {
        format!(
            "{} {} ({})",
            pct(s.share),
            part_phrase(s.part, &s.key),
            amount(s)
        )
    };
    let first = top.first()?;
    let of = if first.baseline_seconds.is_some() {
        "of the rise is"
    } else {
        "of the latency is"
    };
    let mut out = format!(
        "{} {of} {} ({})",
        pct(first.share),
        part_phrase(first.part, &first.key),
        amount(first)
    );
    for s in top.iter().skip(1) {
        out.push_str(&format!("; {}", describe(s)));
    }
    if first.part == PartKind::LocalDevice {
        let mut sub: Vec<&PartShare> = cx
            .shares
            .iter()
            .filter(|s| {
                matches!(
                    s.part,
                    PartKind::Queue | PartKind::Service | PartKind::AboveBlock
                )
            })
            .collect();
        sub.sort_by(|a, b| b.share.total_cmp(&a.share));
        if let Some(s) = sub.first() {
            out.push_str(&format!("; of the local device's part, {}", describe(s)));
        }
    }
    Some(out)
}

/// Time IOs waited for a free slot, when every slot was busy (see `Parts::build_with`).
fn slot_wait(cx: &Context) -> Option<String> {
    let wait = cx.parts.slot_wait.as_ref()?;
    let idx = match cx.mode {
        Mode::Raised { raised, .. } => raised.to_vec(),
        Mode::Whole => all(cx.run.len()),
    };
    let full: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| at(wait, i).is_some())
        .collect();
    let mean = mean_over(wait, &full)?;
    // Only a wait that is a sizeable part of the latency is worth a sentence.
    let latency = cx
        .subject
        .latency(cx.direction)
        .and_then(|l| mean_over(&l.mean_seconds, &full))?;
    if mean < cx.t.min_share * latency {
        return None;
    }
    Some(format!(
        "IOs waited {} on average for a free IO slot in {} of {} intervals, all slots busy with IOs in flight: that wait is counted with the parts that held the slots",
        secs(mean),
        full.len(),
        idx.len()
    ))
}

/// No cause: say what was checked, and how much of the evidence was measured.
fn healthy(cx: &Context, r: &mut DirectionResult) {
    r.cause = Cause::None;
    let has = |f: fn(SignalKind) -> bool| cx.scores.iter().any(|s| f(s.kind));
    let kinds = [
        ("latency breakdown", !cx.shares.is_empty()),
        (
            "block-layer signals",
            has(|k| {
                matches!(
                    k,
                    SignalKind::QueueTime | SignalKind::ServiceTime | SignalKind::InflightRatio
                )
            }),
        ),
        (
            "network signals",
            has(|k| k.is_interface_level() || k == SignalKind::Retransmits),
        ),
    ];
    let measured = kinds.iter().filter(|k| k.1).count();
    r.confidence = 0.5 + 0.5 * measured as f64 / kinds.len() as f64;
    let missing: Vec<&str> = kinds.iter().filter(|k| !k.1).map(|k| k.0).collect();
    r.confidence_explained = if missing.is_empty() {
        format!(
            "no anomaly, with all three kinds of evidence measured: confidence {:.2}",
            r.confidence
        )
    } else {
        format!(
            "no anomaly, but {} not measured: confidence 0.5 + 0.5 × {measured}/3 = {:.2}",
            missing.join(" and "),
            r.confidence
        )
    };
    r.evidence
        .push(format!("no anomalous signal: {}", checked(cx)));
}

/// A summary of the signals that were checked: totals of counters, the largest levels.
fn checked(cx: &Context) -> String {
    // With replicas in the breakdown, the retransmits that matter are those to them (the
    // agent counts every peer of the machine).
    let replicas: Vec<&str> = cx.parts.replicas().map(|p| p.key.as_str()).collect();
    let relevant = |s: &SignalScore| {
        s.kind != SignalKind::Retransmits
            || replicas.is_empty()
            || s.peer.as_deref().is_some_and(|p| replicas.contains(&p))
    };
    let sum = |k: SignalKind| -> Option<f64> {
        let v: Vec<f64> = cx
            .scores
            .iter()
            .filter(|s| s.kind == k && relevant(s))
            .filter_map(|s| s.run)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let max = |k: SignalKind| -> Option<f64> {
        cx.scores
            .iter()
            .filter(|s| s.kind == k)
            .filter_map(|s| s.run)
            .reduce(f64::max)
    };
    let mut out = Vec::new();
    let retransmits = if replicas.is_empty() {
        "retransmits"
    } else {
        "retransmits to the replicas"
    };
    for (k, what) in [
        (SignalKind::Retransmits, retransmits),
        (SignalKind::QdiscDrops, "qdisc drops"),
        (SignalKind::InterfaceRxDrops, "interface rx drops"),
        (SignalKind::BlockErrors, "IO errors"),
    ] {
        // The agent counts a peer's retransmits from the first one: a replica with RTT
        // samples and no retransmit series had none.
        let none_yet = k == SignalKind::Retransmits
            && !replicas.is_empty()
            && cx.scores.iter().any(|s| {
                s.kind == SignalKind::Srtt
                    && s.peer.as_deref().is_some_and(|p| replicas.contains(&p))
            });
        if let Some(v) = sum(k).or(none_yet.then_some(0.0)) {
            out.push(format!("{} {what}", count(v)));
        }
    }
    for (k, what) in [
        (SignalKind::ServiceTime, "device service time"),
        (SignalKind::QueueTime, "block-layer queue time"),
        (SignalKind::InflightRatio, "in-flight"),
    ] {
        if let Some(v) = max(k) {
            out.push(format!("{what} {}", level(k, v)));
        }
    }
    if out.is_empty() {
        "no signal was measured".into()
    } else {
        out.join(", ")
    }
}
