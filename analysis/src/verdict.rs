//! Runs the analysis per host and direction and names the cause, with its confidence and
//! evidence.

use crate::baseline::{baseline, p99_series, raised};
use crate::breakdown::{PartKind, PartShare, Parts};
use crate::causes::{rank, retransmits_speak};
use crate::context::{Context, Mode};
use crate::histogram::merged;
use crate::model::{Direction, Host, Latency, Run};
use crate::prose;
use crate::report::{Candidate, Cause, DirectionResult, HostAnalysis, Report, State, Verdict};
use crate::series::{all, at, mean_over, median_over, sum_over};
use crate::signals::{SignalKind, collect, score};
use crate::thresholds::Thresholds;

/// Analyses every host that has read or write latency.
pub fn report(run: &Run, t: &Thresholds) -> Report {
    let hosts: Vec<HostAnalysis> = run
        .hosts
        .iter()
        .filter(|h| h.read.is_some() || h.write.is_some())
        .map(|h| host(run, h, t))
        .collect();
    // A root cause that several hosts name at the same place outweighs one host's: in a
    // cluster every host suffers from a congested link, and the host behind it may see the
    // others' paths as the slow ones.
    let support = |v: &Verdict| {
        if !v.cause.is_root_cause() {
            return 0;
        }
        hosts
            .iter()
            .filter(|h| h.verdict.cause == v.cause && h.verdict.location == v.location)
            .count()
    };
    let chosen = hosts.iter().map(|h| &h.verdict).max_by(|a, b| {
        class(a.cause)
            .cmp(&class(b.cause))
            .then(support(a).cmp(&support(b)))
            .then(a.confidence.total_cmp(&b.confidence))
    });
    let verdict = match chosen {
        None => Verdict {
            cause: Cause::InsufficientData,
            confidence: 0.0,
            confidence_explained: prose::no_verdict(prose::NO_HOST_LATENCY),
            host: None,
            direction: None,
            location: None,
            evidence: vec![prose::NO_HOST_LATENCY.into()],
        },
        Some(v) => {
            let mut v = v.clone();
            for other in hosts.iter().filter(|h| Some(&h.host) != v.host.as_ref()) {
                v.evidence.push(prose::other_host(
                    &other.host,
                    other.verdict.cause,
                    other.verdict.confidence,
                ));
            }
            v
        }
    };
    Report { verdict, hosts }
}

