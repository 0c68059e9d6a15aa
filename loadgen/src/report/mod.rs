//! Reports of a run: readable text (default) and fio's JSON layout with loadgen's own keys.

pub mod fio_json;
pub mod text;

use crate::options::{OutputFormat, RunSettings};
use crate::stats::{DirStats, JobResult, PointResult, RunResult};

/// The report in the requested format.
pub fn render(r: &RunResult, settings: &RunSettings) -> String {
    match settings.output_format {
        OutputFormat::Normal => text::render(r, settings.group_reporting),
        OutputFormat::Json => {
            let mut s =
                serde_json::to_string_pretty(&fio_json::render(r, settings.group_reporting))
                    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            s.push('\n');
            s
        }
    }
}

/// Entries to report for a point: one per job thread, or one per point with group_reporting
/// (every job merged, named after the first).
pub fn entries(p: &PointResult, group: bool) -> Vec<(JobResult, Vec<usize>)> {
    if !group || p.jobs.len() <= 1 {
        return p
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.clone(), vec![i]))
            .collect();
    }
    let mut first = p.jobs[0].clone();
    first.dirs = p.merged.clone();
    first.ramp_ios = p
        .jobs
        .iter()
        .fold([0, 0], |a, j| [a[0] + j.ramp_ios[0], a[1] + j.ramp_ios[1]]);
    first.runtime_ns = p.runtime_ns;
    vec![(first, (0..p.jobs.len()).collect())]
}

/// IOPS and bytes per second of a direction over `runtime_ns`.
pub fn rates(d: &DirStats, runtime_ns: u64) -> (f64, f64) {
    if runtime_ns == 0 {
        return (0.0, 0.0);
    }
    let s = runtime_ns as f64 / 1e9;
    (d.ios as f64 / s, d.bytes as f64 / s)
}
