//! Replicated writes on a job's own io_uring: the extra legs of `loadgen run --replica`.
//!
//! A job thread has one TCP connection to each replica, connected and through the
//! handshake before the run starts (`replicas::Replicas::factory`), and drives it with a
//! [`ReplicaConn`] and io_uring operations on the job's ring, beside its local IO:
//!
//! - A write's frame (its header, then the slot's buffer as it is, no copy) joins the
//!   connection's send queue. One `SendMsg` is in flight per connection, carrying every
//!   frame queued when it starts, so sends never interleave; a short send is continued
//!   before anything else.
//! - One `Recv` is in flight while writes are outstanding; one receive may bring acks for
//!   many writes. A write's leg finishes when its ack is in and its send has completed.
//! - One absolute `Timeout` waits for the connection's earliest deadline, so a replica that
//!   stops answering fails after `--replica_timeout`.
//!
//! When a connection fails (closed, reset, a protocol error, a timeout) its socket is shut
//! down, which ends the send and receive in flight; once both have completed, every write
//! outstanding on it finishes as failed, the job stops, and the run fails naming the
//! replica (`ReplicasFailed`). So a leg never finishes, and its slot's buffer is never
//! reused, while the kernel may still read it; and once every IO has completed, no
//! operation but a timer is left in flight.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::mem::ManuallyDrop;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use anyhow::Result;
use io_uring::{opcode, squeue, types};

use super::health::ReplicasFailed;
use crate::clock;
use crate::engine::legs::{ExtraLegs, IoDesc, user_data};
use crate::results::stats::Dir;
use replica::client::{Event, ReplicaConn, ReplicaError};
use replica::protocol::{AckStatus, FRAME_HEADER_LEN};

/// Slot numbers of a connection's own operations (IO slots are below 4096); the leg byte of
/// their user_data says which connection.
const RECV: u32 = u32::MAX;
const SEND: u32 = u32::MAX - 1;
const TIMER: u32 = u32::MAX - 2;
const NOP: u32 = u32::MAX - 3;
/// Operations one connection can have queued between two submissions: one of each.
const OPS_PER_LINK: u32 = 4;
/// Frames one `SendMsg` carries at most (two iovecs each).
const MAX_BATCH: usize = 64;

/// One write on one connection, indexed by the IO's slot.
#[derive(Clone, Copy)]
struct Write {
    /// The leg was started and has not finished.
    active: bool,
    offset: u64,
    header: [u8; FRAME_HEADER_LEN],
    data: *const u8,
    len: usize,
    sent: bool,
    acked: bool,
}

const IDLE: Write = Write {
    active: false,
    offset: 0,
    header: [0; FRAME_HEADER_LEN],
    data: std::ptr::null(),
    len: 0,
    sent: false,
    acked: false,
};

/// The send in flight (or to be continued after a short send).
struct Sending {
    inflight: bool,
    /// The slots whose frames it carries.
    slots: Vec<u32>,
    iov: Vec<libc::iovec>,
    /// First iovec not completely sent.
    next: usize,
    /// Boxed so its address stays put while the kernel reads it.
    msg: Box<libc::msghdr>,
}

/// One connection to one replica.
struct Link {
    replica: usize,
    leg: u8,
    sock: TcpStream,
    /// Dropped by hand (see `Drop`): the receive buffer lives in it.
    conn: ManuallyDrop<ReplicaConn>,
    failed: ReplicasFailed,
    writes: Vec<Write>,
    by_id: HashMap<u64, u32>,
    next_id: u64,
    queue: VecDeque<u32>,
    send: Sending,
    recv_inflight: bool,
    timer_inflight: bool,
    timer_ts: Box<types::Timespec>,
    nop_inflight: bool,
    /// The connection failed: its socket is shut down and its writes finish as failed.
    closed: bool,
    /// A failure the next `complete` reports, so the job stops.
    report: bool,
}

/// The legs of one job thread: leg `i + 1` is replica `i`.
pub struct ReplicaLegs {
    names: Vec<String>,
    iodepth: u32,
    links: Vec<Link>,
    failed: ReplicasFailed,
}

// SAFETY: the raw pointers (slot buffers, iovecs, msghdr) point into memory owned by the
// job thread that owns these legs; they are only used from that thread.
unsafe impl Send for ReplicaLegs {}

impl ReplicaLegs {
    /// Legs named `names` (one per replica), with no connection yet.
    pub fn new(names: Vec<String>, iodepth: u32, failed: ReplicasFailed) -> ReplicaLegs {
        ReplicaLegs {
            names,
            iodepth,
            links: Vec::new(),
            failed,
        }
    }

