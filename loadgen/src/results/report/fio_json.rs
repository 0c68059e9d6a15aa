//! fio 3.33's JSON layout (`--output-format=json`, and `json+` with latency bins): every key
//! fio writes for the same job, in fio's order, with the same types and meaning. Values fio
//! derives from its latency histograms (percentiles, `bins`) come from loadgen's; `bins` are
//! in fio's bucket layout, so fio's own tools (`fio_jsonplus_clat2csv`) read them.
//!
//! loadgen's own keys sit beside fio's: `intended_lat_ns` (latency from each IO's intended
//! start) and `legs` (per leg of replicated writes) in each direction, `jobs[].loadgen`, and
//! a top-level `loadgen` with each sweep point's merged results, CPU and timeline.

use serde_json::json;

use super::ordered::{J, Obj};
use super::{entries, interval_samples, rates, sample_stats};
use crate::options::RunSettings;
use crate::options::sizes;
use crate::results::histogram::{FIO_PERCENTILES, Histogram, fio};
use crate::results::stats::{DirStats, IntervalCount, IoDists, JobResult, PointResult, RunResult};
use crate::results::steadystate::SteadyState;

/// Pretty JSON with a final newline.
pub fn to_string(o: &Obj) -> String {
    let mut s =
        serde_json::to_string_pretty(o).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// What every latency block needs to know.
struct Ctx<'a> {
    percentiles: &'a [f64],
    plus: bool,
}

/// `min`, `max`, `mean`, `stddev`, `N`; with `pct`, the `percentile` map (when there are
/// samples, as fio) and with json+ the `bins`.
fn lat(h: &Histogram, pct: bool, bins: bool, c: &Ctx) -> Obj {
    let mut o = Obj::new()
        .with("min", h.min())
        .with("max", h.max())
        .with("mean", h.mean())
        .with("stddev", h.stddev())
        .with("N", h.count());
    if pct && h.count() > 0 {
        let mut p = Obj::new();
        for &q in c.percentiles {
            p.put(format!("{q:.6}"), h.percentile(q));
        }
        o.put("percentile", p);
        if bins && c.plus {
            let mut b = Obj::new();
            for (i, n) in h.fio_bins() {
                b.put(fio::value(i).to_string(), n);
            }
            o.put("bins", b);
        }
    }
    o
}

/// One direction of one entry. `agg` is the bytes per second of the whole group (sweep
/// point), for `bw_agg`.
fn dir(
    d: &DirStats,
    runtime_ns: u64,
    iv: &[IntervalCount],
    di: usize,
    agg: f64,
    interval_ns: u64,
    c: &Ctx,
) -> Obj {
    let runtime_ns = if d.ios > 0 { runtime_ns } else { 0 };
    let (iops, bw) = rates(d, runtime_ns);
    let (bw_s, iops_s) = interval_samples(iv, di, interval_ns);
    let (bmin, bmax, bmean, bdev) = sample_stats(&bw_s);
    let (imin, imax, imean, idev) = sample_stats(&iops_s);
    let bw_agg = if bw_s.is_empty() {
        0.0
    } else if agg > 0.0 {
        (bmean * 100.0 / (agg / 1024.0)).min(100.0)
    } else {
        100.0
    };
    let mut o = Obj::new()
        .with("io_bytes", d.bytes)
        .with("io_kbytes", d.bytes >> 10)
        .with("bw_bytes", bw as u64)
        .with("bw", (bw / 1024.0) as u64)
        .with("iops", iops)
        .with("runtime", runtime_ns / 1_000_000)
        .with("total_ios", d.ios)
        .with("short_ios", 0u64)
        .with("drop_ios", 0u64)
        .with("slat_ns", lat(&d.slat, false, false, c))
        .with("clat_ns", lat(&d.clat, true, true, c))
        // fio adds lat_ns percentiles only with lat_percentiles=1; loadgen always has them.
        .with("lat_ns", lat(&d.lat, true, false, c))
        .with("bw_min", bmin as u64)
        .with("bw_max", bmax as u64)
        .with("bw_agg", bw_agg)
        .with("bw_mean", bmean)
        .with("bw_dev", bdev)
        .with("bw_samples", bw_s.len())
        .with("iops_min", imin as u64)
        .with("iops_max", imax as u64)
        .with("iops_mean", imean)
        .with("iops_stddev", idev)
        .with("iops_samples", iops_s.len())
        .with("intended_lat_ns", lat(&d.total, true, false, c));
    if !d.legs.is_empty() {
        let legs: Vec<J> = d
            .legs
            .iter()
            .map(|l| {
                Obj::new()
                    .with("name", l.name.as_str())
                    .with("lat_ns", lat(&l.lat, true, false, c))
                    .into()
            })
            .collect();
        o.put("legs", legs);
    }
    o
}

