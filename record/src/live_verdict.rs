//! The live verdict: while a point runs with `--agent`, the analysis of its intervals so far,
//! after every timeline row. It goes on the progress line, on `--metrics-address`, and with
//! its row into the timeline of the JSON report and the run record. The whole-run verdict
//! is still `loadgen analyze`'s.

use analysis::{Cause, Report};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveVerdict {
    /// The point's first `intervals` intervals were judged: those the agents' samples had
    /// closed when the row was done (a boundary's scrape may still be under way).
    pub intervals: usize,
    pub cause: Cause,
    /// Where the cause acts ("device loop1 on a").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub confidence: f64,
}

impl LiveVerdict {
    pub fn of(report: &Report, intervals: usize) -> LiveVerdict {
        let v = &report.verdict;
        LiveVerdict {
            intervals,
            cause: v.cause,
            location: v.location.clone(),
            confidence: v.confidence,
        }
    }

    /// "slow_device at device loop1 on a (0.66)", "none".
    pub fn line(&self) -> String {
        match &self.location {
            Some(l) if self.cause.is_root_cause() => {
                format!("{} at {l} ({:.2})", self.cause.name(), self.confidence)
            }
            _ => self.cause.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_cause_place_and_confidence() {
        let mut v = LiveVerdict {
            intervals: 4,
            cause: Cause::SlowDevice,
            location: Some("device loop1 on a".into()),
            confidence: 0.656,
        };
        assert_eq!(v.line(), "slow_device at device loop1 on a (0.66)");
        v.cause = Cause::None;
        v.location = None;
        assert_eq!(v.line(), "none");
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, r#"{"intervals":4,"cause":"none","confidence":0.656}"#);
    }
}
