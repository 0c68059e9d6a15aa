//! Records of version 1 kept the load generator's resolved plan (`result.plan`) where version
//! 2 keeps the options as given (`result.options`): read, the plan gives what the reports
//! need of it. Every other field is the same in both versions.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::options::{JobSummary, RunOptions};
use crate::stats::{DiskUtil, PointResult, RunResult};

/// `result` as either version writes it.
#[derive(Deserialize)]
pub(crate) struct RunResultOnDisk {
    version: String,
    started_unix_ms: u64,
    /// Version 2.
    #[serde(default)]
    options: Option<RunOptions>,
    /// Version 1.
    #[serde(default)]
    plan: Option<Plan>,
    safety_probe_reads: u64,
    points: Vec<PointResult>,
    #[serde(default)]
    disk_util: Vec<DiskUtil>,
}

impl TryFrom<RunResultOnDisk> for RunResult {
    type Error = &'static str;

    fn try_from(r: RunResultOnDisk) -> Result<RunResult, &'static str> {
        let options = match (r.options, r.plan) {
            (Some(o), _) => o,
            (None, Some(plan)) => plan.options(),
            (None, None) => return Err("missing field `options`"),
        };
        Ok(RunResult {
            version: r.version,
            started_unix_ms: r.started_unix_ms,
            options,
            safety_probe_reads: r.safety_probe_reads,
            points: r.points,
            disk_util: r.disk_util,
        })
    }
}

/// What version 1's plan holds that the reports read; the rest of it is skipped.
#[derive(Deserialize)]
struct Plan {
    settings: Settings,
    #[serde(default)]
    jobs: Vec<Job>,
    #[serde(default)]
    global_options: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Settings {
    interval_ns: u64,
    #[serde(default)]
    group_reporting: bool,
}

#[derive(Deserialize)]
struct Job {
    name: String,
    #[serde(default)]
    ramp_time_ns: u64,
    #[serde(default)]
    percentile_list: Option<Vec<f64>>,
    #[serde(default)]
    given: BTreeMap<String, String>,
}

impl Plan {
    fn options(self) -> RunOptions {
        RunOptions {
            args: Vec::new(),
            job_files: Vec::new(),
            global: self.global_options,
            jobs: self
                .jobs
                .into_iter()
                .map(|j| JobSummary {
                    name: j.name,
                    given: j.given,
                    ramp_time_ns: j.ramp_time_ns,
                    percentile_list: j.percentile_list,
                })
                .collect(),
            interval_ns: self.settings.interval_ns,
            group_reporting: self.settings.group_reporting,
        }
    }
}
