//! The IO engine: one thread per job, each with its own io_uring, registered file and
//! buffers (`job`), started together by a gate; the calling thread collects interval
//! samples into the timeline, samples CPU, and feeds the progress bar and live metrics.

pub mod buffers;
pub mod content;
pub mod distribution;
pub mod flow;
pub mod iolog;
pub mod job;
pub mod latency_target;
pub mod legs;
pub mod minrate;
pub mod numa;
pub mod pacing;
pub mod prio;
pub mod ring;
pub mod rng;
pub mod steadystate;
pub mod syncio;
pub mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::clock;
use crate::cpu;
use crate::options::distribution::Distribution;
use crate::options::sizes::SizeDist;
use crate::options::{ExitWhat, IoEngine, MemPolicy, Rw};
use crate::results::stats::{DirStats, JobResult, PointResult};
use crate::results::timeline::{DirInterval, IntervalSample, TimelineBuilder, TimelineRow};
use legs::LegsFactory;

/// Everything one job thread needs.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// Position of the thread in the point (0..threads).
    pub index: usize,
    pub name: String,
    pub group: usize,
    pub jobnum: u32,
    /// The files, each with the job's region in it.
    pub files: Vec<FileRegion>,
    /// Bytes to transfer when not time-based (`io_size` × `loops`).
    pub io_bytes: u64,
    /// Stop after this many IOs (`number_ios`).
    pub number_ios: Option<u64>,
    /// IOs prepared before they are submitted together (`iodepth_batch_submit`, ≥ 1).
    pub batch_submit: u32,
    pub distribution: Distribution,
    /// fsync / fdatasync after every N writes (0: never); fsync at the end.
    pub fsync: u32,
    pub fdatasync: u32,
    pub end_fsync: bool,
    pub engine: IoEngine,
    /// Pause of `thinktime_ns` (the first `spin_ns` of it spinning) after every `blocks` IOs.
    pub think: Think,
    /// fio's interval logs, and the part of their names after the stem (`1`, `2`, …).
    pub logs: crate::options::LogOptions,
    pub log_suffix: String,
    /// `latency_target`: search for the highest depth that meets it (up to `iodepth`).
    pub latency: Option<latency_target::Target>,
    /// Interim reports are asked for (`--status-interval`): intervals also carry slat and
    /// lat.
    pub status: bool,
    /// The job's IO size in reports (its smallest).
    pub bs: u64,
    /// IO sizes of reads and writes.
    pub sizes: [SizeDist; 2],
    pub iodepth: u32,
    pub rw: Rw,
    pub read_pct: u8,
    pub time_based: bool,
    pub runtime_ns: Option<u64>,
    pub ramp_ns: u64,
    /// `rate_iops` as given, for reports.
    pub rate_iops: [Option<u64>; 2],
    /// Bytes per second of reads and writes (None: unlimited).
    pub rates: [Option<u64>; 2],
    /// `rate_process=poisson`.
    pub poisson: bool,
    pub direct: bool,
    pub verify: bool,
    /// fio's `verify_pattern`, `do_verify`, `verify_backlog`.
    pub verify_pattern: Option<Vec<u8>>,
    pub do_verify: bool,
    pub verify_backlog: Option<u64>,
    pub verify_dump: bool,
    /// fio's `continue_on_error`, `ignore_error`, `error_dump`, `verify_fatal`.
    pub errors: crate::options::errors::ErrorOptions,
    /// fio's `create_on_open`: the job's files are created when it opens them.
    pub create_on_open: bool,
    /// fio's `verify_interval` (0: one header per block).
    pub verify_interval: u64,
    /// fio's `fill_device`: ENOSPC on a write ends the workload without an error.
    pub fill_device: bool,
    /// fio's options for the data written (not used with --verify, which writes its own).
    pub data: crate::options::data::DataOptions,
    /// `dedupe_mode=working_set`: the working set this job draws duplicates from.
    pub working_set: Option<content::WorkingSet>,
    pub seed: u64,
    /// fio's `rw=…:N`, `rw_sequencer`, `blockalign`.
    pub offsets: workload::OffsetRule,
    /// `startdelay`: this thread starts this long after its group.
    pub start_delay_ns: u64,
    /// fio's `groupid` when the run has groups (None: every job of the point is one).
    pub groupid: Option<usize>,
    /// `exitall` (on any job of the run, as fio's): when this job ends, its `exit_what`
    /// ends others.
    pub exit: Option<ExitWhat>,
    /// `numa_cpu_nodes`, `numa_mem_policy`: set on the job thread before it allocates.
    pub numa_cpu_nodes: Option<Vec<u32>>,
    pub numa_mem_policy: Option<MemPolicy>,
    /// fio's `prio`, `prioclass`, `cmdprio*`, `log_prio`.
    pub prio: crate::options::prio::PrioOptions,
    /// fio's `flow`: (flow id, weight, flow_sleep in ns) when the job has a weight.
    pub flow: Option<(u32, u64, u64)>,
    /// `rate_min`, `rate_iops_min`, `rate_cycle`.
    pub min_rate: minrate::MinRate,
    /// fio's `steadystate`, `ss_dur`, `ss_ramp`, and the key it is judged under: threads
    /// with one key (a reporting group, with group_reporting) are judged together.
    pub steadystate: Option<(record::steadystate::Settings, usize)>,
    pub run_id: u32,
    pub interval_ns: u64,
}