    /// Adds the connection to replica `replica` (in order: 0, 1, …), handshake done.
    pub fn add_link(&mut self, replica: usize, sock: TcpStream, conn: ReplicaConn) {
        debug_assert_eq!(replica, self.links.len());
        let _ = sock.set_nodelay(true);
        self.links.push(Link {
            replica,
            leg: replica as u8 + 1,
            sock,
            conn: ManuallyDrop::new(conn),
            failed: self.failed.clone(),
            writes: vec![IDLE; self.iodepth as usize],
            by_id: HashMap::with_capacity(self.iodepth as usize),
            next_id: 1,
            queue: VecDeque::with_capacity(self.iodepth as usize),
            send: Sending {
                inflight: false,
                slots: Vec::with_capacity(MAX_BATCH),
                iov: Vec::with_capacity(2 * MAX_BATCH),
                next: 0,
                // SAFETY: an all-zero msghdr is a valid empty one.
                msg: Box::new(unsafe { std::mem::zeroed() }),
            },
            recv_inflight: false,
            timer_inflight: false,
            timer_ts: Box::new(types::Timespec::new()),
            nop_inflight: false,
            closed: false,
            report: false,
        });
    }
}

type Push<'a> = &'a mut dyn FnMut(&squeue::Entry) -> Result<()>;

impl ExtraLegs for ReplicaLegs {
    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn legs_for(&self, dir: Dir) -> u8 {
        match dir {
            Dir::Write => self.links.len() as u8,
            Dir::Read => 0,
        }
    }

    fn sqes_per_io(&self) -> u32 {
        (OPS_PER_LINK * self.names.len() as u32).div_ceil(self.iodepth.max(1))
    }

    fn start(&mut self, io: &IoDesc<'_>, push: Push<'_>) -> Result<()> {
        let now = Instant::now();
        for link in &mut self.links {
            link.start(io.slot, io.offset, io.data, now, push)?;
        }
        Ok(())
    }

    fn complete(
        &mut self,
        slot: u32,
        leg: u8,
        result: i32,
        push: Push<'_>,
        done: &mut Vec<(u32, u8)>,
    ) -> Result<()> {
        let Some(link) = self.links.get_mut((leg as usize).wrapping_sub(1)) else {
            return Ok(());
        };
        match slot {
            RECV => link.on_recv(result, done),
            SEND => link.on_send(result, done),
            TIMER => link.on_timer(),
            NOP => link.nop_inflight = false,
            _ => {}
        }
        link.settle(push, Some(done))?;
        if std::mem::take(&mut link.report) {
            return Err(anyhow::Error::new(link.failed.clone()));
        }
        Ok(())
    }
}

impl Link {
    fn start(
        &mut self,
        slot: u32,
        offset: u64,
        data: &[u8],
        now: Instant,
        push: Push<'_>,
    ) -> Result<()> {
        self.writes[slot as usize] = Write {
            active: true,
            offset,
            data: data.as_ptr(),
            len: data.len(),
            ..IDLE
        };
        if self.closed {
            self.failed.health[self.replica].add_writes(1);
            return self.settle(push, None);
        }
        let id = self.next_id;
        self.next_id += 1;
        match self.conn.start_write(id, offset, data, now) {
            Ok(header) => {
                self.writes[slot as usize].header = header;
                self.by_id.insert(id, slot);
                self.queue.push_back(slot);
            }
            // The options rule out sizes the protocol refuses, but a replica may announce a
            // smaller maximum: the connection fails with this write.
            Err(e) => {
                let e = self.conn.io_failed(&io::Error::other(e.to_string()));
                self.fail(e, 1);
            }
        }
        self.settle(push, None)
    }

    /// The connection failed: count what failed with it and shut the socket down, which
    /// completes the send and receive in flight.
    fn fail(&mut self, e: ReplicaError, extra_writes: u64) {
        if self.closed {
            return;
        }
        self.failed.health[self.replica].record(
            &e.cause,
            e.failed_ids.len() as u64 + extra_writes,
            true,
        );
        self.closed = true;
        self.report = true;
        let _ = self.sock.shutdown(Shutdown::Both);
    }

    fn finish(&mut self, slot: u32, done: &mut Vec<(u32, u8)>) {
        self.writes[slot as usize].active = false;
        done.push((slot, self.leg));
    }

    fn on_send(&mut self, res: i32, done: &mut Vec<(u32, u8)>) {
        self.send.inflight = false;
        if self.closed {
            return;
        }
        if res <= 0 {
            let err = if res < 0 {
                io::Error::from_raw_os_error(-res)
            } else {
                io::Error::new(io::ErrorKind::WriteZero, "send made no progress")
            };
            let e = self.conn.io_failed(&err);
            return self.fail(e, 0);
        }
        let s = &mut self.send;
        let mut n = res as usize;
        while n > 0 && s.next < s.iov.len() {
            let v = &mut s.iov[s.next];
            if n >= v.iov_len {
                n -= v.iov_len;
                s.next += 1;
            } else {
                // SAFETY: n < iov_len, so the pointer stays inside the same buffer.
                v.iov_base = unsafe { (v.iov_base as *mut u8).add(n) } as *mut libc::c_void;
                v.iov_len -= n;
                n = 0;
            }
        }
        if s.next < s.iov.len() {
            return; // short: `settle` sends the rest first
        }
        for i in 0..self.send.slots.len() {
            let slot = self.send.slots[i];
            let w = &mut self.writes[slot as usize];
            w.sent = true;
            if w.acked {
                self.finish(slot, done);
            }
        }
        self.send.slots.clear();
    }

