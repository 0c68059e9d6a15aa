//! One job thread: its own file descriptors, ring and buffers. It keeps up to `iodepth` IOs
//! in flight, prepares them in batches and submits each batch with one system call, and
//! timestamps every IO at its intended start, preparation, submission and completion (one
//! clock read per batch). With `ioengine=sync|psync` it does one IO at a time with a system
//! call instead. `fsync`/`fdatasync` and `thinktime` hold issuing until the IOs in flight
//! are done. At every interval boundary it hands what it measured to the collector.

mod complete;
mod intervals;
mod issue;

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::sync::mpsc::Sender;

use anyhow::{Context, Result, anyhow};

use crate::clock;
use crate::engine::buffers::Buffers;
use crate::engine::content::Content;
use crate::engine::iolog::IoLogs;
use crate::engine::latency_target::{Action, Search};
use crate::engine::legs::{ExtraLegs, MAX_LEGS};
use crate::engine::minrate::Checker;
use crate::engine::pacing::Pacer;
use crate::engine::ring::Ring;
use crate::engine::workload::Workload;
use crate::engine::{JobSpec, Msg, Shared};
use crate::options::IoEngine;
use crate::results::histogram::Histogram;
use crate::results::stats::{
    Dir, DirStats, ErrorCount, IntervalCount, IoDists, JobResult, LegStats, SyncStats, ThreadCpu,
    VerifyStats,
};
use crate::results::timeline::IntervalSample;
use crate::verify::BlockMap;

/// Corruptions listed per job; more are only counted.
const MAX_LISTED: usize = 20;

/// user_data of timer completions: this bit, and the deadline in the bits below.
const TIMER: u64 = 1 << 63;
/// user_data of fsync completions: this bit, and the file.
const SYNC: u64 = 1 << 62;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Workload,
    /// The read-back pass of --verify after the workload.
    Readback,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    None,
    /// Header, offset and crc only (a read-only run checking an earlier run's data).
    Whole,
    /// Also the generation this run last wrote.
    Generation(u64),
}

#[derive(Clone, Copy)]
struct Slot {
    dir: Dir,
    phase: Phase,
    /// The file, offset in it and length of the IO.
    file: u32,
    offset: u64,
    len: u32,
    intended: u64,
    prep: u64,
    submit: u64,
    pending: u8,
    failed: bool,
    counter: u32,
    check: Check,
    leg_done: [u64; MAX_LEGS],
    /// The IO's own priority (`cmdprio*`; 0: the thread's).
    prio: u16,
}

const IDLE: Slot = Slot {
    dir: Dir::Read,
    phase: Phase::Workload,
    file: 0,
    offset: 0,
    len: 0,
    intended: 0,
    prep: 0,
    submit: 0,
    pending: 0,
    failed: false,
    counter: 0,
    check: Check::None,
    leg_done: [0; MAX_LEGS],
    prio: 0,
};

/// A sync that is due after the writes before it (`fsync`, `fdatasync`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum SyncDue {
    None,
    Fsync,
    Fdatasync,
}