/// fio's percentage of a class, at least 0.1 (depths) or 0.01 (latencies) when not empty.
fn dist(counts: &[u64], total: u64, keys: &[&str], floor: f64) -> Obj {
    let mut o = Obj::new();
    for (i, k) in keys.iter().enumerate() {
        let n = counts.get(i).copied().unwrap_or(0);
        let mut v = if total > 0 {
            100.0 * n as f64 / total as f64
        } else {
            0.0
        };
        if n > 0 && v < floor {
            v = floor;
        }
        o.put(*k, v);
    }
    o
}

fn dists(o: &mut Obj, d: &IoDists, ios: u64) {
    const BATCH: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];
    const UNIT: [&str; 10] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
    ];
    const MS: [&str; 12] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    o.put(
        "iodepth_level",
        dist(
            &d.depth,
            ios,
            &["1", "2", "4", "8", "16", "32", ">=64"],
            0.1,
        ),
    );
    o.put(
        "iodepth_submit",
        dist(&d.submit, d.submit.iter().sum(), &BATCH, 0.1),
    );
    o.put(
        "iodepth_complete",
        dist(&d.complete, d.complete.iter().sum(), &BATCH, 0.1),
    );
    let lat = |from: usize, n: usize| d.lat.get(from..from + n).unwrap_or(&[]).to_vec();
    o.put("latency_ns", dist(&lat(0, 10), ios, &UNIT, 0.01));
    o.put("latency_us", dist(&lat(10, 10), ios, &UNIT, 0.01));
    o.put("latency_ms", dist(&lat(20, 12), ios, &MS, 0.01));
}

/// The job's own options as given (those for every job are in `global options`), with this
/// sweep point's values in fio's spelling.
fn job_options(r: &RunResult, j: &JobResult) -> Obj {
    let mut o = Obj::new();
    let Some(job) = r.options.jobs.get(j.group) else {
        return o.with("name", j.name.as_str());
    };
    let global = &r.options.global;
    for (k, v) in &job.given {
        if global.get(k) == Some(v) && k != "name" {
            continue;
        }
        match k.as_str() {
            "bs_sweep" => o.put("bs", sizes::label(&j.sizes)),
            "iodepth_sweep" => o.put("iodepth", j.iodepth.to_string()),
            _ => o.put(k.as_str(), v.as_str()),
        }
    }
    o
}

fn percentile_list(r: &RunResult, j: &JobResult) -> Vec<f64> {
    r.options
        .jobs
        .get(j.group)
        .and_then(|g| g.percentile_list.clone())
        .unwrap_or_else(|| FIO_PERCENTILES.to_vec())
}

pub(crate) fn job(
    r: &RunResult,
    p: &PointResult,
    j: &JobResult,
    members: &[usize],
    plus: bool,
) -> Obj {
    let pcts = percentile_list(r, j);
    let c = Ctx {
        percentiles: &pcts,
        plus,
    };
    let agg = |d: usize| rates(&p.merged[d], p.runtime_ns).1;
    let iv = r.options.interval_ns;
    // fio's CPU of a job is its own thread's over its run time; a group sums both.
    let run_ns: u64 = members.iter().map(|&m| p.jobs[m].runtime_ns).sum();
    let cpu = |ns: u64| {
        if run_ns > 0 {
            100.0 * ns as f64 / run_ns as f64
        } else {
            0.0
        }
    };
    let ios = j.dirs[0].ios + j.dirs[1].ios;
    let spec = r.options.jobs.get(j.group);
    let ramp = spec.map_or(0, |g| g.ramp_time_ns);
    // A trim job's IOs are its writes; fio reports them as trims.
    let write_or_trim = |trim: bool| {
        if trim == j.rw.trim() {
            dir(&j.dirs[1], j.runtime_ns, &j.intervals, 1, agg(1), iv, &c)
        } else {
            dir(&DirStats::default(), 0, &[], 0, 0.0, iv, &c)
        }
    };
    let mut o = Obj::new()
        .with("jobname", j.name.as_str())
        .with("groupid", j.groupid.unwrap_or(p.index))
        // fio's: a job that went on after errors (continue_on_error) reports its first.
        .with(
            "error",
            j.errors_continued.map_or(0, |e| e.first.max(0) as u64),
        )
        .with("eta", 0u64)
        .with(
            "elapsed",
            (ramp + j.runtime_ns).div_ceil(1_000_000_000).max(1),
        )
        .with("job options", job_options(r, j))
        .with(
            "read",
            dir(&j.dirs[0], j.runtime_ns, &j.intervals, 0, agg(0), iv, &c),
        )
        .with("write", write_or_trim(false))
        .with("trim", write_or_trim(true))
        .with(
            "sync",
            Obj::new()
                .with("total_ios", j.sync.ios)
                .with("lat_ns", lat(&j.sync.lat, true, true, &c)),
        )
        .with("job_runtime", j.runtime_ns / 1_000_000)
        .with("usr_cpu", cpu(j.thread_cpu.user_ns))
        .with("sys_cpu", cpu(j.thread_cpu.sys_ns))
        .with("ctx", j.thread_cpu.ctx)
        .with("majf", j.thread_cpu.majf)
        .with("minf", j.thread_cpu.minf);
    dists(&mut o, &j.dists, ios);
    // fio's: only with continue_on_error.
    if let Some(e) = &j.errors_continued {
        o.put("total_err", e.total);
        o.put("first_error", e.first.max(0) as u64);
    }
    // fio's units: the target in ns, the window in µs.
    match &j.latency_search {
        Some(l) => {
            o.put("latency_depth", l.depth);
            o.put("latency_target", l.target.target_ns);
            o.put("latency_percentile", l.target.percentile);
            o.put("latency_window", l.target.window_ns / 1000);
        }
        None => {
            o.put("latency_depth", j.iodepth);
            o.put("latency_target", 0u64);
            o.put("latency_percentile", 100.0);
            o.put("latency_window", 0u64);
        }
    }
    if let Some(ss) = &j.steadystate {
        o.put("steadystate", steadystate(ss));
    }
    o.put(
        "loadgen",
        J::V(json!({
            "point": p.index,
            "jobnum": j.jobnum,
            "jobs_merged": members.len(),
            "filename": j.filename,
            "rate_iops": j.rate_iops,
            "ramp_ios": {"read": j.ramp_ios[0], "write": j.ramp_ios[1]},
            "verify": j.verify,
            "process_cpu": p.cpu,
            "latency_search": j.latency_search,
        })),
    );
    o
}

