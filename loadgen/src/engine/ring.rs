//! A job's io_uring: its files registered as fixed files 0, 1, …, its buffers registered as fixed
//! buffers, single-issuer with deferred task work where the kernel has it (completions are
//! then run only when the job thread asks for them, with no interrupts of its work).
//!
//! Waits never carry a timeout argument: a wait with one takes a slower path in the kernel
//! and adds tens of microseconds to every wake-up. A job that must wake at a given time
//! (a rate schedule, an interval boundary) queues a timeout request instead, which completes
//! like an IO.

use std::io;
use std::os::fd::RawFd;

use anyhow::{Context, Result};
use io_uring::{IoUring, opcode, squeue, types};

use super::buffers::Buffers;

pub struct Ring {
    pub ring: IoUring,
    fixed_bufs: bool,
}

impl Ring {
    pub fn new(sq_entries: u32, fds: &[RawFd], bufs: &Buffers) -> Result<Ring> {
        // One more for the timer.
        let entries = (sq_entries + 1).next_power_of_two().max(8);
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(entries * 2)
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 2).build(entries))
            .context("creating an io_uring (needs Linux 5.11 or later)")?;
        if !fds.is_empty() {
            ring.submitter()
                .register_files(fds)
                .context("registering the target with io_uring")?;
        }
        let iov = bufs.iovecs();
        // SAFETY: the buffers outlive the ring: a job holds its ring in a field declared
        // before its buffers, so the ring (and its registration) is dropped first.
        let fixed_bufs = unsafe { ring.submitter().register_buffers(&iov) }.is_ok();
        Ok(Ring { ring, fixed_bufs })
    }

    /// Whether buffers are registered (else plain reads and writes are used: registration
    /// needs locked memory, which an unprivileged user may lack).
    pub fn fixed_buffers(&self) -> bool {
        self.fixed_bufs
    }

    /// Queues a read or write of `len` bytes at `offset` of fixed file `file` from slot
    /// `slot`'s buffer.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one submission queue entry"
    )]
    pub fn push_rw(
        &mut self,
        write: bool,
        file: u32,
        slot: usize,
        buf: *mut u8,
        len: u32,
        offset: u64,
        ioprio: u16,
        user_data: u64,
    ) -> Result<()> {
        let fd = types::Fixed(file);
        // ioprio 0: the thread's own priority.
        let e = match (write, self.fixed_bufs) {
            (false, true) => opcode::ReadFixed::new(fd, buf, len, slot as u16)
                .offset(offset)
                .ioprio(ioprio)
                .build(),
            (true, true) => opcode::WriteFixed::new(fd, buf, len, slot as u16)
                .offset(offset)
                .ioprio(ioprio)
                .build(),
            (false, false) => opcode::Read::new(fd, buf, len)
                .offset(offset)
                .ioprio(ioprio)
                .build(),
            (true, false) => opcode::Write::new(fd, buf, len)
                .offset(offset)
                .ioprio(ioprio)
                .build(),
        };
        self.push(&e.user_data(user_data))
    }

    /// Queues a trim of `len` bytes at `offset` of fixed file `file`: a hole punched, the
    /// file's size kept (fio's trim of a file).
    pub fn push_trim(&mut self, file: u32, len: u64, offset: u64, user_data: u64) -> Result<()> {
        let e = opcode::Fallocate::new(types::Fixed(file), len)
            .offset(offset)
            .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
            .build();
        self.push(&e.user_data(user_data))
    }

    /// Queues an fsync (or fdatasync) of fixed file `file`.
    pub fn push_fsync(&mut self, file: u32, datasync: bool, user_data: u64) -> Result<()> {
        let mut op = opcode::Fsync::new(types::Fixed(file));
        if datasync {
            op = op.flags(types::FsyncFlags::DATASYNC);
        }
        self.push(&op.build().user_data(user_data))
    }

    pub fn push(&mut self, e: &squeue::Entry) -> Result<()> {
        // SAFETY: the entry's buffer stays valid until its completion is reaped: buffers
        // belong to slots, and a slot is reused only after all its completions arrived.
        unsafe { self.ring.submission().push(e) }
            .map_err(|_| anyhow::anyhow!("io_uring submission queue full"))
    }

    /// Queues a timer that completes at `deadline_ns` on the monotonic clock. `ts` must
    /// stay in place until the next submission (the kernel copies it then).
    pub fn push_timer(
        &mut self,
        deadline_ns: u64,
        ts: &mut types::Timespec,
        user_data: u64,
    ) -> Result<()> {
        *ts = types::Timespec::new()
            .sec(deadline_ns / 1_000_000_000)
            .nsec((deadline_ns % 1_000_000_000) as u32);
        let e = opcode::Timeout::new(ts as *const types::Timespec)
            .flags(types::TimeoutFlags::ABS)
            .build()
            .user_data(user_data);
        self.push(&e)
    }

    /// Submits what is queued without waiting. Signals are not errors.
    pub fn submit(&mut self) -> io::Result<()> {
        self.submit_and_wait(0)
    }

    /// Submits what is queued and waits for at least `want` completions. Signals are not
    /// errors.
    pub fn submit_and_wait(&mut self, want: usize) -> io::Result<()> {
        match self.ring.submitter().submit_and_wait(want) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