struct Job<'a> {
    spec: &'a JobSpec,
    shared: &'a Shared,
    tx: &'a Sender<Msg>,
    // The ring is declared before the buffers and files so that it is dropped first.
    ring: Ring,
    bufs: Buffers,
    /// What writes carry (fio's buffer options).
    content: Content,
    /// The open files (kept open for the ring and the synchronous engines) and their
    /// descriptors.
    _files: Vec<File>,
    fds: Vec<RawFd>,
    /// Each file's position after the last `sync` engine IO (None: not known), to skip
    /// the lseek of a sequential IO, as fio's engine does.
    file_pos: Vec<Option<u64>>,
    /// Which files are character devices (`/dev/zero`): the kernel may end a transfer
    /// there early when the CPU is wanted elsewhere.
    streams: Vec<bool>,
    legs: Option<Box<dyn ExtraLegs>>,
    leg_names: Vec<String>,
    /// Earliest deadline of a timer in the ring, if any.
    timer: Option<u64>,
    timer_ts: io_uring::types::Timespec,
    slots: Vec<Slot>,
    free: Vec<u32>,
    prepared: Vec<u32>,
    cqes: Vec<(u64, i32)>,
    legs_done: Vec<(u32, u8)>,
    inflight: u32,
    work: Workload,
    pacer: Option<Pacer>,
    /// The direction the mix picked for the next IO, kept while its schedule makes it wait.
    next_dir: Option<Dir>,
    /// When the next IO is due, if the schedule holds it back.
    next_due: Option<u64>,
    /// Bytes and IOs issued by the workload (its budget: `io_size`, `number_ios`).
    issued_bytes: u64,
    issued_ios: u64,
    writes_issued: u64,
    sync_due: SyncDue,
    /// Syncs in flight, and when they were submitted.
    syncs_inflight: u32,
    sync_submit: u64,
    /// IOs since the last think time, a think time due, and the end of the current one.
    think_count: u32,
    think_due: bool,
    think_until: Option<u64>,
    /// fio's `flow`: the job's part in its flow.
    flow: Option<super::flow::Member>,
    /// `cmdprio*`, and the thread's priority (`prio`, `prioclass`; 0: none given).
    cmdprio: Option<super::prio::CmdPrio>,
    job_prio: u16,
    /// With --verify: the one IO size, and blocks are offsets divided by it.
    block_size: u64,
    map: Option<BlockMap>,
    /// fio's `verify_backlog`: the blocks written since the last read-back.
    backlog: Option<Vec<u64>>,
    writes: bool,
    counter: u32,
    measure_start: u64,
    deadline: Option<u64>,
    next_boundary: u64,
    interval_index: u64,
    qd_last: u64,
    qd_inflight: u64,
    dirs: [DirStats; 2],
    ivl: IntervalSample,
    ramp_ios: [u64; 2],
    ramp_bytes: [u64; 2],
    dists: IoDists,
    intervals: Vec<IntervalCount>,
    cpu_start: Option<ThreadCpu>,
    thread_cpu: ThreadCpu,
    sync: SyncStats,
    logs: Option<IoLogs>,
    /// `latency_target`: the search, and whether the job's statistics start afresh once
    /// the IOs in flight are done.
    search: Option<Search>,
    reset_pending: bool,
    /// When the job's statistics start (the end of the ramp, or the last window of a
    /// latency-target search).
    results_from: u64,
    vstats: VerifyStats,
    /// `rate_min`, `rate_iops_min`.
    min_rate: Option<Checker>,
    error: Option<anyhow::Error>,
    /// fio's `continue_on_error`: the errors gone on after (None: the option is not set).
    errors_continued: Option<ErrorCount>,
    /// fio's `verify_fatal`: a corrupt block was found, the job ends.
    halted: bool,
    /// fio's `fill_device`: a write found the file system full; no more IO is issued.
    filled: bool,
}

fn new_interval(index: u64, legs: usize) -> IntervalSample {
    let mut s = IntervalSample {
        index,
        ..Default::default()
    };
    for d in &mut s.dirs {
        d.legs = (0..legs).map(|_| Histogram::new()).collect();
    }
    s
}

fn open(spec: &JobSpec, f: &crate::engine::FileRegion, writes: bool) -> Result<File> {
    let mut flags = 0;
    if spec.direct {
        flags |= libc::O_DIRECT;
    }
    OpenOptions::new()
        .read(true)
        .write(writes)
        // fio's `create_on_open`: the file was not laid out; the job creates it.
        .create(writes && spec.create_on_open)
        .custom_flags(flags)
        .open(&f.open)
        .with_context(|| {
            format!(
                "opening {}{}",
                f.path.display(),
                if spec.direct {
                    " with O_DIRECT (--direct=0 if the filesystem has no direct IO)"
                } else {
                    ""
                }
            )
        })
}

