//! fio's JSON layout (`--output-format=json`) for what fio has: `jobs[].jobname`,
//! `jobs[].read|write` with `io_bytes`, `bw`, `iops`, `runtime`, `total_ios`, `clat_ns` and
//! `lat_ns` (min, max, mean, stddev, N and a `percentile` map keyed like "99.000000"),
//! `job options`, `usr_cpu`/`sys_cpu`. loadgen's own keys: `intended_lat_ns` next to
//! `lat_ns` (open-loop latency from the intended start), `jobs[].loadgen`, and a top-level
//! `loadgen` object with each sweep point's merged results, CPU per IO and timeline.

use serde_json::{Map, Value, json};

use super::{entries, rates};
use crate::histogram::{FIO_PERCENTILES, Histogram};
use crate::stats::{DirStats, JobResult, PointResult, RunResult};
use crate::timeline::TimelineRow;

fn hist(h: &Histogram, percentiles: bool) -> Value {
    let mut o = json!({
        "min": h.min(),
        "max": h.max(),
        "mean": h.mean(),
        "stddev": h.stddev(),
        "N": h.count(),
    });
    // As fio: percentiles only when there are samples.
    if percentiles && h.count() > 0 {
        let p: Map<String, Value> = FIO_PERCENTILES
            .iter()
            .map(|&p| (format!("{p:.6}"), json!(h.percentile(p))))
            .collect();
        o["percentile"] = Value::Object(p);
    }
    o
}

fn dir(d: &DirStats, runtime_ns: u64) -> Value {
    let (iops, bw) = rates(d, runtime_ns);
    let mut o = json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": bw as u64,
        "bw": (bw / 1024.0) as u64,
        "iops": iops,
        "runtime": runtime_ns / 1_000_000,
        "total_ios": d.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": hist(&d.slat, false),
        "clat_ns": hist(&d.clat, true),
        "lat_ns": hist(&d.lat, true),
        "intended_lat_ns": hist(&d.total, true),
    });
    if !d.legs.is_empty() {
        o["legs"] = d
            .legs
            .iter()
            .map(|l| json!({"name": l.name, "lat_ns": hist(&l.lat, true)}))
            .collect();
    }
    o
}

/// fio's per-interval bandwidth and IOPS statistics, from the timeline (only for entries
/// that cover every job of the point, since the timeline merges jobs).
fn interval_stats(o: &mut Value, rows: &[TimelineRow], write: bool) {
    let vals: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.duration_s > 0.0)
        .map(|r| {
            let d = if write { &r.write } else { &r.read };
            (d.bw_bytes / 1024.0, d.iops)
        })
        .collect();
    let stat = |f: &dyn Fn(&(f64, f64)) -> f64| {
        let n = vals.len().max(1) as f64;
        let mean = vals.iter().map(f).sum::<f64>() / n;
        let var = vals.iter().map(|v| (f(v) - mean).powi(2)).sum::<f64>() / n;
        let min = vals.iter().map(f).fold(f64::INFINITY, f64::min);
        let max = vals.iter().map(f).fold(0.0, f64::max);
        (
            if vals.is_empty() { 0.0 } else { min },
            max,
            mean,
            var.sqrt(),
        )
    };
    let (bmin, bmax, bmean, bdev) = stat(&|v| v.0);
    let (imin, imax, imean, idev) = stat(&|v| v.1);
    o["bw_min"] = json!(bmin as u64);
    o["bw_max"] = json!(bmax as u64);
    o["bw_agg"] = json!(100.0);
    o["bw_mean"] = json!(bmean);
    o["bw_dev"] = json!(bdev);
    o["bw_samples"] = json!(vals.len());
    o["iops_min"] = json!(imin as u64);
    o["iops_max"] = json!(imax as u64);
    o["iops_mean"] = json!(imean);
    o["iops_stddev"] = json!(idev);
    o["iops_samples"] = json!(vals.len());
}

