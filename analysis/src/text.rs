//! Human-readable numbers, signal descriptions and the text rendering of a report.

use std::fmt::Write;

use crate::breakdown::PartKind;
use crate::causes::{Context, Mode};
use crate::signals::{SignalKind, SignalScore};
use crate::verdict::{DirectionResult, Report, State, Verdict};

/// A duration: "212 ms", "1.9 ms", "850 µs", "2.3 s".
pub fn secs(v: f64) -> String {
    let (x, unit) = if v >= 1.0 {
        (v, "s")
    } else if v >= 1e-3 {
        (v * 1e3, "ms")
    } else {
        (v * 1e6, "µs")
    };
    if x >= 10.0 || x == 0.0 {
        format!("{x:.0} {unit}")
    } else {
        format!("{x:.1} {unit}")
    }
}

/// A share: "96%" (below 1%: "<1%").
pub fn pct(v: f64) -> String {
    let p = v * 100.0;
    if p > 0.0 && p < 1.0 {
        "<1%".into()
    } else {
        format!("{p:.0}%")
    }
}

/// A count with thousands separators: "1,874".
pub fn count(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size: "512 B", "64 KiB", "3.9 MiB".
pub fn bytes(v: f64) -> String {
    if v >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{:.0} KiB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// A value of a signal, in its unit.
pub fn level(kind: SignalKind, v: f64) -> String {
    use SignalKind::*;
    match kind {
        Srtt | QueueTime | ServiceTime | AboveBlock | ReplicaRtt => secs(v),
        QdiscBacklog => bytes(v),
        InflightRatio => format!("{} of the queue limit", pct(v)),
        _ => count(v),
    }
}

/// What a signal is, as a phrase: "retransmits to 198.18.0.2".
pub fn phrase(subject: &str, s: &SignalScore) -> String {
    use SignalKind::*;
    let on = |what: &str| format!("{what} on {} {}", s.host, s.key);
    let (iface, qdisc) = s.key.split_once(' ').unwrap_or((&s.key, ""));
    let from = if s.host == subject {
        String::new()
    } else {
        format!(" from {}", s.host)
    };
    match s.kind {
        Retransmits => format!("retransmits{from} to {}", s.key),
        Srtt => format!("smoothed RTT{from} to {}", s.key),
        SkbDrops => format!("packets dropped on {} with reason {}", s.host, s.key),
        QdiscDrops => format!("drops at the {qdisc} qdisc on {} {iface}", s.host),
        QdiscBacklog => format!("backlog of the {qdisc} qdisc on {} {iface}", s.host),
        QdiscOverlimits => format!("overlimits of the {qdisc} qdisc on {} {iface}", s.host),
        InterfaceRxDrops => on("rx drops"),
        InterfaceTxDrops => on("tx drops"),
        InterfaceRxErrors => on("rx errors"),
        InterfaceTxErrors => on("tx errors"),
        InflightRatio => on("in-flight requests"),
        QueueTime => on("block-layer queue time"),
        ServiceTime => on("device service time"),
        BlockErrors => on("IO errors"),
        AboveBlock => format!("time above the block layer on {}", s.host),
        ReplicaRtt => format!("round trip to replica {}", s.key),
    }
}

fn correlation(s: &SignalScore) -> String {
    let Some(rho) = s.rho else {
        return "no rank correlation (too few points or a constant series)".into();
    };
    let lag = match s.lag.unwrap_or(0) {
        0 => String::new(),
        1 => " with the signal one interval ahead".into(),
        -1 => " with the signal one interval behind".into(),
        l if l > 0 => format!(" with the signal {l} intervals ahead"),
        l => format!(" with the signal {} intervals behind", -l),
    };
    format!("rank correlation {rho:.2}{lag}")
}

/// A signal in raised intervals against the others, with its correlation.
pub fn describe_raised(cx: &Context, i: usize) -> String {
    let s = &cx.scores[i];
    let (r, o) = match cx.mode {
        Mode::Raised { raised, others } => (raised.len(), others.len()),
        Mode::Whole => (0, 0),
    };
    let what = phrase(&cx.subject.name, s);
    let (during, before) = (s.raised.unwrap_or(0.0), s.others.unwrap_or(0.0));
    if s.kind.is_counter() {
        format!(
            "{} {what} in the {r} raised intervals ({} in the other {o}); {}",
            count(during),
            count(before),
            correlation(s)
        )
    } else {
        format!(
            "{what} {} in the raised intervals against {} in the others; {}",
            level(s.kind, during),
            level(s.kind, before),
            correlation(s)
        )
    }
}

/// A signal over the whole run: events and rate, or its mean.
pub fn describe_run(cx: &Context, i: usize) -> String {
    let s = &cx.scores[i];
    let what = phrase(&cx.subject.name, s);
    let run = s.run.unwrap_or(0.0);
    if !s.kind.is_counter() {
        return format!("{what} {} on average over the run", level(s.kind, run));
    }
    let seconds = cx.run.len() as f64 * cx.run.interval_seconds;
    let mut out = format!(
        "{} {what} over the run ({:.1} per second",
        count(run),
        run / seconds
    );
    if s.kind == SignalKind::Retransmits
        && let Some(lat) = cx.subject.latency(cx.direction)
    {
        let ios: f64 = lat
            .iops
            .iter()
            .flatten()
            .filter(|v| v.is_finite())
            .sum::<f64>()
            * cx.run.interval_seconds;
        if ios > 0.0 {
            let _ = write!(out, ", {:.2} per {} IO", run / ios, cx.direction);
        }
    }
    out.push(')');
    out
}

/// A part of the latency, as a phrase: "waiting for replica 198.18.0.2".
pub fn part_phrase(kind: PartKind, key: &str) -> String {
    let on = if key.is_empty() {
        String::new()
    } else {
        format!(" of {key}")
    };
    match kind {
        PartKind::LocalDevice => format!("on the local device{on}"),
        PartKind::AboveBlock => format!("above the block layer{on}"),
        PartKind::Queue => format!("in the block-layer queue{on}"),
        PartKind::Service => format!("in device service time{on}"),
        PartKind::Replica => format!("waiting for replica {key}"),
    }
}

fn part_label(kind: PartKind) -> &'static str {
    match kind {
        PartKind::LocalDevice => "local device",
        PartKind::AboveBlock => "above block layer",
        PartKind::Queue => "queue",
        PartKind::Service => "service",
        PartKind::Replica => "replica",
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_an_operator_writes_them() {
        assert_eq!(secs(0.212), "212 ms");
        assert_eq!(secs(0.0019), "1.9 ms");
        assert_eq!(secs(0.00085), "850 µs");
        assert_eq!(secs(2.34), "2.3 s");
        assert_eq!(secs(0.0), "0 µs");
        assert_eq!(count(1874.2), "1,874");
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(12.0), "12");
        assert_eq!(pct(0.956), "96%");
        assert_eq!(pct(0.001), "<1%");
        assert_eq!(bytes(65536.0), "64 KiB");
        assert_eq!(bytes(4.0 * 1024.0 * 1024.0), "4.0 MiB");
    }
}
