//! `loadgen run`: options → plan → targets checked → sweep points run → report.

use std::io::Write;
use std::sync::Arc;

use crate::engine::{self, JobLive, JobSpec, Watcher, legs::LegsFactory};
use crate::error::Failure;
use crate::live_metrics::LiveMetrics;
use crate::options::parse::{Parsed, parse_args};
use crate::options::sweep::{self, Point};
use crate::options::{Plan, table, validate::validate};
use crate::outfile::OutFile;
use crate::progress::Progress;
use crate::record::Recorder;
use crate::report;
use crate::safety::{self, DeviceGuard};
use crate::stats::RunResult;
use crate::target::{self, Kind, Layout};
use crate::timeline::{DirInterval, TimelineRow};

/// Progress bar, live metrics and the run record, fed by the engine's collector.
struct Monitor {
    progress: Progress,
    metrics: Option<Arc<LiveMetrics>>,
    recorder: Option<Recorder>,
}

impl Watcher for Monitor {
    fn tick(&mut self, live: &[JobLive], elapsed_ns: u64) {
        self.progress.tick(live, elapsed_ns);
        if let Some(m) = &self.metrics {
            m.tick(live);
        }
    }
    fn row(&mut self, row: &TimelineRow, dirs: &[DirInterval; 2]) {
        if let Some(m) = &self.metrics {
            m.row(row, dirs);
        }
        if let Some(r) = &mut self.recorder {
            r.row(dirs);
        }
    }
    fn started(&mut self, measure_start_ns: u64) {
        if let Some(r) = &mut self.recorder {
            r.started(measure_start_ns);
        }
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The job threads of one point.
fn specs(plan: &Plan, layout: &Layout, point: &Point, run_id: u32, entropy: u64) -> Vec<JobSpec> {
    let ramp_ns = plan.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0);
    layout
        .threads
        .iter()
        .enumerate()
        .map(|(index, t)| {
            let job = &plan.jobs[t.group];
            let (bs, iodepth) = point.per_job[t.group];
            let base = fnv(&job.name) ^ (t.jobnum as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            JobSpec {
                index,
                name: job.name.clone(),
                group: t.group,
                jobnum: t.jobnum,
                path: layout.targets[t.target].path.clone(),
                region: t.region,
                bs,
                iodepth,
                rw: job.rw,
                read_pct: job.rw.read_pct(job.rwmixread),
                time_based: job.time_based,
                runtime_ns: job.runtime_ns,
                ramp_ns,
                rate_iops: job.rate_iops,
                direct: job.direct,
                verify: job.verify,
                seed: if job.randrepeat { base } else { base ^ entropy },
                run_id,
                interval_ns: plan.settings.interval_ns,
            }
        })
        .collect()
}

/// Runs `loadgen run` with its arguments; Ok is the exit status.
pub fn run(args: &[String], legs: Option<&LegsFactory>) -> Result<u8, Failure> {
    let plan = match parse_args(args).map_err(Failure::Usage)? {
        Parsed::Help => {
            let _ = std::io::stdout().write_all(table::help().as_bytes());
            return Ok(0);
        }
        Parsed::Plan(p) => *p,
    };
    validate(&plan).map_err(Failure::Usage)?;
    let points = sweep::points(&plan).map_err(Failure::Usage)?;
    let layout = target::resolve(&plan).map_err(Failure::Usage)?;
    target::check_memory(&layout, &points).map_err(Failure::Usage)?;

    let mut guards: Vec<DeviceGuard> = Vec::new();
    for t in &layout.targets {
        if t.kind == Kind::BlockDevice && t.written {
            guards.push(
                safety::check_block_device(&t.path, t.size, plan.settings.force_destroy_data)
                    .map_err(Failure::Usage)?,
            );
        }
    }
    let replicas = crate::replica::replicas::Replicas::new(&plan, &layout)
        .map_err(Failure::Usage)?
        .map(|r| r.factory());
    let legs = legs.or(replicas.as_ref());
    let metrics = match plan.settings.metrics_address {
        Some(addr) => Some(LiveMetrics::serve(addr).map_err(|e| {
            Failure::Usage(format!("--metrics-address={addr}: cannot listen: {e}"))
        })?),
        None => None,
    };
    // The report and the record are written at the end; their places are checked now.
    let output = match &plan.settings.output {
        Some(path) => {
            Some(OutFile::create(path).map_err(|e| Failure::Usage(format!("--output: {e}")))?)
        }
        None => None,
    };
    let recorder = Recorder::from_settings(&plan, &layout)?;
    // Everything is checked: from here on files may be created.
    target::prepare(&layout)?;
    engine::install_sigint();

    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let entropy = started.as_nanos() as u64 ^ ((std::process::id() as u64) << 32);
    let run_id = (entropy ^ (entropy >> 32)) as u32 | 1;
    let mut monitor = Monitor {
        progress: Progress::new(plan.settings.eta),
        metrics,
        recorder,
    };
    let mut results = Vec::with_capacity(points.len());
    for point in &points {
        let specs = specs(&plan, &layout, point, run_id, entropy);
        let planned_ns = specs
            .iter()
            .filter_map(|s| s.runtime_ns.map(|r| r + s.ramp_ns))
            .max();
        let planned_ios = specs
            .iter()
            .all(|s| !s.time_based)
            .then(|| specs.iter().map(|s| s.region / s.bs).sum());
        let label = if points.len() > 1 {
            format!("point {}/{}", point.index + 1, points.len())
        } else {
            "loadgen".to_string()
        };
        monitor.progress.begin(label, planned_ns, planned_ios);
        if let Some(m) = &monitor.metrics {
            m.begin_point(point.index);
        }
        if let Some(rec) = &mut monitor.recorder {
            rec.before_point();
        }
        let r = engine::run_point(
            point.index,
            specs,
            plan.settings.interval_ns,
            legs,
            &mut monitor,
        );
        monitor.progress.finish();
        if let Some(m) = &monitor.metrics {
            m.end_point();
        }
        if let Some(rec) = &mut monitor.recorder {
            rec.end_point(r.as_ref().map_or(0, |p| p.timeline.len()));
        }
        let r = r?;
        let failed = r.jobs.iter().any(|j| j.error.is_some());
        results.push(r);
        if failed {
            break;
        }
        if engine::interrupted() {
            crate::note!("loadgen: interrupted; reporting what ran");
            break;
        }
    }
    let safety_probe_reads = guards.iter().map(|g| g.probe_reads).sum();
    drop(guards);

    let result = RunResult {
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_ms: started.as_millis() as u64,
        safety_probe_reads,
        plan: plan.clone(),
        points: results,
    };
    // A record that cannot be written fails the run, after the report is out.
    let recorded = match monitor.recorder.take() {
        Some(rec) => rec.write(&result),
        None => Ok(()),
    };
    // A job that failed (an IO error, a replica) fails the run, with no report; its run
    // record holds what was measured until then, for `loadgen analyze`.
    if let Some(e) = result
        .points
        .iter()
        .flat_map(|p| &p.jobs)
        .find_map(|j| j.error.as_ref())
    {
        if let Err(r) = &recorded {
            crate::note!("loadgen: error: {}", r.message());
        }
        return Err(Failure::Runtime(anyhow::anyhow!("{e}")));
    }
    let text = report::render(&result, &plan.settings);
    match output {
        Some(out) => out
            .commit(|w| w.write_all(text.as_bytes()))
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("--output: {e}")))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Failure::Runtime(anyhow::anyhow!("writing the report: {e}")))?;
        }
    }
    recorded?;
    let bad = result.corruptions();
    if bad > 0 {
        for p in &result.points {
            for j in &p.jobs {
                for c in j.verify.iter().flat_map(|v| &v.corruptions) {
                    crate::note!(
                        "loadgen: verify: {} offset {} ({:#x}): {}",
                        j.filename,
                        c.offset,
                        c.offset,
                        c.problem
                    );
                }
            }
        }
        return Err(Failure::Corrupt(bad));
    }
    Ok(if engine::interrupted() { 130 } else { 0 })
}
