//! fio's terse format, version 3 (`--output-format=terse`, `--minimal`): one line of
//! semicolon-separated fields per entry, in the order fio documents ("Terse output" in fio's
//! HOWTO), then the devices' utilization. Latencies are in µs, bandwidth in KiB/s.

use std::fmt::Write;

use super::{entries, interval_samples, sample_stats};
use crate::options::RunSettings;
use crate::results::histogram::{FIO_PERCENTILES, Histogram};
use crate::results::stats::{DirStats, JobResult, PointResult, RunResult};

/// Percentile fields per direction: fio always writes 20.
const PERCENTILE_FIELDS: usize = 20;

/// `;min;max;mean;stddev` in µs (min and max truncated, as fio).
fn lat(out: &mut String, h: &Histogram) {
    let _ = write!(
        out,
        ";{};{};{:.6};{:.6}",
        h.min() / 1000,
        h.max() / 1000,
        h.mean() / 1000.0,
        h.stddev() / 1000.0
    );
}

fn dir(
    out: &mut String,
    d: &DirStats,
    j: &JobResult,
    p: &PointResult,
    di: usize,
    r: &RunResult,
    s: &RunSettings,
) {
    let runtime_ms = if d.ios > 0 {
        j.runtime_ns / 1_000_000
    } else {
        0
    };
    // As fio: integer KiB/s and IOPS over the runtime in ms.
    let bw = (1000 * d.bytes).checked_div(runtime_ms).unwrap_or(0) / 1024;
    let iops = (1000 * d.ios).checked_div(runtime_ms).unwrap_or(0);
    let _ = write!(out, ";{};{bw};{iops};{runtime_ms}", d.bytes >> 10);
    lat(out, &d.slat);
    lat(out, &d.clat);
    let pcts = r
        .options
        .jobs
        .get(j.group)
        .and_then(|g| g.percentile_list.clone())
        .unwrap_or_else(|| FIO_PERCENTILES.to_vec());
    for i in 0..PERCENTILE_FIELDS {
        match pcts.get(i) {
            Some(&q) if d.clat.count() > 0 => {
                let _ = write!(out, ";{q:.6}%={}", d.clat.percentile(q) / 1000);
            }
            _ => out.push_str(";0%=0"),
        }
    }
    lat(out, &d.lat);
    let (bw_s, _) = interval_samples(&j.intervals, di, s.interval_ns);
    let (min, max, mean, dev) = sample_stats(&bw_s);
    let agg = super::rates(&p.merged[di], p.runtime_ns).1 / 1024.0;
    let pct = if bw_s.is_empty() {
        0.0
    } else if agg > 0.0 {
        (mean * 100.0 / agg).min(100.0)
    } else {
        100.0
    };
    let _ = write!(
        out,
        ";{};{};{pct:.6}%;{mean:.6};{dev:.6}",
        min as u64, max as u64
    );
}

fn pct_of(n: u64, total: u64, floor: f64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let v = 100.0 * n as f64 / total as f64;
    if n > 0 && v < floor { floor } else { v }
}

fn entry(
    out: &mut String,
    r: &RunResult,
    s: &RunSettings,
    p: &PointResult,
    j: &JobResult,
    members: &[usize],
) {
    let _ = write!(out, "3;loadgen-{};{};{};0", r.version, j.name, p.index);
    dir(out, &j.dirs[0], j, p, 0, r, s);
    dir(out, &j.dirs[1], j, p, 1, r, s);
    let run_ns: u64 = members.iter().map(|&m| p.jobs[m].runtime_ns).sum();
    let cpu = |ns: u64| {
        if run_ns > 0 {
            100.0 * ns as f64 / run_ns as f64
        } else {
            0.0
        }
    };
    let c = &j.thread_cpu;
    let _ = write!(
        out,
        ";{:.6}%;{:.6}%;{};{};{}",
        cpu(c.user_ns),
        cpu(c.sys_ns),
        c.ctx,
        c.majf,
        c.minf
    );
    let ios = j.dirs[0].ios + j.dirs[1].ios;
    for &n in &j.dists.depth {
        let _ = write!(out, ";{:3.1}%", pct_of(n, ios, 0.1));
    }
    let lat = |i: usize| j.dists.lat.get(i).copied().unwrap_or(0);
    // The ns classes are folded into the first µs class, as fio keeps the format.
    let ns: u64 = (0..10).map(lat).sum();
    for i in 10..20 {
        let v = pct_of(lat(i), ios, 0.01) + if i == 10 { pct_of(ns, ios, 0.0) } else { 0.0 };
        let _ = write!(out, ";{v:3.2}%");
    }
    for i in 20..32 {
        let _ = write!(out, ";{:3.2}%", pct_of(lat(i), ios, 0.01));
    }
    for d in &r.disk_util {
        let _ = write!(
            out,
            ";{};{};{};{};{};{};{};{};{:3.2}%",
            d.name,
            d.read_ios,
            d.write_ios,
            d.read_merges,
            d.write_merges,
            d.read_ticks,
            d.write_ticks,
            d.in_queue,
            d.util
        );
    }
    out.push('\n');
}

pub fn render(r: &RunResult, s: &RunSettings) -> String {
    let mut out = String::new();
    for p in &r.points {
        for (j, members) in entries(p, s.group_reporting) {
            entry(&mut out, r, s, p, &j, &members);
        }
    }
    out
}