/// Runs one job thread to the end: workload, then (with --verify) the read-back pass.
pub fn run(
    spec: &JobSpec,
    shared: &Shared,
    tx: &Sender<Msg>,
    legs: Option<Box<dyn ExtraLegs>>,
) -> Result<JobResult> {
    // NUMA first, so that the buffers and the ring are allocated under the policy.
    if let Some(nodes) = &spec.numa_cpu_nodes {
        super::numa::bind_cpus(nodes)
            .with_context(|| format!("job {}: numa_cpu_nodes", spec.name))?;
    }
    if let Some(p) = &spec.numa_mem_policy {
        super::numa::set_policy(p)
            .with_context(|| format!("job {}: numa_mem_policy", spec.name))?;
    }
    if let Some(v) = super::prio::job_value(&spec.prio) {
        super::prio::set_thread(v)
            .with_context(|| format!("job {}: prio, prioclass", spec.name))?;
    }
    let mut job = Job::new(spec, shared, tx, legs)?;
    let fixed = job.ring.fixed_buffers();
    let Some(t0) = shared.gate.ready_wait() else {
        return Err(anyhow!("stopped before the start"));
    };
    // `startdelay`: this job's clock starts later; a run that stops meanwhile ends it.
    let t0 = t0.saturating_add(spec.start_delay_ns);
    while clock::now_ns() < t0 && !shared.stopped(spec.index) {
        clock::sleep_until(t0.min(clock::now_ns() + 50_000_000));
    }
    if !fixed && spec.index == 0 && spec.engine == IoEngine::IoUring {
        crate::note!(
            "loadgen: io_uring could not register the IO buffers (locked-memory limit?); using unregistered buffers"
        );
    }
    let end = job.workload(t0)?;
    if spec.end_fsync && job.writes && job.error.is_none() {
        job.end_fsync();
    }
    if let Some(f) = &job.flow {
        f.leave(&shared.flows);
    }
    if let Some(what) = spec.exit {
        shared.exit(spec.index, what);
    }
    let _ = tx.send(Msg::WorkloadDone(spec.index));
    if job.writes && job.map.is_some() && job.error.is_none() && !job.halted && spec.do_verify {
        // With a backlog, what it has not read back yet; else every block written.
        let blocks = match job.backlog.take() {
            Some(b) => b,
            None => job
                .map
                .as_ref()
                .map_or(Vec::new(), |m| m.written_blocks().collect()),
        };
        job.readback(&blocks)?;
    }
    // A failed job still reports what it measured (the run record keeps it); the run
    // fails once every job has ended.
    let error = job.error.take().map(|e| format!("{e:#}"));
    Ok(JobResult {
        name: spec.name.clone(),
        group: spec.group,
        groupid: spec.groupid,
        jobnum: spec.jobnum,
        filename: spec.filename(),
        rw: spec.rw,
        bs: spec.bs,
        sizes: spec.sizes.clone(),
        iodepth: spec.iodepth,
        rate_iops: spec.rate_iops,
        dirs: std::mem::take(&mut job.dirs),
        ramp_ios: job.ramp_ios,
        runtime_ns: end.saturating_sub(job.results_from),
        verify: spec.verify.then(|| std::mem::take(&mut job.vstats)),
        dists: std::mem::take(&mut job.dists),
        intervals: std::mem::take(&mut job.intervals),
        thread_cpu: job.thread_cpu,
        sync: std::mem::take(&mut job.sync),
        latency_search: job.search.as_ref().map(Search::result),
        steadystate: None,
        error,
        errors_continued: job.errors_continued,
    })
}

