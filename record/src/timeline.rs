//! The per-interval timeline of a run, one row per interval: merged across jobs (histograms
//! added, never percentiles averaged) by the load generator as the run goes on.

use serde::{Deserialize, Serialize};

use crate::histogram::Summary;
use crate::live_verdict::LiveVerdict;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LegRow {
    pub name: String,
    pub lat_ns: Summary,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirRow {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    /// From intended start to completion.
    pub lat_ns: Summary,
    /// From submission to completion.
    pub clat_ns: Summary,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legs: Vec<LegRow>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineRow {
    /// Start of the interval, seconds after the end of the ramp.
    pub t_s: f64,
    pub duration_s: f64,
    pub read: DirRow,
    pub write: DirRow,
    /// Average IOs in flight over the interval, all jobs together.
    pub queue_depth: f64,
    /// CPU of the whole load-generator process (all threads, io_uring workers included), in
    /// % of one CPU, and of the whole system, in % of all CPUs.
    pub cpu_process_pct: f64,
    pub cpu_system_pct: f64,
    /// With agents: the verdict on the point's intervals so far, reached at this row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<LiveVerdict>,
}
