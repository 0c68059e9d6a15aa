//! Completions: reaping the ring, finishing each IO (all its legs), checking what was
//! read, and the end of syncs.

use anyhow::anyhow;

use super::{Check, Job, MAX_LISTED, Phase, SYNC, TIMER};
use crate::engine::latency_target::Action;
use crate::engine::legs::{MAX_LEGS, decode};
use crate::engine::syncio;
use crate::options::errors;
use crate::results::stats::{Dir, IoDists};
use crate::verify::{self, Corruption};

impl Job<'_> {
    /// A sync of file `file`, submitted at `submit`, ended at `now` with `res`.
    pub(super) fn sync_done(&mut self, file: usize, res: i32, submit: u64, now: u64) {
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
    pub(super) fn end_fsync(&mut self) {
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

    pub(super) fn reap(&mut self, now: u64) {
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

    pub(super) fn fail(&mut self, e: anyhow::Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    pub(super) fn complete(&mut self, ud: u64, res: i32, now: u64) {
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
        // A trim on the ring is a fallocate: 0 when done.
        let trim = self.spec.rw.trim() && !self.sync_engine();
        let res = if trim && res == 0 { want } else { res };
        // Short transfers count with the bytes they moved, as fio's async engines count
        // them: a write the file system took in part (it is full: the next write says so),
        // in a file created on open and not laid out, a read past what was written, and a
        // read of `/dev/zero` that the kernel ended early to give up the CPU (io_uring's
        // non-blocking first try does that on a busy machine).
        let short_write = s.dir == Dir::Write && !trim && self.map.is_none() && res > 0;
        // Only a transfer that fell short asks which kind it is (not every completion).
        let short_read = res < want
            && s.dir == Dir::Read
            && s.check == Check::None
            && ((self.spec.create_on_open && !self.sync_engine() && res >= 0)
                || (self.streams.get(s.file as usize) == Some(&true) && res > 0));
        // fio's `fill_device`: a full file system (or device) ends the workload; the write
        // that found it full is not counted.
        let full = res == -libc::ENOSPC || res == -libc::EDQUOT || (res >= 0 && res < want);
        if res != want && self.spec.fill_device && s.dir == Dir::Write && full {
            if !self.filled {
                crate::note!(
                    "loadgen: job {}: {} is full at offset {} (fill_device)",
                    self.spec.name,
                    self.spec.files[s.file as usize].path.display(),
                    s.offset
                );
            }
            self.filled = true;
            self.slots[slot as usize].failed = true;
        } else if (short_write || short_read) && res < want {
            self.slots[slot as usize].len = res as u32;
            self.leg_finished(slot, 0, now);
            return;
        } else if res != want {
            let what = if res < 0 {
                std::io::Error::from_raw_os_error(-res).to_string()
            } else {
                format!("short {} of {res} bytes", self.op_name(s.dir))
            };
            let msg = format!(
                "{} of {} bytes at offset {} of {} failed: {what}",
                self.op_name(s.dir),
                s.len,
                s.offset,
                self.spec.files[s.file as usize].path.display()
            );
            // Any other short transfer fails as EIO (fio's `full resid` error).
            let errno = if res < 0 { -res } else { libc::EIO };
            let kind = errors::kind_of(s.dir == Dir::Write, errno);
            match &mut self.errors_continued {
                Some(c) if self.spec.errors.non_fatal(kind, errno) => {
                    c.total += 1;
                    if c.first == 0 {
                        c.first = errno;
                    }
                    // fio's `error_dump` (default 1): the error is named as it happens.
                    if self.spec.errors.dump != Some(false) {
                        crate::note!(
                            "loadgen: job {}: {msg} ({}; going on: continue_on_error)",
                            self.spec.name,
                            errors::name(errno)
                        );
                    }
                }
                _ => self.fail(anyhow!("{msg} ({})", errors::name(errno))),
            }
            self.slots[slot as usize].failed = true;
        }
        self.leg_finished(slot, 0, now);
    }

    /// What an IO of `dir` is called in messages: trims are the writes of a trim job.
    fn op_name(&self, dir: Dir) -> &'static str {
        if self.spec.rw.trim() {
            "trim"
        } else {
            dir.name()
        }
    }

    pub(super) fn leg_finished(&mut self, slot: u32, leg: u8, now: u64) {
        let s = &mut self.slots[slot as usize];
        s.leg_done[leg as usize % MAX_LEGS] = now;
        s.pending -= 1;
        if s.pending == 0 {
            self.finish(slot, now);
        }
    }

    pub(super) fn finish(&mut self, slot: u32, now: u64) {
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
                if let Some(b) = &mut self.backlog {
                    b.push(block);
                }
            }
            if s.dir == Dir::Read && !s.failed && s.check != Check::None {
                self.vstats.blocks_checked += 1;
                let expected = match s.check {
                    Check::Generation(g) => Some(g),
                    _ => None,
                };
                if let Err(problem) = verify::check_pieces(
                    &self.bufs.get(slot as usize)[..bs as usize],
                    offset,
                    expected,
                    self.spec.verify_pattern.as_deref(),
                    self.spec.verify_interval,
                ) {
                    if self.spec.verify_dump {
                        self.dump(slot, offset, expected);
                    }
                    if self.vstats.corruptions.len() < MAX_LISTED {
                        self.vstats.corruptions.push(Corruption { offset, problem });
                    } else {
                        self.vstats.more_corruptions += 1;
                    }
                    // fio's `verify_fatal`: the first corrupt block ends the job.
                    if self.spec.errors.verify_fatal {
                        self.halted = true;
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
            let prio = match s.prio {
                0 => self.job_prio,
                p => p,
            };
            if let Err(e) = l.io(t, d, bs, lat, slat, clat, prio, s.offset) {
                self.logs = None;
                self.fail(e.context("writing a log"));
            }
        }
    }
}

impl Job<'_> {
    /// fio's `verify_dump`: the block as read and, when this run wrote it, as written, in
    /// `NAME.OFFSET.received` and `NAME.OFFSET.expected` in the working directory (fio's
    /// names). A dump that cannot be written is said on stderr; the corruption is reported
    /// either way.
    fn dump(&mut self, slot: u32, offset: u64, expected: Option<u64>) {
        let bs = self.block_size as usize;
        let name = self.spec.files[0]
            .path
            .file_name()
            .map_or_else(|| "block".into(), |n| n.to_string_lossy().into_owned());
        let received = self.bufs.get(slot as usize)[..bs].to_vec();
        // What this run wrote there, or else what the block's own header says was written.
        let expected = expected.or_else(|| verify::stored_generation(&received));
        let mut files = vec![("received", received)];
        if let Some(g) = expected {
            let mut want = vec![0u8; bs];
            verify::fill_pieces(
                &mut want,
                offset,
                g,
                self.spec.verify_pattern.as_deref(),
                self.spec.verify_interval,
            );
            files.push(("expected", want));
        }
        for (kind, data) in files {
            let path = format!("{name}.{offset}.{kind}");
            match std::fs::write(&path, data) {
                Ok(()) => crate::note!("loadgen: verify: {kind} data dumped as {path}"),
                Err(e) => crate::note!("loadgen: verify: cannot dump {path}: {e}"),
            }
        }
    }
}