impl<'a> Job<'a> {
    /// The job's files opened, its buffers and ring set up, nothing issued yet.
    fn new(
        spec: &'a JobSpec,
        shared: &'a Shared,
        tx: &'a Sender<Msg>,
        legs: Option<Box<dyn ExtraLegs>>,
    ) -> Result<Job<'a>> {
        let writes = spec.read_pct < 100;
        // `ioengine=null` touches no file.
        let files = spec
            .files
            .iter()
            .filter(|_| spec.engine != IoEngine::Null)
            .map(|f| open(spec, f, writes))
            .collect::<Result<Vec<File>>>()?;
        let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
        let streams: Vec<bool> = files
            .iter()
            .map(|f| f.metadata().is_ok_and(|m| m.file_type().is_char_device()))
            .collect();
        let max_bs = spec.sizes.iter().map(|s| s.max()).max().unwrap_or(4096);
        let mut bufs = Buffers::new(spec.iodepth as usize, max_bs as usize)?;
        // Each run writes data of its own, so a deduplicating target does not match it
        // against an earlier run's.
        let min_write = spec.sizes[1].min().max(1) as usize;
        let content = Content::new(
            &spec.data,
            max_bs as usize,
            min_write,
            spec.seed ^ ((spec.run_id as u64) << 32),
            spec.working_set.clone(),
            spec.run_id as u64,
        );
        content.prepare(&spec.data, &mut bufs, spec.iodepth as usize, min_write);
        let extra_sqes = legs.as_ref().map_or(0, |l| l.sqes_per_io());
        // Room for the syncs of every file too.
        let sqes = spec.iodepth * (1 + extra_sqes) + fds.len() as u32;
        let ring = Ring::new(sqes, &fds, &bufs)?;
        let leg_names: Vec<String> = match &legs {
            Some(l) => std::iter::once("local".to_string())
                .chain(l.names())
                .collect(),
            None => Vec::new(),
        };
        let block_size = spec.sizes[0].min();
        let blocks = spec.files[0].len / block_size.max(1);
        let regions: Vec<u64> = spec.files.iter().map(|f| f.len).collect();
        let mut job = Job {
            spec,
            shared,
            tx,
            ring,
            bufs,
            content,
            _files: files,
            file_pos: vec![None; fds.len()],
            streams,
            fds,
            legs,
            timer: None,
            timer_ts: io_uring::types::Timespec::new(),
            slots: vec![IDLE; spec.iodepth as usize],
            free: (0..spec.iodepth).rev().collect(),
            prepared: Vec::with_capacity(spec.iodepth as usize),
            cqes: Vec::with_capacity(spec.iodepth as usize * 2),
            legs_done: Vec::new(),
            inflight: 0,
            work: Workload::new(
                &regions,
                spec.rw.random(),
                spec.read_pct,
                &spec.sizes,
                &spec.distribution,
                spec.seed,
            )
            .with_rule(spec.offsets, &spec.distribution),
            min_rate: None,
            pacer: None,
            next_dir: None,
            next_due: None,
            issued_bytes: 0,
            issued_ios: 0,
            writes_issued: 0,
            sync_due: SyncDue::None,
            syncs_inflight: 0,
            sync_submit: 0,
            think_count: 0,
            think_due: false,
            think_until: None,
            cmdprio: super::prio::CmdPrio::new(&spec.prio, spec.seed),
            job_prio: super::prio::job_value(&spec.prio).unwrap_or(0),
            flow: spec
                .flow
                .and_then(|(id, w, sleep)| super::flow::Member::new(&shared.flows, id, w, sleep)),
            block_size,
            map: spec.verify.then(|| BlockMap::new(blocks)),
            backlog: (spec.verify && writes && spec.verify_backlog.is_some()).then(Vec::new),
            writes,
            counter: 0,
            measure_start: 0,
            deadline: None,
            next_boundary: 0,
            interval_index: 0,
            qd_last: 0,
            qd_inflight: 0,
            dirs: Default::default(),
            ivl: new_interval(0, leg_names.len()),
            ramp_ios: [0; 2],
            ramp_bytes: [0; 2],
            dists: IoDists::default(),
            intervals: Vec::new(),
            cpu_start: None,
            thread_cpu: ThreadCpu::default(),
            sync: SyncStats::default(),
            logs: IoLogs::open(&spec.logs, &spec.log_suffix)?.map(|mut l| {
                l.log_prio = spec.prio.log_prio;
                l
            }),
            search: None,
            reset_pending: false,
            results_from: 0,
            vstats: VerifyStats::default(),
            filled: false,
            error: None,
            errors_continued: spec.errors.continues().then(ErrorCount::default),
            halted: false,
            leg_names,
        };
        for d in &mut job.dirs {
            d.legs = job
                .leg_names
                .iter()
                .map(|n| LegStats {
                    name: n.clone(),
                    lat: Histogram::new(),
                })
                .collect();
        }
        Ok(job)
    }
}