/// One file of a job and the region of it the job uses.
#[derive(Clone, Debug)]
pub struct FileRegion {
    pub path: PathBuf,
    /// What is opened (see `target::Target::open`).
    pub open: PathBuf,
    pub offset: u64,
    pub len: u64,
}

/// fio's `thinktime`, `thinktime_spin`, `thinktime_blocks`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Think {
    pub ns: u64,
    pub spin_ns: u64,
    pub blocks: u32,
}

impl JobSpec {
    /// The files' names, as fio writes a list (`a:b`).
    pub fn filename(&self) -> String {
        self.files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }
}

pub enum Msg {
    Interval(usize, Box<IntervalSample>),
    WorkloadDone(usize),
    Done(usize, Box<Result<JobResult>>),
}

/// IOs and bytes a job has completed so far (ramp included), for progress and metrics.
#[derive(Default)]
pub struct JobLive {
    ios: [AtomicU64; 2],
    bytes: [AtomicU64; 2],
}

impl JobLive {
    /// Only the job's own thread writes, so plain stores suffice.
    pub fn publish(&self, dir: usize, ios: u64, bytes: u64) {
        self.ios[dir].store(ios, Ordering::Relaxed);
        self.bytes[dir].store(bytes, Ordering::Relaxed);
    }
    pub fn ios(&self, dir: usize) -> u64 {
        self.ios[dir].load(Ordering::Relaxed)
    }
    pub fn bytes(&self, dir: usize) -> u64 {
        self.bytes[dir].load(Ordering::Relaxed)
    }
}

/// Lets every job set up its ring first and then start at the same instant.
#[derive(Default)]
pub struct StartGate {
    state: Mutex<(usize, Option<u64>, bool)>,
    cv: Condvar,
}

impl StartGate {
    /// Called by a job when it is ready; returns the start time, or None if the run was
    /// called off.
    pub fn ready_wait(&self) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += 1;
        self.cv.notify_all();
        while s.1.is_none() && !s.2 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.2 { None } else { s.1 }
    }
    fn wait_ready(&self, n: usize, timeout: Duration) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = self
            .cv
            .wait_timeout_while(s, timeout, |s| s.0 < n && !s.2)
            .unwrap_or_else(|e| e.into_inner());
        s.0 >= n
    }
    fn open(&self, t0: u64) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = Some(t0);
        self.cv.notify_all();
    }
    fn abort(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.cv.notify_all();
    }
}