    fn on_recv(&mut self, res: i32, done: &mut Vec<(u32, u8)>) {
        self.recv_inflight = false;
        if self.closed {
            return;
        }
        if res < 0 {
            if matches!(-res, libc::EINTR | libc::EAGAIN | libc::ENOBUFS) {
                return; // `settle` receives again
            }
            let e = self.conn.io_failed(&io::Error::from_raw_os_error(-res));
            return self.fail(e, 0);
        }
        if let Err(e) = self.conn.received(res as usize) {
            return self.fail(e, 0);
        }
        while let Some(ev) = self.conn.next_event() {
            let Event::Acked { id, status, .. } = ev else {
                continue;
            };
            let Some(slot) = self.by_id.remove(&id) else {
                continue;
            };
            let w = &mut self.writes[slot as usize];
            w.acked = true;
            if status != AckStatus::Ok {
                // The replica's device failed this write; the connection goes on, the job
                // stops.
                let cause = format!("its write at offset {} failed: {status}", w.offset);
                self.failed.health[self.replica].record(&cause, 1, false);
                self.report = true;
            }
            if self.writes[slot as usize].sent {
                self.finish(slot, done);
            }
        }
    }

    fn on_timer(&mut self) {
        self.timer_inflight = false;
        if self.closed {
            return;
        }
        if let Err(e) = self.conn.check_timeouts(Instant::now()) {
            self.fail(e, 0);
        }
    }

    /// Queues what the connection needs next. On a failed connection whose send and
    /// receive have completed, finishes every write still outstanding (from `start`, which
    /// has no `done`, a no-op brings `complete` around to do it).
    fn settle(&mut self, push: Push<'_>, done: Option<&mut Vec<(u32, u8)>>) -> Result<()> {
        if self.closed {
            if self.recv_inflight || self.send.inflight {
                return Ok(());
            }
            self.queue.clear();
            self.by_id.clear();
            self.send.slots.clear();
            let active = (0..self.writes.len() as u32).filter(|&s| self.writes[s as usize].active);
            match done {
                Some(done) => {
                    for slot in active.collect::<Vec<_>>() {
                        self.finish(slot, done);
                    }
                }
                None if !self.nop_inflight => {
                    push(
                        &opcode::Nop::new()
                            .build()
                            .user_data(user_data(NOP, self.leg)),
                    )?;
                    self.nop_inflight = true;
                }
                None => {}
            }
            return Ok(());
        }
        let fd = types::Fd(self.sock.as_raw_fd());
        if !self.send.inflight {
            if self.send.slots.is_empty() && !self.queue.is_empty() {
                self.batch();
            }
            if !self.send.slots.is_empty() {
                let s = &mut self.send;
                let rest = &s.iov[s.next..];
                s.msg.msg_iov = rest.as_ptr() as *mut libc::iovec;
                s.msg.msg_iovlen = rest.len() as _;
                let e = opcode::SendMsg::new(fd, &*s.msg as *const libc::msghdr)
                    .flags((libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32)
                    .build()
                    .user_data(user_data(SEND, self.leg));
                push(&e)?;
                s.inflight = true;
            }
        }
        if !self.recv_inflight && self.conn.outstanding() > 0 {
            let buf = self.conn.recv_buf();
            if !buf.is_empty() {
                let e = opcode::Recv::new(fd, buf.as_mut_ptr(), buf.len() as u32)
                    .build()
                    .user_data(user_data(RECV, self.leg));
                push(&e)?;
                self.recv_inflight = true;
            }
        }
        if !self.timer_inflight
            && let Some(deadline) = self.conn.next_deadline()
        {
            let at = clock::now_ns()
                + deadline
                    .saturating_duration_since(Instant::now())
                    .as_nanos() as u64;
            *self.timer_ts = types::Timespec::new()
                .sec(at / 1_000_000_000)
                .nsec((at % 1_000_000_000) as u32);
            let e = opcode::Timeout::new(&*self.timer_ts as *const types::Timespec)
                .flags(types::TimeoutFlags::ABS)
                .build()
                .user_data(user_data(TIMER, self.leg));
            push(&e)?;
            self.timer_inflight = true;
        }
        Ok(())
    }

    /// Moves up to `MAX_BATCH` queued frames into the next send.
    fn batch(&mut self) {
        let s = &mut self.send;
        s.iov.clear();
        s.next = 0;
        while s.slots.len() < MAX_BATCH {
            let Some(slot) = self.queue.pop_front() else {
                break;
            };
            let w = &self.writes[slot as usize];
            s.iov.push(libc::iovec {
                iov_base: w.header.as_ptr() as *mut libc::c_void,
                iov_len: FRAME_HEADER_LEN,
            });
            s.iov.push(libc::iovec {
                iov_base: w.data as *mut libc::c_void,
                iov_len: w.len,
            });
            s.slots.push(slot);
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // A receive is only in flight here when the job's ring went away with IO still in
        // flight (the job failed mid-IO): leave its buffer to the process rather than free
        // memory the kernel might still write.
        if !self.recv_inflight {
            // SAFETY: dropped once, here, and never used again.
            unsafe { ManuallyDrop::drop(&mut self.conn) };
        }
    }
}
