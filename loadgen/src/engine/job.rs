//! One job thread: its own file descriptors, ring and buffers. It keeps up to `iodepth` IOs
//! in flight, prepares them in batches and submits each batch with one system call, and
//! timestamps every IO at its intended start, preparation, submission and completion (one
//! clock read per batch). With `ioengine=sync|psync` it does one IO at a time with a system
//! call instead. `fsync`/`fdatasync` and `thinktime` hold issuing until the IOs in flight
//! are done. At every interval boundary it hands what it measured to the collector.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc::Sender;

use anyhow::{Context, Result, anyhow};

use super::buffers::Buffers;
use super::iolog::IoLogs;
use super::latency_target::{Action, Search};
use super::legs::{ExtraLegs, IoDesc, MAX_LEGS, decode, user_data};
use super::pacing::Pacer;
use super::ring::Ring;
use super::syncio;
use super::workload::Workload;
use super::{JobSpec, Msg, Shared};
use crate::clock;
use crate::options::IoEngine;
use crate::results::histogram::Histogram;
use crate::results::stats::{
    Dir, DirStats, IntervalCount, IoDists, JobResult, LegStats, SyncStats, ThreadCpu, VerifyStats,
};
use crate::results::timeline::IntervalSample;
use crate::verify::{self, BlockMap, Corruption};

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
    /// The open files (kept open for the ring and the synchronous engines) and their
    /// descriptors.
    _files: Vec<File>,
    fds: Vec<RawFd>,
    /// Each file's position after the last `sync` engine IO (None: not known), to skip
    /// the lseek of a sequential IO, as fio's engine does.
    file_pos: Vec<Option<u64>>,
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
    /// With --verify: the one IO size, and blocks are offsets divided by it.
    block_size: u64,
    map: Option<BlockMap>,
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
    error: Option<anyhow::Error>,
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

