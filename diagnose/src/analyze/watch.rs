//! `stornet watch` (`stornet analyze --prometheus … --watch`): the fleet's verdict over a window that moves
//! with the clock, evaluated again every step, one line each, for an operator to leave
//! running during an incident. A failed query is a line of its own and the watch goes on;
//! bad options stop it at once.

use std::io::Write;
use std::time::Duration;

use super::analyze;
use super::prometheus::{FleetQuery, fleet_run, window};
use crate::cli::{AnalyzeArgs, Format};
use crate::error::Failure;
use crate::time;

pub(super) fn run(a: &AnalyzeArgs, q: &FleetQuery) -> Result<u8, Failure> {
    if a.html.is_some() {
        return Err(Failure::Usage(
            "--watch prints a line per step and writes no HTML report; run once without --watch for one".into(),
        ));
    }
    for (flag, value) in [("--start", &a.fleet.start), ("--end", &a.fleet.end)] {
        if let Some(v) = value
            && !moves_with_now(v)
        {
            return Err(Failure::Usage(format!(
                "{flag}={v}: --watch needs a window that moves with the clock (now or now-DURATION)"
            )));
        }
    }
    loop {
        let now = time::now();
        let (start, end) = window(a, now)?;
        let evaluated = fleet_run(a, q, start, end)
            .and_then(|(_, _, run)| analyze(&run, "the Prometheus data"));
        let line = match evaluated {
            Ok(report) => verdict_line(a.format, now, start, end, &report.verdict),
            Err(Failure::Runtime(e)) => error_line(a.format, now, &format!("{e:#}")),
            Err(e) => return Err(e),
        };
        let line = crate::console::terminal(&line);
        let mut out = std::io::stdout().lock();
        // A reader that went away (`| head`) ends the watch.
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return Ok(0);
        }
        drop(out);
        let next = now + q.step;
        std::thread::sleep(Duration::from_secs_f64((next - time::now()).max(0.0)));
    }
}

fn moves_with_now(v: &str) -> bool {
    let v = v.trim();
    v == "now" || v.starts_with("now-")
}

fn verdict_line(format: Format, now: f64, start: f64, end: f64, v: &analysis::Verdict) -> String {
    match format {
        Format::Json => {
            let o = serde_json::json!({ "time": now, "start": start, "end": end, "verdict": v });
            format!("{o}\n")
        }
        Format::Text => {
            let mut s = format!("{} {}", time::format(now), v.cause);
            if let Some(h) = &v.host {
                s.push_str(&format!(" on {h}"));
            }
            if let Some(l) = &v.location {
                s.push_str(&format!(" at {l}"));
            }
            s.push_str(&format!(" (confidence {:.2})", v.confidence));
            if let Some(e) = v.evidence.first() {
                s.push_str(&format!(": {e}"));
            }
            s.push('\n');
            s
        }
    }
}

fn error_line(format: Format, now: f64, message: &str) -> String {
    match format {
        Format::Json => format!("{}\n", serde_json::json!({ "time": now, "error": message })),
        Format::Text => format!("{} error: {message}\n", time::format(now)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_windows_that_move_with_the_clock() {
        assert!(moves_with_now("now"));
        assert!(moves_with_now(" now-15m "));
        assert!(!moves_with_now("1700000000"));
        assert!(!moves_with_now("2025-05-01T12:00:00Z"));
    }

    #[test]
    fn lines_name_the_time_the_cause_and_where() {
        let v = analysis::Verdict {
            cause: analysis::Cause::None,
            confidence: 0.5,
            confidence_explained: String::new(),
            host: Some("stor1:9477".into()),
            direction: None,
            location: None,
            evidence: vec!["no interval rose".into()],
        };
        let t = verdict_line(Format::Text, 1_700_000_000.0, 0.0, 0.0, &v);
        assert_eq!(
            t,
            "2023-11-14T22:13:20Z none on stor1:9477 (confidence 0.50): no interval rose\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&verdict_line(Format::Json, 10.0, 1.0, 9.0, &v)).unwrap();
        assert_eq!(
            (j["start"].as_f64(), j["verdict"]["cause"].as_str()),
            (Some(1.0), Some("none"))
        );
        let e = error_line(Format::Text, 1_700_000_000.0, "Prometheus at x: refused");
        assert_eq!(e, "2023-11-14T22:13:20Z error: Prometheus at x: refused\n");
    }
}
