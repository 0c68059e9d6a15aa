//! `loadgen run`: options → plan → targets checked → sweep points run → report.

use std::sync::Arc;

use crate::engine::content::WorkingSet;
use crate::engine::minrate::MinRate;
use crate::engine::workload::OffsetRule;
use crate::engine::{self, FileRegion, JobLive, JobSpec, Think, Watcher, legs::LegsFactory};
use crate::error::Failure;
use crate::live::metrics::LiveMetrics;
use crate::live::progress::Progress;
use crate::options::parse::{Parsed, parse_args};
use crate::options::sweep::{self, Point};
use crate::options::{
    ExitWhat, IoEngine, Plan, RateProcess, RunSettings, table, validate::validate,
};
use crate::recording::Recorder;
use crate::results::latency_search::Target as LatencyTarget;
use crate::results::stats::{PointResult, RunResult};
use crate::results::timeline::{DirInterval, TimelineRow};
use crate::results::{given, report};
use crate::sampling::diskstats::DiskWatch;
use crate::target::safety::{self, DeviceGuard};
use crate::target::{self, Layout, Placement, TargetKind};

/// Progress bar, live metrics, the run record and interim reports, fed by the engine's
/// collector.
struct Monitor {
    progress: Progress,
    metrics: Option<Arc<LiveMetrics>>,
    recorder: Option<Recorder>,
    /// `--status-interval`: what an interim report needs, and how often.
    status: Option<(RunResult, RunSettings, u64)>,
    out: report::Output,
}

impl Watcher for Monitor {
    fn tick(&mut self, live: &[JobLive], elapsed_ns: u64) {
        self.progress.tick(live, elapsed_ns);
        if let Some(m) = &self.metrics {
            m.tick(live);
        }
        self.judge();
    }
    fn row(&mut self, row: &TimelineRow, dirs: &[DirInterval; 2]) {
        if let Some(m) = &self.metrics {
            m.row(row, dirs);
        }
        // The verdict comes at the tick that follows every row.
        if let Some(r) = &mut self.recorder {
            r.row(row, dirs);
        }
    }
    fn started(&mut self, measure_start_ns: u64) {
        if let Some(r) = &mut self.recorder {
            r.started(measure_start_ns);
        }
    }
    fn status_interval_ns(&self) -> Option<u64> {
        self.status.as_ref().map(|s| s.2)
    }
    /// An interim report, in the run's formats: the results so far of the running point.
    fn status(&mut self, partial: &PointResult) {
        let Some((run, settings, _)) = &mut self.status else {
            return;
        };
        run.points = vec![partial.clone()];
        let text = report::render(run, settings);
        if let Err(e) = self.out.write(&text) {
            crate::note!("loadgen: {e}");
        }
    }
}