fn open(spec: &JobSpec, path: &std::path::Path, writes: bool) -> Result<File> {
    let mut flags = 0;
    if spec.direct {
        flags |= libc::O_DIRECT;
    }
    OpenOptions::new()
        .read(true)
        .write(writes)
        .custom_flags(flags)
        .open(path)
        .with_context(|| {
            format!(
                "opening {}{}",
                path.display(),
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
    let writes = spec.read_pct < 100;
    let files = spec
        .files
        .iter()
        .map(|f| open(spec, &f.path, writes))
        .collect::<Result<Vec<File>>>()?;
    let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
    let max_bs = spec.sizes.iter().map(|s| s.max()).max().unwrap_or(4096);
    let bufs = Buffers::new(spec.iodepth as usize, max_bs as usize)?;
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
        _files: files,
        file_pos: vec![None; fds.len()],
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
        ),
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
        block_size,
        map: spec.verify.then(|| BlockMap::new(blocks)),
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
        logs: IoLogs::open(&spec.logs, &spec.log_suffix)?,
        search: None,
        reset_pending: false,
        results_from: 0,
        vstats: VerifyStats::default(),
        error: None,
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
    let fixed = job.ring.fixed_buffers();
    let Some(t0) = shared.gate.ready_wait() else {
        return Err(anyhow!("stopped before the start"));
    };
    clock::sleep_until(t0);
    if !fixed && spec.index == 0 && spec.engine == IoEngine::IoUring {
        crate::note!(
            "loadgen: io_uring could not register the IO buffers (locked-memory limit?); using unregistered buffers"
        );
    }
    let end = job.workload(t0)?;
    if spec.end_fsync && job.writes && job.error.is_none() {
        job.end_fsync();
    }
    let _ = tx.send(Msg::WorkloadDone(spec.index));
    if job.writes && job.map.is_some() && job.error.is_none() {
        job.readback()?;
    }
    // A failed job still reports what it measured (the run record keeps it); the run
    // fails once every job has ended.
    let error = job.error.take().map(|e| format!("{e:#}"));
    Ok(JobResult {
        name: spec.name.clone(),
        group: spec.group,
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
        error,
    })
}

impl Job<'_> {
    fn sync_engine(&self) -> bool {
        self.spec.engine != IoEngine::IoUring
    }

    /// The workload until its runtime or size is done; returns when the last IO completed.
    fn workload(&mut self, t0: u64) -> Result<u64> {
        let spec = self.spec;
        self.measure_start = t0 + spec.ramp_ns;
        self.results_from = self.measure_start;
        self.search = spec
            .latency
            .map(|t| Search::new(t, spec.iodepth, self.measure_start));
        self.next_boundary = self.measure_start + spec.interval_ns;
        self.qd_last = t0;
        let deadline = spec.runtime_ns.map(|r| self.measure_start + r);
        self.deadline = deadline;
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
                self.cpu_start = Some(ThreadCpu::now());
            }
            if !stopping
                && (self.error.is_some()
                    || self.shared.stopped()
                    || deadline.is_some_and(|d| now >= d)
                    || self.budget_spent()
                    || self.search.as_ref().is_some_and(Search::done))
            {
                stopping = true;
            }
            let mut progressed = false;
            if !stopping {
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
            self.thread_cpu = ThreadCpu::now().since(start);
        }
        Ok(now)
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
        (size_done && !sync_left) || self.spec.number_ios.is_some_and(|n| self.issued_ios >= n)
    }

    /// Prepares IOs while slots are free and the schedule, syncs and think times allow.
    /// With a synchronous engine it does at most one IO; true if it did one.
    fn issue(&mut self, now: u64) -> Result<bool> {
        self.next_due = None;
        if self.sync_due != SyncDue::None {
            if self.inflight > 0 || self.syncs_inflight > 0 {
                return Ok(false);
            }
            self.start_sync(now)?;
            if self.syncs_inflight > 0 {
                return Ok(false);
            }
        }
        if self.think_due {
            if self.inflight > 0 {
                return Ok(false);
            }
            self.think_due = false;
            let spin_end = now + self.spec.think.spin_ns.min(self.spec.think.ns);
            while clock::now_ns() < spin_end {
                std::hint::spin_loop();
            }
            self.think_until = Some(now + self.spec.think.ns);
        }
        if let Some(t) = self.think_until {
            if clock::now_ns() < t {
                return Ok(false);
            }
            self.think_until = None;
        }
        if self.search.as_ref().is_some_and(Search::quiescing) {
            if self.inflight > 0 {
                return Ok(false);
            }
            if std::mem::take(&mut self.reset_pending) {
                self.reset_stats(now);
            }
            if let Some(s) = &mut self.search {
                s.drained(now);
            }
        }
        let cap = self.search.as_ref().map_or(u32::MAX, Search::depth);
        let mut did = false;
        while let Some(&slot) = self.free.last() {
            if self.budget_spent() || (did && self.sync_engine()) || self.inflight >= cap {
                break;
            }
            let picked = match self.next_dir.take() {
                Some(d) => d,
                None => self.work.dir(),
            };
            let (dir, intended) = match &self.pacer {
                Some(p) => {
                    let (dir, due) = p.choose(picked, self.spec.rw.mixed(), now);
                    match due {
                        Some(t) if t > now => {
                            self.next_dir = Some(dir);
                            self.next_due = Some(t);
                            break;
                        }
                        Some(t) => (dir, t),
                        None => (dir, now),
                    }
                }
                None => (picked, now),
            };
            let bs = self.block_size;
            let place = match &self.map {
                Some(m) => self.work.next(dir, |_, off| m.busy(off / bs)),
                None => self.work.next(dir, |_, _| false),
            };
            let Some((file, off, len)) = place else {
                self.next_dir = Some(dir);
                break;
            };
            self.free.pop();
            if let Some(p) = &mut self.pacer {
                p.issued(dir, len);
            }
            let offset = self.spec.files[file].offset + off;
            self.issued_bytes += len;
            self.issued_ios += 1;
            self.start_io(
                slot,
                dir,
                Phase::Workload,
                file as u32,
                offset,
                len,
                intended,
                now,
            )?;
            did = true;
            if dir == Dir::Write {
                self.writes_issued += 1;
                let w = self.writes_issued;
                if self.spec.fsync > 0 && w.is_multiple_of(self.spec.fsync as u64) {
                    self.sync_due = SyncDue::Fsync;
                } else if self.spec.fdatasync > 0 && w.is_multiple_of(self.spec.fdatasync as u64) {
                    self.sync_due = SyncDue::Fdatasync;
                }
            }
            let think = self.spec.think;
            if think.ns > 0 {
                self.think_count += 1;
                if self.think_count >= think.blocks {
                    self.think_count = 0;
                    self.think_due = true;
                }
            }
            if self.sync_due != SyncDue::None || self.think_due {
                break;
            }
        }
        Ok(did)
    }

    /// Syncs every file: with io_uring queued (completions come through `reap`), with a
    /// synchronous engine done here.
    fn start_sync(&mut self, now: u64) -> Result<()> {
        let datasync = self.sync_due == SyncDue::Fdatasync;
        self.sync_due = SyncDue::None;
        if self.sync_engine() {
            for i in 0..self.fds.len() {
                let t = clock::now_ns();
                let res = syncio::sync(self.fds[i], datasync);
                self.sync_done(i, res, t, clock::now_ns());
            }
            return Ok(());
        }
        for i in 0..self.fds.len() {
            self.ring.push_fsync(i as u32, datasync, SYNC | i as u64)?;
        }
        self.syncs_inflight = self.fds.len() as u32;
        self.sync_submit = now;
        Ok(())
    }

    /// A sync of file `file`, submitted at `submit`, ended at `now` with `res`.
    fn sync_done(&mut self, file: usize, res: i32, submit: u64, now: u64) {
        if res < 0 {
            self.fail(anyhow!(
                "sync of {} failed: {}",
                self.spec.files[file].path.display(),
                std::io::Error::from_raw_os_error(-res)
            ));
            return;
        }
        if submit >= self.measure_start {
            self.sync.ios += 1;
            self.sync.lat.record(now.saturating_sub(submit));
        }
    }

    /// `end_fsync`: every file, once the workload is done (not counted, as in fio).
    fn end_fsync(&mut self) {
        for i in 0..self.fds.len() {
            let res = syncio::sync(self.fds[i], false);
            if res < 0 {
                self.fail(anyhow!(
                    "fsync of {} at the end failed: {}",
                    self.spec.files[i].path.display(),
                    std::io::Error::from_raw_os_error(-res)
                ));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn start_io(
        &mut self,
        slot: u32,
        dir: Dir,
        phase: Phase,
        file: u32,
        offset: u64,
        len: u64,
        intended: u64,
        prep: u64,
    ) -> Result<()> {
        // Blocks of --verify count from the start of the job's region (one file).
        let block = (offset - self.spec.files[0].offset) / self.block_size.max(1);
        let mut check = Check::None;
        let mut counter = 0;
        if let Some(map) = &mut self.map {
            map.begin(block);
            match dir {
                Dir::Write => {
                    self.counter += 1;
                    counter = self.counter;
                    let g = verify::generation(self.spec.run_id, counter);
                    verify::fill(
                        &mut self.bufs.get_mut(slot as usize)[..len as usize],
                        offset,
                        g,
                    );
                }
                Dir::Read if self.writes || phase == Phase::Readback => {
                    if let Some(c) = map.written(block) {
                        check = Check::Generation(verify::generation(self.spec.run_id, c));
                    }
                }
                Dir::Read => check = Check::Whole,
            }
        }
        let extra = match (&self.legs, phase) {
            (Some(l), Phase::Workload) => l.legs_for(dir),
            _ => 0,
        };
        if 1 + extra as usize > MAX_LEGS {
            return Err(anyhow!(
                "an IO can have at most {MAX_LEGS} legs, not {}",
                1 + extra
            ));
        }
        self.slots[slot as usize] = Slot {
            dir,
            phase,
            file,
            offset,
            len: len as u32,
            intended,
            prep,
            submit: prep,
            pending: 1 + extra,
            failed: false,
            counter,
            check,
            leg_done: [0; MAX_LEGS],
        };
        let buf = self.bufs.ptr(slot as usize);
        if self.sync_engine() {
            // The IO is done by the time the call returns: timed as a submission of one.
            let t = clock::now_ns();
            self.slots[slot as usize].submit = t;
            self.advance_qd(t);
            self.qd_inflight += 1;
            self.inflight += 1;
            let positional = self.spec.engine == IoEngine::Psync;
            let fd = self.fds[file as usize];
            let pos = (!positional).then_some(&mut self.file_pos[file as usize]);
            let res = syncio::rw(fd, dir == Dir::Write, buf, len as usize, offset, pos);
            let done = clock::now_ns();
            self.advance_qd(done);
            if done >= self.measure_start {
                self.dists.submit[IoDists::batch_class(1)] += 1;
                self.dists.complete[IoDists::batch_class(1)] += 1;
                self.dists.depth[IoDists::depth_class(1)] += 1;
            }
            self.complete(user_data(slot, 0), res, done);
            return Ok(());
        }
        // fio's iodepth_batch_submit: a full batch goes to the device before the next IO
        // is queued, so the device starts on it while the rest are prepared. The last batch
        // goes with the call that waits for completions (one system call fewer than fio).
        if self.prepared.len() >= self.spec.batch_submit as usize {
            self.submitted(clock::now_ns());
            self.ring.submit().context("io_uring_enter")?;
        }
        self.ring.push_rw(
            dir == Dir::Write,
            file,
            slot as usize,
            buf,
            len as u32,
            offset,
            user_data(slot, 0),
        )?;
        if extra > 0
            && let Some(legs) = &mut self.legs
        {
            let ring = &mut self.ring;
            let io = IoDesc {
                slot,
                dir,
                offset,
                data: &self.bufs.get(slot as usize)[..len as usize],
            };
            legs.start(&io, &mut |e| ring.push(e))?;
        }
        self.prepared.push(slot);
        self.inflight += 1;
        Ok(())
    }

    /// Stamps the batch just prepared with its submission time.
    fn submitted(&mut self, t: u64) {
        self.advance_qd(t);
        let n = self.prepared.len() as u64;
        if n > 0 && t >= self.measure_start {
            self.dists.submit[IoDists::batch_class(n)] += 1;
            self.dists.depth[IoDists::depth_class(self.inflight as u64)] += n;
        }
        for &s in &self.prepared {
            self.slots[s as usize].submit = t;
        }
        self.qd_inflight += self.prepared.len() as u64;
        self.prepared.clear();
    }

    /// Integrates IOs in flight over time, for the interval's average queue depth.
    fn advance_qd(&mut self, t: u64) {
        let from = self.qd_last.max(self.measure_start);
        if t > from {
            self.ivl.inflight_area += self.qd_inflight as u128 * (t - from) as u128;
        }
        self.qd_last = self.qd_last.max(t);
    }

    fn reap(&mut self, now: u64) {
        self.cqes.clear();
        for cqe in self.ring.ring.completion() {
            self.cqes.push((cqe.user_data(), cqe.result()));
        }
        self.advance_qd(now);
        if now >= self.measure_start {
            let ios = self
                .cqes
                .iter()
                .filter(|&&(ud, _)| ud & (TIMER | SYNC) == 0 && decode(ud).1 == 0)
                .count() as u64;
            if ios > 0 {
                self.dists.complete[IoDists::batch_class(ios)] += 1;
            }
        }
        for i in 0..self.cqes.len() {
            let (ud, res) = self.cqes[i];
            if ud & TIMER != 0 {
                // Later timers may still be pending; the loop arms a new one when needed.
                if self.timer == Some(ud & !TIMER) {
                    self.timer = None;
                }
                continue;
            }
            if ud & SYNC != 0 {
                self.syncs_inflight -= 1;
                self.sync_done((ud & !SYNC) as usize, res, self.sync_submit, now);
                continue;
            }
            self.complete(ud, res, now);
        }
        let live = &self.shared.live[self.spec.index];
        for d in 0..2 {
            live.publish(
                d,
                self.dirs[d].ios + self.ramp_ios[d],
                self.dirs[d].bytes + self.ramp_bytes[d],
            );
        }
    }

    fn fail(&mut self, e: anyhow::Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn complete(&mut self, ud: u64, res: i32, now: u64) {
        let (slot, leg) = decode(ud);
        if leg != 0 {
            let mut done = std::mem::take(&mut self.legs_done);
            done.clear();
            let ring = &mut self.ring;
            if let Some(legs) = &mut self.legs
                && let Err(e) = legs.complete(slot, leg, res, &mut |e| ring.push(e), &mut done)
            {
                self.fail(e);
            }
            for &(slot, leg) in &done {
                if (slot as usize) < self.slots.len() && self.slots[slot as usize].pending > 0 {
                    self.leg_finished(slot, leg, now);
                }
            }
            self.legs_done = done;
            return;
        }
        let s = self.slots[slot as usize];
        let want = s.len as i32;
        if res != want {
            let what = if res < 0 {
                std::io::Error::from_raw_os_error(-res).to_string()
            } else {
                format!("short {} of {res} bytes", s.dir.name())
            };
            self.fail(anyhow!(
                "{} of {} bytes at offset {} of {} failed: {what}",
                s.dir.name(),
                s.len,
                s.offset,
                self.spec.files[s.file as usize].path.display()
            ));
            self.slots[slot as usize].failed = true;
        }
        self.leg_finished(slot, 0, now);
    }

    fn leg_finished(&mut self, slot: u32, leg: u8, now: u64) {
        let s = &mut self.slots[slot as usize];
        s.leg_done[leg as usize % MAX_LEGS] = now;
        s.pending -= 1;
        if s.pending == 0 {
            self.finish(slot, now);
        }
    }

    fn finish(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        self.inflight -= 1;
        self.qd_inflight = self.qd_inflight.saturating_sub(1);
        self.free.push(slot);
        let bs = s.len as u64;
        let offset = s.offset;
        let block = (offset - self.spec.files[0].offset) / self.block_size.max(1);
        if let Some(map) = &mut self.map {
            let ok_write = (s.dir == Dir::Write && !s.failed).then_some(s.counter);
            map.end(block, ok_write);
            if ok_write.is_some() {
                self.vstats.blocks_written += 1;
            }
            if s.dir == Dir::Read && !s.failed && s.check != Check::None {
                self.vstats.blocks_checked += 1;
                let expected = match s.check {
                    Check::Generation(g) => Some(g),
                    _ => None,
                };
                if let Err(problem) = verify::check(
                    &self.bufs.get(slot as usize)[..bs as usize],
                    offset,
                    expected,
                ) {
                    if self.vstats.corruptions.len() < MAX_LISTED {
                        self.vstats.corruptions.push(Corruption { offset, problem });
                    } else {
                        self.vstats.more_corruptions += 1;
                    }
                }
            }
        }
        if s.phase == Phase::Readback {
            self.vstats.readback_ios += 1;
            return;
        }
        let d = s.dir as usize;
        if now < self.measure_start {
            self.ramp_ios[d] += 1;
            self.ramp_bytes[d] += bs;
            return;
        }
        if s.failed {
            return;
        }
        let total = now.saturating_sub(s.intended);
        let clat = now.saturating_sub(s.submit);
        let sync_engine = self.sync_engine();
        let st = &mut self.dirs[d];
        st.ios += 1;
        st.bytes += bs;
        // A synchronous engine has no submission apart from the IO (fio records no slat).
        if !sync_engine {
            st.slat.record(s.submit.saturating_sub(s.prep));
        }
        st.clat.record(clat);
        self.dists.record_lat(clat);
        let lat = now.saturating_sub(s.prep);
        st.lat.record(lat);
        st.total.record(total);
        let iv = &mut self.ivl.dirs[d];
        iv.ios += 1;
        iv.bytes += bs;
        iv.total.record(total);
        iv.clat.record(clat);
        if self.spec.status {
            if !sync_engine {
                iv.slat.record(s.submit.saturating_sub(s.prep));
            }
            iv.lat.record(lat);
        }
        if !self.leg_names.is_empty() {
            for (leg, &done) in s.leg_done.iter().enumerate().take(self.leg_names.len()) {
                if done != 0 {
                    let lat = done.saturating_sub(s.submit);
                    st.legs[leg].lat.record(lat);
                    iv.legs[leg].record(lat);
                }
            }
        }
        if let Some(search) = &mut self.search
            && search.io(total, now) == Action::ResetStats
        {
            self.reset_pending = true;
        }
        if let Some(l) = &mut self.logs {
            let slat = (!sync_engine).then(|| s.submit.saturating_sub(s.prep));
            let t = now - self.measure_start;
            if let Err(e) = l.io(t, d, bs, lat, slat, clat) {
                self.logs = None;
                self.fail(e.context("writing a log"));
            }
        }
    }

    /// The last window of a latency-target search begins: the job's results are its.
    fn reset_stats(&mut self, now: u64) {
        for d in &mut self.dirs {
            let legs = d
                .legs
                .iter()
                .map(|l| LegStats {
                    name: l.name.clone(),
                    lat: Histogram::new(),
                })
                .collect();
            *d = DirStats {
                legs,
                ..DirStats::default()
            };
        }
        self.dists = IoDists::default();
        self.intervals.clear();
        self.sync = SyncStats::default();
        self.cpu_start = Some(ThreadCpu::now());
        self.results_from = now;
    }

    /// Sends the samples of every interval that has ended by `now`. The interval that ends
    /// at the deadline stays open: it also takes the IOs that drain after the deadline.
    fn boundaries(&mut self, now: u64) {
        while now >= self.next_boundary && self.deadline.is_none_or(|d| self.next_boundary < d) {
            self.send_interval(self.spec.interval_ns);
            self.next_boundary += self.spec.interval_ns;
        }
    }

    fn send_interval(&mut self, covered_ns: u64) {
        let next = new_interval(self.interval_index + 1, self.leg_names.len());
        let mut s = std::mem::replace(&mut self.ivl, next);
        s.covered_ns = covered_ns;
        self.intervals.push(IntervalCount {
            covered_ns,
            ios: [s.dirs[0].ios, s.dirs[1].ios],
            bytes: [s.dirs[0].bytes, s.dirs[1].bytes],
        });
        let _ = self.tx.send(Msg::Interval(self.spec.index, Box::new(s)));
        self.interval_index += 1;
    }

    /// The last, partial interval.
    fn last_interval(&mut self, end: u64) {
        let start = self.next_boundary - self.spec.interval_ns;
        if end > start && end > self.measure_start {
            self.send_interval(end - start.max(self.measure_start));
        }
    }

    /// Reads back every block this job wrote and checks it against the generation written.
    fn readback(&mut self) -> Result<()> {
        let blocks: Vec<u64> = match &self.map {
            Some(m) => m.written_blocks().collect(),
            None => return Ok(()),
        };
        let mut next = 0;
        while (next < blocks.len() && self.error.is_none()) || self.inflight > 0 {
            let now = clock::now_ns();
            while next < blocks.len() && self.error.is_none() {
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