impl Job<'_> {
    fn sync_engine(&self) -> bool {
        self.spec.engine.synchronous()
    }

    /// The workload until its runtime or size is done; returns when the last IO completed.
    fn workload(&mut self, t0: u64) -> Result<u64> {
        let spec = self.spec;
        self.measure_start = t0 + spec.ramp_ns;
        self.results_from = self.measure_start;
        self.search = spec
            .latency
            .map(|t| Search::new(t, spec.iodepth, self.measure_start));
        // A job held back by `startdelay` keeps its group's interval grid: its first
        // interval is the one of the grid it starts in (in part), so the timeline's rows
        // stay the group's seconds.
        let skipped = spec.start_delay_ns / spec.interval_ns;
        let grid = self.measure_start - spec.start_delay_ns % spec.interval_ns;
        self.next_boundary = grid + spec.interval_ns;
        self.interval_index = skipped;
        self.ivl = new_interval(skipped, self.leg_names.len());
        self.qd_last = t0;
        let deadline = spec.runtime_ns.map(|r| self.measure_start + r);
        self.deadline = deadline;
        self.min_rate = Checker::new(spec.min_rate, t0, self.measure_start);
        self.pacer = Pacer::new(
            t0,
            spec.rates,
            [spec.sizes[0].min(), spec.sizes[1].min()],
            spec.poisson,
            spec.seed,
        );
        let mut now = clock::now_ns();
        let mut stopping = false;
        loop {
            if self.cpu_start.is_none() && now >= self.measure_start {
                self.cpu_start = Some(crate::cpu::thread_cpu());
            }
            self.check_min_rate(now);
            if !stopping
                && (self.error.is_some()
                    || self.halted
                    || self.shared.stopped(self.spec.index)
                    || deadline.is_some_and(|d| now >= d)
                    || self.budget_spent()
                    || self.search.as_ref().is_some_and(Search::done))
            {
                stopping = true;
            }
            // fio's `verify_backlog`: every N blocks written, the IOs in flight finish and
            // those blocks are read back before the workload goes on.
            let backlog_due = self
                .backlog
                .as_ref()
                .is_some_and(|b| b.len() as u64 >= spec.verify_backlog.unwrap_or(u64::MAX));
            if backlog_due && self.inflight == 0 && self.syncs_inflight == 0 {
                let blocks = self.backlog.replace(Vec::new()).unwrap_or_default();
                self.readback(&blocks)?;
                now = clock::now_ns();
                self.boundaries(now);
                continue;
            }
            let mut progressed = false;
            if !stopping && !backlog_due {
                progressed = self.issue(now)?;
            }
            if self.inflight == 0 && self.syncs_inflight == 0 && stopping {
                break;
            }
            if progressed && self.sync_engine() {
                // One IO done in this thread; the next may follow at once.
                now = clock::now_ns();
                self.boundaries(now);
                continue;
            }
            // When to wake up even if no IO completes: the next interval boundary (not past
            // the deadline, whose interval takes the IOs that drain), the next IO due on the
            // schedule if a slot is free for it, the end of a think time, the deadline.
            let mut wake = None::<u64>;
            let mut consider = |t: u64| {
                if t > now {
                    wake = Some(wake.map_or(t, |w| w.min(t)));
                }
            };
            if deadline.is_none_or(|d| self.next_boundary < d) {
                consider(self.next_boundary);
            }
            if !stopping {
                if let Some(t) = self.next_due.filter(|_| !self.free.is_empty()) {
                    consider(t);
                }
                if let Some(t) = self.think_until {
                    consider(t);
                }
                if let Some(d) = deadline {
                    consider(d);
                }
            }
            if let Some(w) = wake
                && self.timer.is_none_or(|t| w < t)
            {
                self.ring.push_timer(w, &mut self.timer_ts, TIMER | w)?;
                self.timer = Some(w);
            }
            if self.inflight == 0 && self.syncs_inflight == 0 && self.timer.is_none() {
                // Nothing can complete: only a timer already due would have been skipped.
                now = clock::now_ns();
                self.boundaries(now);
                continue;
            }
            let submit = clock::now_ns();
            self.submitted(submit);
            self.ring.submit_and_wait(1).context("io_uring_enter")?;
            now = clock::now_ns();
            // Intervals that passed while the call waited close first: what completes now
            // belongs to the interval of now, and the IOs in flight counted in each of them.
            self.boundaries(now);
            self.reap(now);
            if let Some(s) = &mut self.search
                && s.check(now) == Action::ResetStats
            {
                self.reset_pending = true;
            }
            self.boundaries(now);
        }
        self.last_interval(now);
        if let Some(l) = &mut self.logs
            && let Err(e) = l.finish()
        {
            self.fail(e);
        }
        if let Some(start) = &self.cpu_start {
            self.thread_cpu = crate::cpu::thread_cpu().since(start);
        }
        Ok(now)
    }

    /// fio's `rate_min`/`rate_iops_min`: a window below them fails the job.
    fn check_min_rate(&mut self, now: u64) {
        let Some(c) = &mut self.min_rate else { return };
        let (dirs, ramp_ios, ramp_bytes) = (&self.dirs, self.ramp_ios, self.ramp_bytes);
        let done = || [0, 1].map(|d| (dirs[d].ios + ramp_ios[d], dirs[d].bytes + ramp_bytes[d]));
        if let Err(e) = c.check(now, done) {
            self.min_rate = None;
            self.fail(anyhow!("job {}: {e}", self.spec.name));
        }
    }

    /// Whether a size-based job has issued what it should (`io_size` × `loops`: it ends
    /// when not even its smallest IO fits in what is left, as fio's sequential jobs end at
    /// the end of the region), or any job its `number_ios`.
    fn budget_spent(&self) -> bool {
        let size_done =
            !self.spec.time_based && self.issued_bytes + self.spec.bs > self.spec.io_bytes;
        // fio still issues a sync that is due while bytes of the size are left, even too few
        // for another IO.
        let sync_left = self.sync_due != SyncDue::None && self.issued_bytes < self.spec.io_bytes;
        self.filled
            || (size_done && !sync_left)
            || self.spec.number_ios.is_some_and(|n| self.issued_ios >= n)
    }

    /// Reads back `blocks` this job wrote and checks each against the generation written.
    fn readback(&mut self, blocks: &[u64]) -> Result<()> {
        let mut next = 0;
        while (next < blocks.len() && self.error.is_none() && !self.halted) || self.inflight > 0 {
            let now = clock::now_ns();
            while next < blocks.len() && self.error.is_none() && !self.halted {
                let Some(slot) = self.free.pop() else { break };
                let off = self.spec.files[0].offset + blocks[next] * self.block_size;
                let len = self.block_size;
                self.start_io(slot, Dir::Read, Phase::Readback, 0, off, len, now, now)?;
                next += 1;
            }
            self.prepared.clear();
            if self.inflight > 0 {
                self.ring.submit_and_wait(1).context("io_uring_enter")?;
                self.reap(clock::now_ns());
            }
        }
        Ok(())
    }
}