/// Analyses one host's reads and writes.
pub fn host(run: &Run, h: &Host, t: &Thresholds) -> HostAnalysis {
    let mut directions: Vec<DirectionResult> = Direction::ALL
        .iter()
        .filter_map(|&d| Some(direction(run, h, d, h.latency(d)?, t)))
        .collect();
    crate::slots::charge_holders(h, &mut directions, t);
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
                evidence: vec![prose::host_without_latency(&h.name)],
            },
            directions,
        };
    };
    let mut evidence = chosen.evidence.clone();
    for other in directions
        .iter()
        .filter(|d| d.direction != chosen.direction)
    {
        evidence.push(prose::other_direction(
            other.direction,
            other.cause,
            other.location.as_deref(),
            other.confidence,
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
    class(a.0).cmp(&class(b.0)).then(a.1.total_cmp(&b.1))
}

/// Root causes tell most, then an unexplained rise, then none.
fn class(c: Cause) -> u8 {
    match c {
        c if c.is_root_cause() => 3,
        Cause::Unexplained => 2,
        Cause::None => 1,
        _ => 0,
    }
}

fn insufficient(d: Direction, present: usize, n: usize, t: &Thresholds) -> DirectionResult {
    let why = prose::too_few_intervals(d, present, n, t.min_intervals);
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
        confidence_explained: prose::no_verdict(&why),
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
        rise_seconds: is_raised
            .then(|| median_over(&p99, &raised_idx))
            .flatten()
            .map(|m| m - base.p99_seconds),
        local_layers: Default::default(),
    };
    let candidates = rank(&cx);
    let p99_value = merged(&lat.histograms, &p99_over)
        .filter(|_| {
            p99_over
                .iter()
                .all(|&i| lat.histograms.get(i).is_some_and(Option::is_some))
        })
        .and_then(|m| m.quantile(0.99))
        .or_else(|| median_over(&p99, &p99_over));
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
    r.evidence.push(prose::headline(cx.direction, r));
    r.evidence.extend(prose::where_it_goes(cx.shares));
    r.evidence.extend(slot_wait(cx));
    match (r.state, top) {
        (State::Raised, Some(c)) if c.score >= t.min_cause_score => named(cx, r, c, candidates),
        (State::Steady, Some(c)) => named(cx, r, c, candidates),
        (State::Raised, _) => {
            r.cause = Cause::Unexplained;
            let best = prose::best_candidate(top);
            r.confidence_explained = prose::unexplained_confidence(&best, t.min_cause_score);
            r.evidence.push(prose::unexplained(&best));
        }
        _ => healthy(cx, r),
    }
}

fn named(cx: &Context, r: &mut DirectionResult, c: &Candidate, candidates: &[Candidate]) {
    let runner = candidates
        .iter()
        .find(|o| o.cause != c.cause && o.score > 0.0);
    let second = runner.map_or(0.0, |o| o.score);
    r.cause = c.cause;
    r.location = Some(c.location.clone());
    r.confidence = (c.score - 0.5 * second).clamp(0.0, 1.0);
    r.confidence_explained = prose::named_confidence(r.state, c, runner, r.confidence);
    r.evidence.extend(c.findings.iter().cloned());
    if !c.requirement_met {
        r.evidence.push(prose::not_confirmed(c.cause));
    }
    r.evidence.extend(healthy_replicas(cx, c, candidates));
    r.evidence.extend(other_devices(cx, c));
}

/// With the cause on the analysed host's own devices, how its other devices that served
/// IO of the same kind fared: one slow device among steady ones points at that device (or
/// what is behind it); all of them slower points at what they share.
fn other_devices(cx: &Context, c: &Candidate) -> Option<String> {
    if !matches!(c.cause, Cause::SlowDevice | Cause::DeviceSaturation) || c.replica.is_some() {
        return None;
    }
    let op = cx.direction.op();
    let (raised, others) = match cx.mode {
        Mode::Raised { raised, others } => (raised.to_vec(), Some(others.to_vec())),
        Mode::Whole => (all(cx.run.len()), None),
    };
    let fared: Vec<(String, f64, Option<f64>)> = cx
        .subject
        .devices
        .iter()
        .filter(|(name, _)| !cx.parts.devices.contains(name))
        .filter_map(|(name, d)| {
            let o = d.ops.get(op)?;
            if sum_over(&o.ios, &raised).unwrap_or(0.0) <= 0.0 {
                return None;
            }
            let now = mean_over(&o.service_seconds, &raised)?;
            let before = others
                .as_ref()
                .and_then(|idx| mean_over(&o.service_seconds, idx));
            Some((name.clone(), now, before))
        })
        .collect();
    (!fared.is_empty()).then(|| prose::other_devices(&cx.subject.name, op, &fared))
}

/// With the cause on one replica (its path or its device), the other replicas that stayed
/// healthy: a small share of the latency rise (over a whole run: a round trip no longer
/// than the culprit's), no confirmed cause of their own, and retransmits toward them
/// fewer than an anomaly needs or no evidence (`retransmits_speak`). With several replicas, where not to look
/// is half of the answer.
fn healthy_replicas(cx: &Context, c: &Candidate, candidates: &[Candidate]) -> Vec<String> {
    let Some(culprit) = &c.replica else {
        return Vec::new();
    };
    let idx = cx.intervals();
    let culprit_seconds = cx
        .shares
        .iter()
        .find(|s| s.part == PartKind::Replica && s.key == *culprit)
        .map(|s| s.seconds);
    // Over a whole run every replica of a write holds much of its latency (they run in
    // parallel): there, one no slower than the culprit's path is not held up.
    let small = |s: &&PartShare| {
        s.share < cx.t.min_share
            || (!cx.raised() && culprit_seconds.is_some_and(|c| s.seconds <= c))
    };
    cx.shares
        .iter()
        .filter(|s| s.part == PartKind::Replica && s.key != *culprit)
        .filter(small)
        .filter(|s| {
            !candidates
                .iter()
                .any(|o| o.requirement_met && o.replica.as_deref() == Some(s.key.as_str()))
        })
        .filter_map(|s| {
            // The agent creates a peer's series at its first retransmit: with retransmits
            // counted toward another peer, a replica without a series had none.
            let peers = &cx.subject.peers;
            let counted = peers.values().any(|p| !p.retransmits.is_empty());
            let retransmits = match peers.get(&s.key).map(|p| &p.retransmits) {
                Some(r) if !r.is_empty() => sum_over(r, &idx),
                _ => counted.then_some(0.0),
            };
            (retransmits.unwrap_or(0.0) < cx.t.anomaly_min_events || !retransmits_speak(cx, &s.key))
                .then(|| prose::healthy_replica(s, retransmits))
        })
        .collect()
}

/// Time IOs waited for a free slot, when every slot was busy (see `Parts::build_with`).
fn slot_wait(cx: &Context) -> Option<String> {
    let wait = cx.parts.slot_wait.as_ref()?;
    let idx = cx.intervals();
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
    Some(prose::slot_wait(mean, full.len(), idx.len()))
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
    r.confidence_explained = prose::healthy_confidence(&missing, measured, r.confidence);
    r.evidence.push(prose::healthy(cx));
}