/// fio's `steadystate` section: the window's samples oldest first, padded with zeros to
/// its length when it never filled, and their means over that length, as fio's.
fn steadystate(ss: &SteadyState) -> Obj {
    let pct = if ss.criterion.pct { "%" } else { "" };
    let pad = |v: &[u64]| -> Vec<u64> {
        let mut v = v.to_vec();
        v.resize((ss.dur_s as usize).max(v.len()), 0);
        v
    };
    let (iops, bw) = (pad(&ss.iops), pad(&ss.bw));
    let mean = |v: &[u64]| v.iter().sum::<u64>() / (v.len() as u64).max(1);
    Obj::new()
        .with("ss", ss.criterion.label())
        .with("duration", ss.dur_s)
        .with("attained", u64::from(ss.attained))
        .with("criterion", format!("{:.6}{pct}", ss.value))
        .with("max_deviation", ss.max_deviation)
        .with("slope", ss.slope)
        .with(
            "data",
            Obj::new()
                .with("bw_mean", mean(&bw))
                .with("iops_mean", mean(&iops))
                .with("iops", J::V(json!(iops)))
                .with("bw", J::V(json!(bw))),
        )
}

pub(crate) fn point(p: &PointResult) -> serde_json::Value {
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

/// ctime(3) of a Unix time, in local time, without the newline: "Wed Dec  2 00:37:30 2026".
pub(crate) fn ctime(secs: u64) -> String {
    let t = secs as libc::time_t;
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: ctime_r writes at most 26 bytes into the buffer, which holds 64.
    let p = unsafe { libc::ctime_r(&t, buf.as_mut_ptr()) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    s.to_string_lossy().trim_end().to_string()
}

pub fn render(r: &RunResult, s: &RunSettings, plus: bool) -> Obj {
    let mut jobs: Vec<J> = Vec::new();
    for p in &r.points {
        for (j, members) in entries(p, s.group_reporting) {
            jobs.push(job(r, p, &j, &members, plus).into());
        }
    }
    let mut o = Obj::new()
        .with("fio version", format!("loadgen-{}", r.version))
        .with("timestamp", r.started_unix_ms / 1000)
        .with("timestamp_ms", r.started_unix_ms)
        .with("time", ctime(r.started_unix_ms / 1000));
    if !r.options.global.is_empty() {
        let mut g = Obj::new();
        for (k, v) in &r.options.global {
            g.put(k.as_str(), v.as_str());
        }
        o.put("global options", g);
    }
    o.put("jobs", jobs);
    if !r.disk_util.is_empty() {
        let disks: Vec<J> = r
            .disk_util
            .iter()
            .map(|d| {
                Obj::new()
                    .with("name", d.name.as_str())
                    .with("read_ios", d.read_ios)
                    .with("write_ios", d.write_ios)
                    .with("read_merges", d.read_merges)
                    .with("write_merges", d.write_merges)
                    .with("read_ticks", d.read_ticks)
                    .with("write_ticks", d.write_ticks)
                    .with("in_queue", d.in_queue)
                    .with("util", d.util)
                    .into()
            })
            .collect();
        o.put("disk_util", disks);
    }
    o.put(
        "loadgen",
        J::V(json!({
            "version": r.version,
            "safety_probe_reads": r.safety_probe_reads,
            "points": r.points.iter().map(point).collect::<Vec<_>>(),
        })),
    );
    o
}
