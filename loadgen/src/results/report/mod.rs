//! Reports of a run: readable text (default), fio's JSON layout with loadgen's own keys
//! (`json`, and `json+` with latency bins), and fio's terse format. Several formats print in
//! fio's order: terse, JSON, text.

pub mod fio_json;
pub mod ordered;
pub mod terse;
pub mod text;

use crate::options::RunSettings;
use crate::results::stats::{DirStats, IntervalCount, JobResult, PointResult, RunResult};

/// The report in the requested formats.
pub fn render(r: &RunResult, settings: &RunSettings) -> String {
    let f = settings.output_format;
    let mut out = String::new();
    if f.terse {
        out.push_str(&terse::render(r, settings));
    }
    if f.json {
        out.push_str(&fio_json::to_string(&fio_json::render(
            r,
            settings,
            f.json_plus,
        )));
    }
    if f.normal {
        out.push_str(&text::render(r, settings.group_reporting));
    }
    out
}

/// Where reports go: stdout, or the `--output` file, created at the first write (interim
/// reports of `--status-interval` come before the final one).
pub struct Output {
    /// The `--output` file, checked when the run starts and renamed into place when it ends;
    /// standard output without it.
    file: Option<crate::results::outfile::OutFile>,
}

impl Output {
    pub fn new(path: Option<&std::path::Path>) -> Result<Output, String> {
        Ok(Output {
            file: path
                .map(crate::results::outfile::OutFile::create)
                .transpose()?,
        })
    }

    /// Writes (or with `--output`, appends) a report: interim ones, then the final one.
    pub fn write(&mut self, text: &str) -> Result<(), String> {
        use std::io::Write;
        match &mut self.file {
            Some(f) => f.append(text.as_bytes()),
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .map_err(|e| format!("writing the report: {e}"))
            }
        }
    }

    /// Puts the `--output` file in place once the run's reports are all in it.
    pub fn finish(&mut self) -> Result<(), String> {
        match self.file.take() {
            Some(f) => f.commit(|_| Ok(())),
            None => Ok(()),
        }
    }
}

/// Entries to report for a point: one per job thread, or with group_reporting one per
/// reporting group (fio's `groupid`; every job of the point when the run has no groups),
/// its jobs merged and named after the first, as fio merges a group.
pub fn entries(p: &PointResult, group: bool) -> Vec<(JobResult, Vec<usize>)> {
    if !group || p.jobs.len() <= 1 {
        return p
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.clone(), vec![i]))
            .collect();
    }
    let mut ids: Vec<Option<usize>> = p.jobs.iter().map(|j| j.groupid).collect();
    ids.dedup();
    ids.into_iter()
        .map(|g| {
            let members: Vec<usize> = (0..p.jobs.len())
                .filter(|&i| p.jobs[i].groupid == g)
                .collect();
            (merge(p, &members), members)
        })
        .collect()
}

/// The jobs `members` of a point as one (with every job, the point's merged stats).
fn merge(p: &PointResult, members: &[usize]) -> JobResult {
    let mut first = p.jobs[members[0]].clone();
    if members.len() == p.jobs.len() {
        first.dirs = p.merged.clone();
    } else {
        for &m in &members[1..] {
            for d in 0..2 {
                first.dirs[d].merge(&p.jobs[m].dirs[d]);
            }
        }
    }
    first.runtime_ns = members
        .iter()
        .map(|&m| p.jobs[m].runtime_ns)
        .max()
        .unwrap_or(0);
    for &m in &members[1..] {
        let j = &p.jobs[m];
        for d in 0..2 {
            first.ramp_ios[d] += j.ramp_ios[d];
        }
        first.dists.merge(&j.dists);
        first.thread_cpu.add(&j.thread_cpu);
        first.sync.merge(&j.sync);
        if let (Some(a), Some(b)) = (&mut first.errors_continued, &j.errors_continued) {
            a.total += b.total;
            if a.first == 0 {
                a.first = b.first;
            }
        }
        merge_intervals(&mut first.intervals, &j.intervals);
    }
    first
}

/// Adds another job's interval counts, interval by interval (jobs of a point share the
/// timeline's intervals).
fn merge_intervals(into: &mut Vec<IntervalCount>, other: &[IntervalCount]) {
    if into.len() < other.len() {
        into.resize(other.len(), IntervalCount::default());
    }
    for (a, b) in into.iter_mut().zip(other) {
        a.covered_ns = a.covered_ns.max(b.covered_ns);
        for d in 0..2 {
            a.ios[d] += b.ios[d];
            a.bytes[d] += b.bytes[d];
        }
    }
}

/// IOPS and bytes per second of a direction over `runtime_ns`.
pub fn rates(d: &DirStats, runtime_ns: u64) -> (f64, f64) {
    d.rates(runtime_ns)
}

/// fio's statistics over per-interval samples: min, max, mean and sample standard deviation
/// (n − 1), 0 without samples.
pub fn sample_stats(v: &[f64]) -> (f64, f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let dev = if v.len() > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (min, max, mean, dev)
}

/// Per-interval KiB/s and IOPS of direction `d`, over the intervals that ran in full (as fio
/// takes a sample only when its averaging window has passed).
pub fn interval_samples(iv: &[IntervalCount], d: usize, interval_ns: u64) -> (Vec<f64>, Vec<f64>) {
    iv.iter()
        .filter(|c| c.covered_ns >= interval_ns && c.covered_ns > 0)
        .map(|c| {
            let s = c.covered_ns as f64 / 1e9;
            (c.bytes[d] as f64 / 1024.0 / s, c.ios[d] as f64 / s)
        })
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_statistics_as_fio() {
        assert_eq!(sample_stats(&[]), (0.0, 0.0, 0.0, 0.0));
        assert_eq!(sample_stats(&[5.0]), (5.0, 5.0, 5.0, 0.0));
        let (min, max, mean, dev) = sample_stats(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((min, max, mean), (2.0, 9.0, 5.0));
        assert!((dev - 2.138_089_935).abs() < 1e-6, "{dev}");
        let iv = [
            IntervalCount {
                covered_ns: 1_000_000_000,
                ios: [100, 0],
                bytes: [409_600, 0],
            },
            IntervalCount {
                covered_ns: 400_000_000,
                ios: [40, 0],
                bytes: [163_840, 0],
            },
        ];
        let (bw, iops) = interval_samples(&iv, 0, 1_000_000_000);
        assert_eq!(
            (bw, iops),
            (vec![400.0], vec![100.0]),
            "the partial interval is left out"
        );
        let mut a = iv.to_vec();
        merge_intervals(&mut a, &iv[..1]);
        assert_eq!(a[0].ios[0], 200);
        assert_eq!(a[1].ios[0], 40);
    }
}
