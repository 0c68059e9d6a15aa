//! Issuing: preparing IOs into free slots as the schedule, syncs and think times allow,
//! submitting them, and the queue-depth clock.

use anyhow::{Context, Result, anyhow};

use super::{Check, Job, Phase, SYNC, Slot, SyncDue};
use crate::engine::latency_target::Search;
use crate::engine::legs::{IoDesc, MAX_LEGS, user_data};
use crate::engine::syncio;
use crate::options::IoEngine;
use crate::results::stats::{Dir, IoDists};
use crate::{clock, verify};

impl Job<'_> {
    /// Prepares IOs while slots are free and the schedule, syncs and think times allow.
    /// With a synchronous engine it does at most one IO; true if it did one.
    pub(super) fn issue(&mut self, now: u64) -> Result<bool> {
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
            // fio's flow: ahead of its share, the job waits `flow_sleep` (a little at least,
            // where fio would spin) and tries again.
            if let Some(f) = &mut self.flow
                && !f.admit(&self.shared.flows)
            {
                self.think_until = Some(now + f.sleep_ns.max(10_000));
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
    pub(super) fn start_sync(&mut self, now: u64) -> Result<()> {
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

    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one IO, on the hot path"
    )]
    pub(super) fn start_io(
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
                    verify::fill_pieces(
                        &mut self.bufs.get_mut(slot as usize)[..len as usize],
                        offset,
                        g,
                        self.spec.verify_pattern.as_deref(),
                        self.spec.verify_interval,
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
        if dir == Dir::Write && self.map.is_none() && !self.spec.rw.trim() {
            self.content.write(
                &mut self.bufs.get_mut(slot as usize)[..len as usize],
                offset,
            );
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
            prio: match (&mut self.cmdprio, phase) {
                (Some(c), Phase::Workload) => c.pick(dir as usize, len).unwrap_or(0),
                _ => 0,
            },
        };
        let buf = self.bufs.ptr(slot as usize);
        if self.sync_engine() {
            // The IO is done by the time the call returns: timed as a submission of one.
            let t = clock::now_ns();
            self.slots[slot as usize].submit = t;
            self.advance_qd(t);
            self.qd_inflight += 1;
            self.inflight += 1;
            let res = if self.spec.engine == IoEngine::Null {
                len as i32
            } else {
                let positional = self.spec.engine == IoEngine::Psync;
                let fd = self.fds[file as usize];
                let pos = (!positional).then_some(&mut self.file_pos[file as usize]);
                if self.spec.rw.trim() {
                    syncio::punch(fd, offset, len)
                } else {
                    syncio::rw(fd, dir == Dir::Write, buf, len as usize, offset, pos)
                }
            };
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
        if self.spec.rw.trim() {
            self.ring.push_trim(file, len, offset, user_data(slot, 0))?;
        } else {
            self.ring.push_rw(
                dir == Dir::Write,
                file,
                slot as usize,
                buf,
                len as u32,
                offset,
                self.slots[slot as usize].prio,
                user_data(slot, 0),
            )?;
        }
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
    pub(super) fn submitted(&mut self, t: u64) {
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

    /// Integrates IOs in flight over time, for the interval's average queue depth; only up
    /// to the end of the current interval while another follows, since a call that blocked
    /// across boundaries (a submission to a file system that waits) is spread over the
    /// intervals it spans by `boundaries`.
    pub(super) fn advance_qd(&mut self, t: u64) {
        let t = if self.deadline.is_none_or(|d| self.next_boundary < d) {
            t.min(self.next_boundary)
        } else {
            t
        };
        let from = self.qd_last.max(self.measure_start);
        if t > from {
            self.ivl.inflight_area += self.qd_inflight as u128 * (t - from) as u128;
        }
        self.qd_last = self.qd_last.max(t);
    }
}
