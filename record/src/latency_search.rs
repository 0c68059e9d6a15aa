//! What fio's latency-target search found (`engine::latency_target` runs it): the target
//! asked for, each window it ran, and the depth it settled on.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub target_ns: u64,
    pub window_ns: u64,
    /// Share of the IOs that must meet the target, in percent (fio's default 100).
    pub percentile: f64,
    /// `latency_run`: keep adjusting the depth until the runtime ends.
    pub run: bool,
}

/// One window of the search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub depth: u32,
    /// Start of the window, ns after the end of the ramp, and its length.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub ios: u64,
    pub iops: f64,
    /// The window's latency at the percentile asked for.
    pub latency_ns: u64,
    /// Share of its IOs within the target, in percent.
    pub within_pct: f64,
    pub met: bool,
    /// The last window, at the depth found, whose statistics are the job's results.
    pub last: bool,
}

/// The search's result, in a job's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub target: Target,
    /// The depth found (fio's `latency_depth`), or the last one tried if the search did not
    /// finish.
    pub depth: u32,
    /// Whether a depth met the target and the search finished on it.
    pub met: bool,
    pub finished: bool,
    pub steps: Vec<Step>,
}