fn job_options(j: &JobResult, given: &std::collections::BTreeMap<String, String>) -> Value {
    let mut o: Map<String, Value> = given
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    // The values of this sweep point, in fio's spelling.
    o.insert("name".into(), json!(j.name));
    o.insert("rw".into(), json!(j.rw.as_str()));
    o.insert("bs".into(), json!(crate::options::sizes::label(&j.sizes)));
    o.insert("iodepth".into(), json!(j.iodepth.to_string()));
    o.insert("filename".into(), json!(j.filename));
    Value::Object(o)
}

fn job(r: &RunResult, p: &PointResult, j: &JobResult, members: &[usize]) -> Value {
    let given = r
        .plan
        .jobs
        .get(j.group)
        .map(|g| g.given.clone())
        .unwrap_or_default();
    let cpu = &p.cpu;
    let pct = |s: f64| {
        if cpu.window_s > 0.0 {
            100.0 * s / cpu.window_s
        } else {
            0.0
        }
    };
    let mut read = dir(&j.dirs[0], j.runtime_ns);
    let mut write = dir(&j.dirs[1], j.runtime_ns);
    if members.len() == p.jobs.len() {
        interval_stats(&mut read, &p.timeline, false);
        interval_stats(&mut write, &p.timeline, true);
    }
    json!({
        "jobname": j.name,
        "groupid": p.index,
        "error": 0,
        "eta": 0,
        "elapsed": (j.runtime_ns / 1_000_000_000).max(1),
        "job options": job_options(j, &given),
        "read": read,
        "write": write,
        "trim": dir(&DirStats::default(), j.runtime_ns),
        "job_runtime": j.runtime_ns / 1_000_000,
        // CPU is the whole process's over the point (fio reports each job's own threads).
        "usr_cpu": pct(cpu.user_s),
        "sys_cpu": pct(cpu.sys_s),
        "ctx": 0,
        "majf": 0,
        "minf": 0,
        "loadgen": {
            "point": p.index,
            "jobnum": j.jobnum,
            "jobs_merged": members.len(),
            "filename": j.filename,
            "rate_iops": j.rate_iops,
            "ramp_ios": {"read": j.ramp_ios[0], "write": j.ramp_ios[1]},
            "verify": j.verify,
        },
    })
}

fn point(p: &PointResult) -> Value {
    let merged = |d: &DirStats| {
        let (iops, bw) = rates(d, p.runtime_ns);
        let mut o = json!({
            "ios": d.ios,
            "bytes": d.bytes,
            "iops": iops,
            "bw_bytes": bw,
            "intended_lat_ns": d.total.summary(),
            "lat_ns": d.lat.summary(),
            "clat_ns": d.clat.summary(),
        });
        if !d.legs.is_empty() {
            o["legs"] = d
                .legs
                .iter()
                .map(|l| json!({"name": l.name, "lat_ns": l.lat.summary()}))
                .collect();
        }
        o
    };
    json!({
        "index": p.index,
        "jobs": p.jobs.iter().map(|j| json!({"name": j.name, "jobnum": j.jobnum, "bs": j.bs, "iodepth": j.iodepth})).collect::<Vec<_>>(),
        "runtime_ms": p.runtime_ns / 1_000_000,
        "read": merged(&p.merged[0]),
        "write": merged(&p.merged[1]),
        "cpu": p.cpu,
        "timeline": p.timeline,
    })
}

pub fn render(r: &RunResult, group: bool) -> Value {
    let mut jobs = Vec::new();
    for p in &r.points {
        for (j, members) in entries(p, group) {
            jobs.push(job(r, p, &j, &members));
        }
    }
    json!({
        "fio version": format!("loadgen-{}", r.version),
        "timestamp": r.started_unix_ms / 1000,
        "timestamp_ms": r.started_unix_ms,
        "jobs": jobs,
        "disk_util": [],
        "loadgen": {
            "version": r.version,
            "safety_probe_reads": r.safety_probe_reads,
            "points": r.points.iter().map(point).collect::<Vec<_>>(),
        },
    })
}