impl Monitor {
    /// A live verdict as soon as the agents have closed another interval.
    fn judge(&mut self) {
        if let Some(v) = self.recorder.as_mut().and_then(Recorder::judge) {
            self.progress.verdict(&v);
            if let Some(m) = &self.metrics {
                m.verdict(&v);
            }
        }
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The job threads of one point, of the jobs of one group (`group`: their indices).
fn specs(run: &Run<'_>, point: &Point, group: &[usize]) -> Vec<JobSpec> {
    let (plan, layout, placements) = (run.plan, run.layout, run.placements);
    let (points, run_id, entropy) = (run.points.len(), run.run_id, run.entropy);
    let ramp_ns = group
        .iter()
        .map(|&j| plan.jobs[j].ramp_time_ns)
        .max()
        .unwrap_or(0);
    let specs = layout
        .threads
        .iter()
        .enumerate()
        .filter(|(_, t)| group.contains(&t.group))
        .enumerate()
        .map(|(index, (thread, t))| {
            let job = &plan.jobs[t.group];
            let place = &placements[thread];
            let shape = &point.per_job[t.group];
            let used = job.directions();
            let bs = (0..2)
                .filter(|&d| used[d])
                .map(|d| shape.sizes[d].min())
                .min()
                .unwrap_or(4096);
            let rates = [0, 1].map(|d| {
                job.rate[d]
                    .or_else(|| job.rate_iops[d].map(|n| n * shape.sizes[d].min()))
                    .filter(|_| used[d])
            });
            let base = fnv(&job.name) ^ (t.jobnum as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            // After an earlier job's `fill_device`: the region is what it wrote, in whole
            // blocks, as the file is now.
            let at_start = |ti: usize, offset: u64| {
                let size = std::fs::metadata(&layout.targets[ti].open).map_or(0, |m| m.len());
                size.saturating_sub(offset) / bs.max(1) * bs.max(1)
            };
            let files: Vec<FileRegion> = place
                .files
                .iter()
                .map(|&(ti, offset, len)| FileRegion {
                    path: layout.targets[ti].path.clone(),
                    open: layout.targets[ti].open.clone(),
                    offset,
                    len: if place.sized_at_start {
                        at_start(ti, offset)
                    } else {
                        len
                    },
                })
                .collect();
            let io_bytes = if place.sized_at_start {
                let total: u64 = files.iter().map(|f| f.len).sum();
                let io = match job.io_size {
                    Some(crate::options::values::SizeSpec::Bytes(b)) => b,
                    Some(crate::options::values::SizeSpec::Percent(p)) => total * p as u64 / 100,
                    None => total,
                };
                io.saturating_mul(job.loops as u64)
            } else {
                place.io_bytes
            };
            JobSpec {
                index,
                name: job.name.clone(),
                group: t.group,
                jobnum: t.jobnum,
                files,
                io_bytes,
                number_ios: job.number_ios,
                // fio: 0 means the whole depth.
                batch_submit: match job.iodepth_batch_submit {
                    0 => shape.iodepth,
                    n => n,
                },
                distribution: job.random_distribution.clone(),
                fsync: job.fsync,
                fdatasync: job.fdatasync,
                end_fsync: job.end_fsync,
                engine: job.ioengine,
                think: Think {
                    ns: job.thinktime_ns,
                    spin_ns: job.thinktime_spin_ns,
                    blocks: job.thinktime_blocks,
                },
                bs,
                sizes: shape.sizes.clone(),
                // The synchronous engines do one IO at a time, as fio caps them.
                iodepth: if !job.ioengine.synchronous() {
                    shape.iodepth
                } else {
                    1
                },
                rw: job.rw,
                read_pct: job.rw.read_pct(job.rwmixread),
                time_based: job.time_based,
                runtime_ns: job.runtime_ns,
                ramp_ns,
                rate_iops: job.rate_iops,
                rates,
                poisson: job.rate_process == RateProcess::Poisson,
                direct: job.direct,
                verify: job.verify,
                verify_pattern: job.verify_pattern.clone(),
                do_verify: job.do_verify,
                verify_backlog: job.verify_backlog,
                verify_dump: job.verify_dump,
                errors: job.errors.clone(),
                create_on_open: job.layout.create_on_open,
                verify_interval: job.verify_interval.unwrap_or(0),
                fill_device: job.fill_device,
                data: job.data.clone(),
                working_set: None,
                seed: if job.randrepeat { base } else { base ^ entropy },
                offsets: OffsetRule {
                    seq_add: job.seq_add,
                    seq_nr: job.seq_nr,
                    identical: job.seq_identical,
                    align: job.blockalign,
                    files: job.file_service,
                    lfsr: job.lfsr,
                    zones: job.zones.zones().ok().flatten(),
                },
                start_delay_ns: {
                    // A range: each thread draws its own delay, as fio's.
                    let (lo, hi) = job.startdelay_ns;
                    let mut rng = crate::engine::rng::Rng::new(base ^ 0x5a17_de1a);
                    lo + rng.below((hi - lo).saturating_add(1))
                },
                groupid: run.groupids.as_ref().map(|g| g[t.group]),
                // fio's `exitall` holds for every job once one has it.
                exit: plan.jobs.iter().any(|j| j.exitall).then_some(job.exit_what),
                numa_cpu_nodes: job.numa_cpu_nodes.clone(),
                numa_mem_policy: job.numa_mem_policy.clone(),
                prio: job.prio.clone(),
                flow: (job.flow > 0).then(|| {
                    (
                        job.flow_id,
                        job.flow,
                        job.flow_sleep_us.saturating_mul(1000),
                    )
                }),
                // Only the directions the job does are judged, as fio's.
                min_rate: MinRate {
                    bytes: [0, 1].map(|d| job.rate_min[d].filter(|_| used[d])),
                    iops: [0, 1].map(|d| job.rate_iops_min[d].filter(|_| used[d])),
                    cycle_ns: job.rate_cycle_ms.saturating_mul(1_000_000),
                },
                // With group_reporting a reporting group is judged as one, as fio's.
                steadystate: (job.ss_dur_s > 0).then(|| {
                    let settings = record::steadystate::Settings {
                        criterion: job.ss,
                        dur_s: job.ss_dur_s,
                        ramp_ns: job.ss_ramp_ns,
                    };
                    let key = if plan.settings.group_reporting {
                        run.groupids.as_ref().map_or(0, |g| g[t.group])
                    } else {
                        usize::MAX - index
                    };
                    (settings, key)
                }),
                run_id,
                interval_ns: plan.settings.interval_ns,
                logs: {
                    let mut l = job.logs.clone();
                    for stem in [&mut l.lat, &mut l.bw, &mut l.iops, &mut l.hist]
                        .into_iter()
                        .flatten()
                    {
                        if stem.is_empty() {
                            *stem = job.name.clone();
                        }
                    }
                    l
                },
                status: plan.settings.status_interval_ns.is_some(),
                latency: job.latency_target_ns.map(|target_ns| LatencyTarget {
                    target_ns,
                    window_ns: job.latency_window_ns,
                    percentile: job.latency_percentile,
                    run: job.latency_run,
                }),
                // fio numbers its logs by job thread from 1; a sweep adds the point.
                log_suffix: if points > 1 {
                    format!("{}.p{}", thread + 1, point.index + 1)
                } else {
                    (thread + 1).to_string()
                },
            }
        })
        .collect::<Vec<JobSpec>>();
    with_working_sets(specs)
}

/// fio's dedupe working sets: `dedupe_working_set_percentage` of each job's region, in its
/// smallest writes; the jobs with `dedupe_global` running together share theirs.
fn with_working_sets(mut specs: Vec<JobSpec>) -> Vec<JobSpec> {
    {
        let blocks = |s: &JobSpec| {
            let len = s.files.first().map_or(0, |f| f.len);
            len * s.data.working_set_pct as u64 / 100 / s.sizes[1].min().max(1)
        };
        let uses = |s: &JobSpec| s.data.dedupe > 0 && s.data.working_set;
        let global: Vec<u64> = specs
            .iter()
            .filter(|s| uses(s) && s.data.global)
            .map(blocks)
            .collect();
        let mut me = 0;
        for s in specs.iter_mut().filter(|s| uses(s)) {
            s.working_set = Some(if s.data.global {
                me += 1;
                WorkingSet {
                    blocks: global.clone(),
                    me: me - 1,
                }
            } else {
                WorkingSet {
                    blocks: vec![blocks(s)],
                    me: 0,
                }
            });
        }
    }
    specs
}

/// Runs `loadgen run` with its arguments; Ok is the exit status.
pub fn run(args: &[String], legs: Option<&LegsFactory>) -> Result<u8, Failure> {
    let plan = match parse_args(args).map_err(Failure::Usage)? {
        Parsed::Help => {
            let _ = std::io::Write::write_all(&mut std::io::stdout(), table::help().as_bytes());
            return Ok(0);
        }
        Parsed::Plan(p) => *p,
    };
    validate(&plan).map_err(Failure::Usage)?;
    if plan.settings.parse_only {
        return Ok(0);
    }
    if !plan.settings.clients.is_empty() {
        return crate::cluster::controller::run(args, &plan);
    }
    run_plan(plan, legs, None)
}

/// The NUMA nodes the jobs name exist on this machine (checked when the run starts, as
/// fio's, so that `--parse-only` takes a job file written for another machine).
fn check_numa_nodes(plan: &Plan) -> Result<(), String> {
    use crate::options::MemPolicy;
    for j in &plan.jobs {
        if let Some(n) = &j.numa_cpu_nodes {
            engine::numa::check("numa_cpu_nodes", n).map_err(|e| format!("job {}: {e}", j.name))?;
        }
        let nodes = match &j.numa_mem_policy {
            Some(MemPolicy::Prefer(n)) => vec![*n],
            Some(MemPolicy::Bind(n) | MemPolicy::Interleave(n)) => n.clone(),
            _ => Vec::new(),
        };
        engine::numa::check("numa_mem_policy", &nodes)
            .map_err(|e| format!("job {}: {e}", j.name))?;
    }
    Ok(())
}

/// `loadgen job-order`: the job order `loadgen serve` checked and hands over on stdin, run
/// with the targets it opened (see `serve::jobs::order`).
pub fn job_order() -> Result<u8, Failure> {
    let order = crate::serve::jobs::order::read()?;
    let preopened = order.preopened();
    run_plan(order.plan, None, Some(&preopened))
}

/// Runs a checked plan. `preopened`: the targets the job service opened for a job order,
/// which the job uses as they are, resolving no name.
pub fn run_plan(
    plan: Plan,
    legs: Option<&LegsFactory>,
    preopened: Option<&[target::Preopened]>,
) -> Result<u8, Failure> {
    note_synchronous_depths(&plan);
    check_numa_nodes(&plan).map_err(Failure::Usage)?;
    let points = sweep::points(&plan).map_err(Failure::Usage)?;
    let (layout, placements) = match preopened {
        None => target::resolve(&plan),
        Some(p) => target::resolve_preopened(&plan, p),
    }
    .map_err(Failure::Usage)?;
    target::check_space(&layout, preopened.is_some()).map_err(Failure::Usage)?;
    target::check_memory(&layout, &points).map_err(Failure::Usage)?;
    let guards = guard_block_devices(&plan, &layout)?;
    let replicas = crate::replication::replicas::Replicas::new(&plan, &layout)
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
    let output = report::Output::new(plan.settings.output.as_deref())
        .map_err(|e| Failure::Usage(format!("--output: {e}")))?;
    let recorder = Recorder::from_settings(&plan, &layout)?;
    // Everything is checked: from here on files may be created.
    target::prepare(&layout)?;
    engine::install_sigint();
    if plan.settings.start_gate {
        crate::cluster::gate::wait()?;
    }

    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let entropy = started.as_nanos() as u64 ^ ((std::process::id() as u64) << 32);
    let run_id = (entropy ^ (entropy >> 32)) as u32 | 1;
    let mut monitor = Monitor {
        progress: Progress::new(plan.settings.eta),
        metrics,
        recorder,
        status: plan.settings.status_interval_ns.map(|every| {
            let run = RunResult {
                version: env!("CARGO_PKG_VERSION").to_string(),
                started_unix_ms: started.as_millis() as u64,
                safety_probe_reads: 0,
                options: given::options(&plan),
                points: Vec::new(),
                disk_util: Vec::new(),
            };
            (run, plan.settings.clone(), every)
        }),
        out: output,
    };
    let disks = DiskWatch::start(
        layout
            .targets
            .iter()
            .filter(|t| t.kind != TargetKind::Null)
            .map(|t| t.open.as_path()),
    );
    let groups = crate::options::groups::groups(&plan).map_err(Failure::Usage)?;
    let ids = crate::options::groups::groupids(&plan);
    let groupids = (groups.len() > 1 || ids.iter().any(|&g| g > 0)).then_some(ids);
    let run = Run {
        groupids,
        plan: &plan,
        layout: &layout,
        placements: &placements,
        points: &points,
        run_id,
        entropy,
    };
    // The jobs between walls (stonewall) run together, one result each, one wall after the
    // other; each job carries fio's groupid (`new_group` starts one without a wall). A run
    // with groups has no sweep.
    let mut steps: Vec<(Point, &[usize])> = Vec::new();
    for p in &points {
        for (g, jobs) in groups.iter().enumerate() {
            let mut p = p.clone();
            if groups.len() > 1 {
                p.index = g;
            }
            steps.push((p, jobs.as_slice()));
        }
    }
    let mut results = Vec::with_capacity(steps.len());
    let mut ended = false;
    for (point, group) in &steps {
        if ended {
            // fio reports the jobs `exit_what=all` kept from starting, with no IO.
            results.push(engine::not_run(point.index, &specs(&run, point, group)));
            continue;
        }
        let r = run.point(point, group, steps.len(), legs, &mut monitor)?;
        let failed = r.jobs.iter().any(|j| j.error.is_some());
        // fio's `exit_what=all`: a job of this group with it ended every job, so no later
        // group starts.
        let exit_all = plan.jobs.iter().any(|j| j.exitall)
            && group
                .iter()
                .any(|&j| plan.jobs[j].exit_what == ExitWhat::All);
        results.push(r);
        if failed {
            break;
        }
        ended = exit_all;
        if engine::interrupted() {
            crate::note!("loadgen: interrupted; reporting what ran");
            break;
        }
    }
    unlink_files(&plan, &layout);
    let safety_probe_reads = guards.iter().map(|g| g.probe_reads).sum();
    drop(guards);

    let result = RunResult {
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_ms: started.as_millis() as u64,
        safety_probe_reads,
        options: given::options(&plan),
        points: results,
        disk_util: disks.finish(),
    };
    finish(&result, &plan.settings, &mut monitor)
}

/// fio's `unlink`: the files of the jobs that ask for it are removed once the run is over
/// (regular files only, never a device; `ioengine=null` has none).
fn unlink_files(plan: &Plan, layout: &Layout) {
    let mut done: Vec<usize> = Vec::new();
    for t in &layout.threads {
        let job = &plan.jobs[t.group];
        if !job.unlink || job.ioengine == IoEngine::Null {
            continue;
        }
        for path in job.files_of(t.jobnum) {
            let real = |x: &&target::Target| x.path == path && x.kind != TargetKind::Null;
            let Some(ti) = layout.targets.iter().position(|x| real(&x)) else {
                continue;
            };
            let target = &layout.targets[ti];
            if target.kind != TargetKind::File || done.contains(&ti) {
                continue;
            }
            done.push(ti);
            if let Err(e) = std::fs::remove_file(&target.open)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                crate::note!("loadgen: cannot unlink {}: {e}", target.path.display());
            }
        }
    }
}

/// As fio, a synchronous engine runs one IO at a time whatever the iodepth; said once.
fn note_synchronous_depths(plan: &Plan) {
    for j in &plan.jobs {
        if j.ioengine.synchronous() && j.depths().iter().any(|&d| d > 1) {
            if j.ioengine == IoEngine::Null {
                crate::note!(
                    "loadgen: note: job {}: ioengine null completes each IO as it is issued, so iodepth is capped at 1",
                    j.name
                );
                continue;
            }
            crate::note!(
                "loadgen: note: job {}: ioengine {} is synchronous, so iodepth is capped at 1 (as in fio)",
                j.name,
                j.given.get("ioengine").map_or("sync", String::as_str)
            );
        }
    }
}

/// The safety checks of every block device the run writes, each kept for the run.
fn guard_block_devices(plan: &Plan, layout: &Layout) -> Result<Vec<DeviceGuard>, Failure> {
    let mut guards: Vec<DeviceGuard> = Vec::new();
    for t in &layout.targets {
        if t.kind == TargetKind::BlockDevice && t.written {
            guards.push(
                safety::check_block_device(
                    &t.path,
                    &t.open,
                    t.size,
                    plan.settings.force_destroy_data,
                )
                .map_err(Failure::Usage)?,
            );
        }
    }
    Ok(guards)
}

/// What every sweep point of one run shares.
struct Run<'a> {
    /// fio's `groupid` of each job of the plan, when the run has groups.
    groupids: Option<Vec<usize>>,
    plan: &'a Plan,
    layout: &'a Layout,
    placements: &'a [Placement],
    points: &'a [Point],
    run_id: u32,
    entropy: u64,
}

impl Run<'_> {
    /// Runs one sweep point, shown and recorded as it runs.
    /// Runs the jobs of `group` at one sweep point; `n`: the steps of the run (sweep points
    /// or groups).
    fn point(
        &self,
        point: &Point,
        group: &[usize],
        n: usize,
        legs: Option<&LegsFactory>,
        monitor: &mut Monitor,
    ) -> Result<PointResult, Failure> {
        let specs = specs(self, point, group);
        let planned_ns = specs
            .iter()
            .filter_map(|s| s.runtime_ns.map(|r| r + s.ramp_ns))
            .max();
        let planned_ios = specs
            .iter()
            .all(|s| !s.time_based)
            .then(|| specs.iter().map(|s| s.io_bytes / s.bs.max(1)).sum());
        let slots = specs.iter().map(|s| s.iodepth).sum();
        let label = if n > 1 {
            format!("point {}/{}", point.index + 1, n)
        } else {
            "loadgen".to_string()
        };
        monitor.progress.begin(label, planned_ns, planned_ios);
        if let Some(m) = &monitor.metrics {
            m.begin_point(point.index);
        }
        if let Some(rec) = &mut monitor.recorder {
            rec.before_point(slots);
        }
        let r = engine::run_point(
            point.index,
            specs,
            self.plan.settings.interval_ns,
            legs,
            monitor,
        );
        monitor.progress.finish();
        if let Some(m) = &monitor.metrics {
            m.end_point();
        }
        if let Some(rec) = &mut monitor.recorder {
            rec.end_point(r.as_ref().map_or(0, |p| p.timeline.len()));
        }
        let mut r = r?;
        if let Some(rec) = &monitor.recorder {
            rec.verdicts_into(&mut r.timeline);
        }
        Ok(r)
    }
}

/// The run's end: its record, its report, and its exit status.
fn finish(
    result: &RunResult,
    settings: &RunSettings,
    monitor: &mut Monitor,
) -> Result<u8, Failure> {
    // A record that cannot be written fails the run, after the report is out.
    let recorded = match monitor.recorder.take() {
        Some(rec) => rec.write(result),
        None => Ok(()),
    };
    // A job that failed (an IO error, a replica) fails the run, with no report; its run
    // record holds what was measured until then, for `stornet analyze`.
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
    let text = report::render(result, settings);
    monitor
        .out
        .write(&text)
        .and_then(|()| monitor.out.finish())
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("{e}")))?;
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
