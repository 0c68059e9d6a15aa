//! The report as text: the verdict with its evidence, then per host and direction.

use std::fmt::Write;

use crate::prose::{part_label, phrase};
use crate::report::{DirectionResult, Report, State, Verdict};
use crate::signals::SignalScore;
use crate::units::{pct, secs};

fn verdict_lines(out: &mut String, v: &Verdict) {
    let _ = writeln!(out, "verdict: {} (confidence {:.2})", v.cause, v.confidence);
    for e in &v.evidence {
        let _ = writeln!(out, "  - {e}");
    }
    let _ = writeln!(out, "  confidence: {}", v.confidence_explained);
}

fn direction_lines(out: &mut String, host: &str, d: &DirectionResult) {
    let head = match d.state {
        State::InsufficientData => {
            format!("insufficient data ({} intervals with a p99)", d.intervals)
        }
        State::Steady => format!(
            "no raised interval in {}; p99 {} over the run",
            d.intervals,
            d.p99_seconds.map_or("-".into(), secs)
        ),
        State::Raised => format!(
            "{} of {} intervals raised; p99 {} against a {} baseline (threshold {})",
            d.raised_intervals.len(),
            d.intervals,
            d.p99_seconds.map_or("-".into(), secs),
            d.baseline
                .as_ref()
                .map_or("-".into(), |b| secs(b.p99_seconds)),
            d.baseline
                .as_ref()
                .map_or("-".into(), |b| secs(b.threshold_seconds)),
        ),
    };
    let _ = writeln!(
        out,
        "  {}: {head} -> {} ({:.2})",
        d.direction, d.cause, d.confidence
    );
    if !d.breakdown.is_empty() {
        let what = if d.state == State::Raised {
            "share of the rise"
        } else {
            "share of latency"
        };
        let parts: Vec<String> = d
            .breakdown
            .iter()
            .map(|p| {
                let key = if p.key.is_empty() {
                    String::new()
                } else {
                    format!(" {}", p.key)
                };
                format!(
                    "{}{key} {} ({})",
                    part_label(p.part),
                    pct(p.share),
                    secs(p.seconds)
                )
            })
            .collect();
        let _ = writeln!(out, "    {what}: {}", parts.join(", "));
    }
    for c in d.candidates.iter().take(4) {
        let _ = writeln!(
            out,
            "    candidate {} at {}: {:.2}{}",
            c.cause,
            c.location,
            c.score,
            if c.requirement_met {
                ""
            } else {
                " (requirement not met)"
            }
        );
    }
    let mut signals: Vec<&SignalScore> = d.signals.iter().filter(|s| s.rho.is_some()).collect();
    signals.sort_by(|a, b| b.rho.unwrap_or(0.0).total_cmp(&a.rho.unwrap_or(0.0)));
    for s in signals.iter().take(6) {
        let _ = writeln!(
            out,
            "    signal {}: rank correlation {:.2} at lag {}{}",
            phrase(host, s),
            s.rho.unwrap_or(0.0),
            s.lag.unwrap_or(0),
            if s.rose { ", rose" } else { "" }
        );
    }
}

/// The report as text: the verdict with its evidence, then per host and direction.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    verdict_lines(&mut out, &r.verdict);
    for h in &r.hosts {
        let _ = writeln!(out, "\nhost {}", h.host);
        for d in &h.directions {
            direction_lines(&mut out, &h.host, d);
        }
    }
    out
}
