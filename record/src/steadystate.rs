//! fio's steady state (`steadystate`, `ss_dur`, `ss_ramp`): the criterion a job is judged by
//! and what it found, as fio's JSON `steadystate` section reports it.

use serde::{Deserialize, Serialize};

/// What is measured once a second and how it is judged over the window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// IOPS (true) or bandwidth in bytes per second (false).
    pub iops: bool,
    /// The least-squares slope of the window (true) or its largest distance from the mean.
    pub slope: bool,
    /// The limit the criterion must fall below; with `pct`, a percentage of the mean.
    pub limit: f64,
    pub pct: bool,
}

impl Default for Criterion {
    /// fio's default, `iops_slope:0.01%`.
    fn default() -> Self {
        Criterion {
            iops: true,
            slope: true,
            limit: 0.01,
            pct: true,
        }
    }
}

impl Criterion {
    /// fio's spelling, as its JSON's `ss` key: `iops_slope:0.010000%`.
    pub fn label(&self) -> String {
        format!(
            "{}{}:{:.6}{}",
            if self.iops { "iops" } else { "bw" },
            if self.slope { "_slope" } else { "" },
            self.limit,
            if self.pct { "%" } else { "" }
        )
    }
}

/// A job's steady state settings: the criterion, the window in whole seconds, and how long
/// after the job's ramp the first sample starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub criterion: Criterion,
    pub dur_s: u32,
    pub ramp_ns: u64,
}

/// What the steady state check of a job (or of a reporting group) found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    pub criterion: Criterion,
    pub dur_s: u32,
    /// The criterion fell below its limit, and the job stopped there.
    pub attained: bool,
    /// The last value of the criterion judged (0 before the window first filled).
    pub value: f64,
    pub max_deviation: f64,
    pub slope: f64,
    /// The window's samples, oldest first (fewer than `dur_s` when it never filled).
    pub iops: Vec<u64>,
    pub bw: Vec<u64>,
}