/// State shared by the job threads of one point and the collector.
pub struct Shared {
    pub gate: StartGate,
    pub live: Vec<JobLive>,
    stop: AtomicBool,
    /// Jobs told to end by another's `exitall` (`exit_what=group`), and each job's group.
    job_stop: Vec<AtomicBool>,
    groupids: Vec<Option<usize>>,
    /// fio's flows (`flow_id`) of the point's jobs.
    pub flows: Vec<flow::Flow>,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Ctrl-C stops the run gracefully: IOs in flight complete and the report covers what ran.
pub fn install_sigint() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

impl Shared {
    /// Whether job thread `index` is to end.
    pub fn stopped(&self, index: usize) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.job_stop[index].load(Ordering::Relaxed)
            || interrupted()
    }

    /// fio's `exitall` as job thread `index` ends: `group` ends the jobs of its reporting
    /// group, `stonewall` and `all` every job running (`all` also every later one: the run
    /// leaves out the groups after, see `run`).
    pub fn exit(&self, index: usize, what: ExitWhat) {
        match what {
            ExitWhat::Group => {
                let g = self.groupids[index];
                for (stop, _) in self
                    .job_stop
                    .iter()
                    .zip(&self.groupids)
                    .filter(|(_, o)| **o == g)
                {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            ExitWhat::Stonewall | ExitWhat::All => self.stop.store(true, Ordering::Relaxed),
        }
    }
}

/// What the collector tells the outside while a point runs.
pub trait Watcher {
    /// About every 200 ms, with each job's live counters and the time since the start.
    fn tick(&mut self, live: &[JobLive], elapsed_ns: u64);
    /// Each finished timeline row, with its merged interval histograms.
    fn row(&mut self, row: &TimelineRow, dirs: &[DirInterval; 2]);
    /// The measured part (after the ramp) starts at `measure_start_ns` on the monotonic
    /// clock: interval `k` of the timeline begins `k` intervals later.
    fn started(&mut self, _measure_start_ns: u64) {}
    /// With `--status-interval`: every `status_interval_ns` the point's results so far.
    fn status(&mut self, _partial: &PointResult) {}
    fn status_interval_ns(&self) -> Option<u64> {
        None
    }
}

/// Results so far of the jobs of a point, from the intervals they handed over.
struct SoFar {
    jobs: Vec<JobResult>,
}

impl SoFar {
    fn new(specs: &[JobSpec]) -> SoFar {
        SoFar {
            jobs: specs
                .iter()
                .map(|s| JobResult {
                    name: s.name.clone(),
                    group: s.group,
                    groupid: s.groupid,
                    jobnum: s.jobnum,
                    filename: s.filename(),
                    rw: s.rw,
                    bs: s.bs,
                    sizes: s.sizes.clone(),
                    iodepth: s.iodepth,
                    rate_iops: s.rate_iops,
                    dirs: Default::default(),
                    ramp_ios: [0, 0],
                    runtime_ns: 0,
                    verify: None,
                    dists: Default::default(),
                    intervals: Vec::new(),
                    thread_cpu: Default::default(),
                    sync: Default::default(),
                    latency_search: None,
                    steadystate: None,
                    errors_continued: None,
                    error: None,
                })
                .collect(),
        }
    }

    fn add(&mut self, job: usize, s: &IntervalSample) {
        let j = &mut self.jobs[job];
        j.runtime_ns += s.covered_ns;
        j.intervals.push(crate::results::stats::IntervalCount {
            covered_ns: s.covered_ns,
            ios: [s.dirs[0].ios, s.dirs[1].ios],
            bytes: [s.dirs[0].bytes, s.dirs[1].bytes],
        });
        for (d, i) in j.dirs.iter_mut().zip(&s.dirs) {
            d.ios += i.ios;
            d.bytes += i.bytes;
            d.slat.merge(&i.slat);
            d.clat.merge(&i.clat);
            d.lat.merge(&i.lat);
            d.total.merge(&i.total);
        }
    }

    fn point(&self, index: usize, timeline: &[TimelineRow], cpu: cpu::CpuUsage) -> PointResult {
        let mut merged: [DirStats; 2] = Default::default();
        for j in &self.jobs {
            merged[0].merge(&j.dirs[0]);
            merged[1].merge(&j.dirs[1]);
        }
        PointResult {
            index,
            runtime_ns: self.jobs.iter().map(|j| j.runtime_ns).max().unwrap_or(0),
            jobs: self.jobs.clone(),
            merged,
            timeline: timeline.to_vec(),
            cpu,
        }
    }
}

/// The result of a group none of whose jobs started (fio's `exit_what=all` ended the run
/// before it): each job with no IO, as fio reports such jobs.
pub fn not_run(index: usize, specs: &[JobSpec]) -> PointResult {
    SoFar::new(specs).point(index, &[], Default::default())
}

/// Runs one sweep point: all job threads at once, until each is done.
pub fn run_point(
    index: usize,
    specs: Vec<JobSpec>,
    interval_ns: u64,
    legs: Option<&LegsFactory>,
    watcher: &mut dyn Watcher,
) -> Result<PointResult> {
    let n = specs.len();
    let shared = Shared {
        gate: StartGate::default(),
        live: (0..n).map(|_| JobLive::default()).collect(),
        stop: AtomicBool::new(false),
        job_stop: (0..n).map(|_| AtomicBool::new(false)).collect(),
        groupids: specs.iter().map(|s| s.groupid).collect(),
        flows: flow::flows(specs.iter().map(|s| s.flow.map(|(id, w, _)| (id, w)))),
    };
    let ramp_ns = specs.iter().map(|s| s.ramp_ns).max().unwrap_or(0);
    // Each job thread gets its own legs (its own connections, say), built here so that a
    // failure stops the point before anything runs.
    let mut extra = Vec::with_capacity(n);
    for spec in &specs {
        extra.push(legs.map(|f| f(spec)).transpose()?);
    }
    let leg_names = match extra.first() {
        Some(Some(l)) => std::iter::once("local".to_string())
            .chain(l.names())
            .collect(),
        _ => Vec::new(),
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    std::thread::scope(|scope| -> Result<PointResult> {
        let mut handles = Vec::with_capacity(n);
        for (spec, extra) in specs.iter().zip(extra) {
            let tx = tx.clone();
            let shared = &shared;
            let h = std::thread::Builder::new()
                .name(format!("lg-{}.{}", spec.name, spec.jobnum))
                .spawn_scoped(scope, move || {
                    let r = job::run(spec, shared, &tx, extra);
                    if r.as_ref().map_or(true, |j| j.error.is_some()) {
                        shared.stop.store(true, Ordering::Relaxed);
                        shared.gate.abort();
                    }
                    let _ = tx.send(Msg::Done(spec.index, Box::new(r)));
                })?;
            handles.push(h);
        }
        drop(tx);

        // Start only when every ring is set up.
        while !shared.gate.wait_ready(n, Duration::from_millis(100)) {
            if handles.iter().any(|h| h.is_finished()) {
                shared.gate.abort();
                break;
            }
        }
        let t0 = clock::now_ns() + 1_000_000;
        shared.gate.open(t0);
        let measure_start = t0 + ramp_ns;
        watcher.started(measure_start);

        let mut steady = steadystate::Monitor::new(
            &specs
                .iter()
                .map(|s| (s.steadystate.map(|x| x.0), s.steadystate.map_or(0, |x| x.1)))
                .collect::<Vec<_>>(),
            measure_start,
        );
        let mut finished = vec![false; n];
        let mut timeline = TimelineBuilder::new(n, interval_ns, leg_names);
        let status_every = watcher.status_interval_ns();
        let mut progress = status_every.map(|_| SoFar::new(&specs));
        let mut next_status = status_every.map(|e| t0 + e);
        let mut rows = Vec::new();
        let mut results: Vec<Option<Result<JobResult>>> = (0..n).map(|_| None).collect();
        let mut done = 0;
        let mut workloads_done = 0;
        let mut cpu_start = None;
        let mut cpu_end = None;
        let mut row_cpu = None;
        while done < n {
            let now = clock::now_ns();
            if cpu_start.is_none() && now >= measure_start {
                let s = cpu::snapshot();
                cpu_start = Some(s);
                row_cpu = Some(s);
            }
            let mut wait = if cpu_start.is_none() {
                Duration::from_nanos((measure_start - now).min(200_000_000))
            } else {
                Duration::from_millis(200)
            };
            if let Some(due) = steady.next_due() {
                wait = wait.min(Duration::from_nanos(due.saturating_sub(now)));
            }
            match rx.recv_timeout(wait) {
                Ok(Msg::Interval(j, s)) => {
                    if let Some(p) = &mut progress {
                        p.add(j, &s);
                    }
                    timeline.add(j, *s)
                }
                Ok(Msg::WorkloadDone(_)) => {
                    workloads_done += 1;
                    if workloads_done == n {
                        cpu_end = Some(cpu::snapshot());
                    }
                }
                Ok(Msg::Done(j, r)) => {
                    finished[j] = true;
                    timeline.job_done(j);
                    results[j] = Some(*r);
                    done += 1;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            for j in steady.poll(clock::now_ns(), &shared.live, &finished) {
                shared.job_stop[j].store(true, Ordering::Relaxed);
            }
            take_rows(&mut timeline, &mut row_cpu, watcher, &mut rows);
            watcher.tick(&shared.live, clock::now_ns().saturating_sub(t0));
            if let (Some(at), Some(p), Some(every)) = (next_status, &progress, status_every)
                && clock::now_ns() >= at
                && done < n
            {
                watcher.status(&p.point(index, &rows, cpu_so_far(cpu_start, p)));
                next_status = Some(at + every);
            }
        }
        for h in handles {
            if h.join().is_err() {
                return Err(anyhow!("a job thread panicked"));
            }
        }
        let mut point = point_result(index, results, rows, cpu_start, cpu_end)?;
        for (j, found) in point.jobs.iter_mut().zip(steady.results(n)) {
            j.steadystate = found;
        }
        Ok(point)
    })
}

/// The timeline's finished rows, each with the process's and the system's CPU since the
/// previous row, to the watcher and the point's rows.
fn take_rows(
    timeline: &mut TimelineBuilder,
    row_cpu: &mut Option<cpu::CpuSnapshot>,
    watcher: &mut dyn Watcher,
    rows: &mut Vec<TimelineRow>,
) {
    for (mut row, dirs) in timeline.ready() {
        let snap = cpu::snapshot();
        if let Some(prev) = *row_cpu {
            let u = cpu::usage(&prev, &snap, 0);
            row.cpu_process_pct = u.process_pct;
            row.cpu_system_pct = u.system_pct;
        }
        *row_cpu = Some(snap);
        watcher.row(&row, &dirs);
        rows.push(row);
    }
}

/// The CPU used since measuring started, for an interim report.
fn cpu_so_far(start: Option<cpu::CpuSnapshot>, p: &SoFar) -> cpu::CpuUsage {
    match start {
        Some(s) => cpu::usage(
            &s,
            &cpu::snapshot(),
            p.jobs.iter().map(|j| j.dirs[0].ios + j.dirs[1].ios).sum(),
        ),
        None => Default::default(),
    }
}

/// The point's result from its jobs' (every job thread must have given one), with the
/// process's CPU from the start of measuring to the end of the workloads.
fn point_result(
    index: usize,
    results: Vec<Option<Result<JobResult>>>,
    rows: Vec<TimelineRow>,
    cpu_start: Option<cpu::CpuSnapshot>,
    cpu_end: Option<cpu::CpuSnapshot>,
) -> Result<PointResult> {
    let mut jobs = Vec::with_capacity(results.len());
    for r in results {
        jobs.push(r.ok_or_else(|| anyhow!("a job thread ended without a result"))??);
    }
    let mut merged: [DirStats; 2] = Default::default();
    for j in &jobs {
        merged[0].merge(&j.dirs[0]);
        merged[1].merge(&j.dirs[1]);
    }
    let ios = merged[0].ios + merged[1].ios;
    let end = cpu_end.unwrap_or_else(cpu::snapshot);
    let cpu = cpu::usage(&cpu_start.unwrap_or(end), &end, ios);
    Ok(PointResult {
        index,
        runtime_ns: jobs.iter().map(|j| j.runtime_ns).max().unwrap_or(0),
        jobs,
        merged,
        timeline: rows,
        cpu,
    })
}
