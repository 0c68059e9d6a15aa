//! `loadgen serve`: the replica target. It accepts connections, writes each received block
//! with io_uring and O_DIRECT into the connection's volume file at the block's offset, and
//! acknowledges after the write completes (or on receipt, with `--ack-on-receive`).
//!
//! Concurrency: one thread per connection, each with its own io_uring that carries that
//! connection's socket receives, ack sends and file writes. This mirrors the client (one
//! thread per job, one connection per job and replica), so server threads pair with client
//! jobs and the kernel spreads them over the cores; a peer that stalls, trickles or
//! misbehaves, or a slow write, can only delay its own event loop; and per-connection limits
//! are plain fields rather than shared accounting. The cost, a thread and a small ring per
//! connection, is small for the tens to hundreds of connections a replica sees, and
//! `--max-connections` bounds it. A single ring for all sockets would save those threads but
//! run every connection on one core and make one peer's backlog everyone's.
//!
//! Memory per connection is bounded: the decoder's buffer (one maximum frame), write buffers
//! of at most `MAX_INFLIGHT_BYTES`, and at most `MAX_INFLIGHT` requests between receipt and
//! their ack being sent. At either limit the connection stops reading and TCP pushes back.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, types};

use super::decoder::Decoder;
use super::protocol::{
    AckStatus, BLOCK_ALIGN, Frame, HelloAck, HelloStatus, MAX_PAYLOAD, ProtocolError, VERSION,
    ack_frame,
};

/// Requests between receipt and their ack being sent, per connection.
pub const MAX_INFLIGHT: usize = 64;
/// Bytes of writes submitted to the file and not yet completed, per connection.
pub const MAX_INFLIGHT_BYTES: usize = 8 << 20;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub dir: PathBuf,
    /// The token clients must present; `None` accepts any.
    pub token: Option<Vec<u8>>,
    pub ack_on_receive: bool,
    /// How long one message may take to arrive once its first byte has.
    pub frame_timeout: Duration,
    /// How long a connection may go without a message before it is closed.
    pub idle_timeout: Duration,
    /// Most connections streaming at once; as many more may be in their handshake.
    pub max_connections: usize,
}

/// Who may stream, and who waits for its handshake. A connection counts toward
/// `max_connections` only once its hello is accepted; connections still in their handshake
/// are bounded apart, and at that bound the oldest is closed, so sockets that never send a
/// hello cannot lock real clients out.
struct Admission {
    max: usize,
    streaming: AtomicUsize,
    /// Connections in their handshake, oldest first, with a handle to close each.
    handshakes: Mutex<VecDeque<(u64, TcpStream)>>,
}

impl Admission {
    /// Registers a new connection's handshake, closing the oldest one waiting if full.
    fn handshake_started(&self, id: u64, stream: &TcpStream) {
        let mut h = self.handshakes.lock().unwrap_or_else(|e| e.into_inner());
        if h.len() >= self.max
            && let Some((old, s)) = h.pop_front()
        {
            tracing::info!(
                conn = old,
                "connection closed: no hello before {} newer connections",
                self.max
            );
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Ok(handle) = stream.try_clone() {
            h.push_back((id, handle));
        }
    }

    fn handshake_ended(&self, id: u64) {
        let mut h = self.handshakes.lock().unwrap_or_else(|e| e.into_inner());
        h.retain(|(i, _)| *i != id);
    }

    /// A streaming slot, if one is free.
    fn start_streaming(&self) -> bool {
        if self.streaming.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.streaming.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    fn stop_streaming(&self) {
        self.streaming.fetch_sub(1, Ordering::AcqRel);
    }
}

/// TCP keepalive probes after 30 s of silence and unacknowledged data given up after 60 s:
/// a peer that vanished without closing (power loss, a cut link) is noticed in about a
/// minute.
fn keepalive(stream: &TcpStream) {
    let fd = stream.as_raw_fd();
    let set = |level: i32, opt: i32, v: libc::c_int| {
        // SAFETY: setsockopt with a pointer to an int and its size.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 30);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 60_000);
}

/// Checks that `dir` takes O_DIRECT writes (tmpfs before Linux 6.6 and some FUSE file
/// systems do not), so a misconfigured replica fails at start, not on the first write.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("--dir {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("--dir {}: not a directory", dir.display()));
    }
    let probe = dir.join(format!(".loadgen-serve-probe-{}", std::process::id()));
    let result = (|| -> io::Result<()> {
        let f = open_volume(&probe)?;
        let buf = AlignedBuf::from_slice(&[0u8; 4096]);
        let n = pwrite(&f, buf.as_slice(), 0)?;
        if n != 4096 {
            return Err(io::Error::other("short write"));
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&probe);
    result.map_err(|e| format!("--dir {}: O_DIRECT writes fail: {e}", dir.display()))
}

fn pwrite(f: &File, buf: &[u8], off: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    f.write_at(buf, off)
}

fn open_volume(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// A listening replica. `run` serves until the process ends.
pub struct Server {
    listener: TcpListener,
    config: Arc<ServerConfig>,
}

impl Server {
    pub fn bind(config: ServerConfig) -> Result<Server, String> {
        check_dir(&config.dir)?;
        IoUring::new(8).map_err(|e| format!("io_uring is not available: {e}"))?;
        let listener = TcpListener::bind(config.listen)
            .map_err(|e| format!("--listen {}: {e}", config.listen))?;
        Ok(Server {
            listener,
            config: Arc::new(config),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn run(self) -> io::Result<()> {
        tracing::info!(
            listen = %self.local_addr()?,
            dir = %self.config.dir.display(),
            token_required = self.config.token.is_some(),
            ack_on_receive = self.config.ack_on_receive,
            "listening"
        );
        let admission = Arc::new(Admission {
            max: self.config.max_connections,
            streaming: AtomicUsize::new(0),
            handshakes: Mutex::new(VecDeque::new()),
        });
        let next_id = AtomicU64::new(1);
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    // Out of fds or a connection reset before accept: keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            let peer = stream
                .peer_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string());
            keepalive(&stream);
            admission.handshake_started(id, &stream);
            let config = Arc::clone(&self.config);
            let adm = Arc::clone(&admission);
            let spawned = std::thread::Builder::new()
                .name(format!("conn-{id}"))
                .stack_size(256 << 10)
                .spawn(move || {
                    tracing::info!(conn = id, peer = %peer, "connection start");
                    let (summary, reason) = Connection::serve(stream, &config, &adm, id);
                    tracing::info!(
                        conn = id,
                        peer = %peer,
                        summary = %summary,
                        reason = %reason,
                        "connection end"
                    );
                });
            if let Err(e) = spawned {
                admission.handshake_ended(id);
                tracing::warn!(conn = id, error = %e, "no thread for the connection");
            }
        }
        Ok(())
    }
}

/// A 4 KiB-aligned heap buffer (O_DIRECT needs aligned memory).
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    len: usize,
}

impl AlignedBuf {
    /// A copy of `data`, in memory aligned to 4 KiB and padded to a multiple of it.
    fn from_slice(data: &[u8]) -> AlignedBuf {
        let len = data.len();
        let layout = std::alloc::Layout::from_size_align(len.max(1).next_multiple_of(4096), 4096)
            .expect("buffer layout");
        // SAFETY: the layout has a non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: the allocation holds at least `len` bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), len) };
        AlignedBuf { ptr, layout, len }
    }
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were initialised in `from_slice`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// SAFETY: a plain owned allocation.
unsafe impl Send for AlignedBuf {}

const RECV: u64 = u64::MAX;
const SEND: u64 = u64::MAX - 1;

struct WriteSlot {
    id: u64,
    buf: AlignedBuf,
}

#[derive(PartialEq, Eq)]
enum Phase {
    Handshake,
    Streaming,
    /// No more reading: finish writes, send what acks remain, then end with the reason.
    Draining,
    /// Broken stream: the socket is shut down; wait for the kernel to give buffers back.
    Closing,
}

struct Connection<'a> {
    config: &'a ServerConfig,
    admission: &'a Admission,
    id: u64,
    /// Holds one of the `max_connections` streaming slots.
    streaming: bool,
    /// When the last bytes arrived (the idle deadline runs from there).
    last_recv: Instant,
    stream: TcpStream,
    ring: IoUring,
    decoder: Decoder,
    phase: Phase,
    reason: Option<String>,
    file: Option<File>,
    volume: String,
    /// When the first byte of the message being received arrived (the read deadline runs
    /// from there); `None` between messages.
    item_started: Option<Instant>,
    recv_inflight: bool,
    eof: bool,
    /// Acks queued for the next send, and the bytes of the send in flight.
    acks: Vec<u8>,
    sending: Vec<u8>,
    sent: usize,
    send_inflight: bool,
    slots: Vec<Option<WriteSlot>>,
    free_slots: Vec<usize>,
    writes_inflight: usize,
    write_bytes_inflight: usize,
    /// Requests received whose ack has not been sent yet.
    open_requests: usize,
    /// Acks inside `sending`.
    acks_in_send: usize,
    writes: u64,
    bytes: u64,
}

impl<'a> Connection<'a> {
    /// Serves one connection to its end; returns a summary and the reason it ended.
    fn serve(
        stream: TcpStream,
        config: &'a ServerConfig,
        admission: &'a Admission,
        id: u64,
    ) -> (String, String) {
        let ring = match IoUring::new((MAX_INFLIGHT as u32 + 4).next_power_of_two()) {
            Ok(r) => r,
            Err(e) => {
                admission.handshake_ended(id);
                return (String::new(), format!("no io_uring for it: {e}"));
            }
        };
        let _ = stream.set_nodelay(true);
        let mut c = Connection {
            config,
            admission,
            id,
            streaming: false,
            last_recv: Instant::now(),
            stream,
            ring,
            decoder: Decoder::new(MAX_PAYLOAD),
            phase: Phase::Handshake,
            reason: None,
            file: None,
            volume: String::new(),
            item_started: Some(Instant::now()),
            recv_inflight: false,
            eof: false,
            acks: Vec::with_capacity(MAX_INFLIGHT * 32),
            sending: Vec::with_capacity(MAX_INFLIGHT * 32),
            sent: 0,
            send_inflight: false,
            slots: (0..MAX_INFLIGHT).map(|_| None).collect(),
            free_slots: (0..MAX_INFLIGHT).rev().collect(),
            writes_inflight: 0,
            write_bytes_inflight: 0,
            open_requests: 0,
            acks_in_send: 0,
            writes: 0,
            bytes: 0,
        };
        let reason = c.event_loop();
        admission.handshake_ended(id);
        if c.streaming {
            admission.stop_streaming();
        }
        let summary = if c.volume.is_empty() {
            format!("after {} writes", c.writes)
        } else {
            format!(
                "(volume {}) after {} writes, {} bytes",
                c.volume, c.writes, c.bytes
            )
        };
        (summary, reason)
    }

    fn ops_inflight(&self) -> bool {
        self.recv_inflight || self.send_inflight || self.writes_inflight > 0
    }

    fn event_loop(&mut self) -> String {
        loop {
            self.progress();
            if !self.ops_inflight() {
                return self.reason.take().unwrap_or_else(|| "ended".to_string());
            }
            if let Err(e) = self.wait() {
                // The ring itself failed: buffers the kernel may still write into must not
                // be freed, so leak them and end the connection.
                let reason = format!("io_uring failed: {e}");
                let _ = self.stream.shutdown(Shutdown::Both);
                std::mem::forget(std::mem::take(&mut self.slots));
                std::mem::forget(std::mem::replace(&mut self.decoder, Decoder::new(0)));
                std::mem::forget(std::mem::take(&mut self.sending));
                return reason;
            }
            let done: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (ud, res) in done {
                match ud {
                    RECV => self.on_recv(res),
                    SEND => self.on_send(res),
                    slot => self.on_write(slot as usize, res),
                }
            }
        }
    }

    /// Waits for at least one completion, no longer than the read deadline.
    fn wait(&mut self) -> io::Result<()> {
        let deadline = match (self.recv_inflight, self.item_started) {
            (true, Some(t)) if matches!(self.phase, Phase::Handshake | Phase::Streaming) => {
                Some(t + self.config.frame_timeout)
            }
            (true, None) if self.phase == Phase::Streaming => {
                Some(self.last_recv + self.config.idle_timeout)
            }
            _ => None,
        };
        let result = match deadline {
            None => self.ring.submit_and_wait(1),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                let ts = types::Timespec::from(left.max(Duration::from_micros(1)));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match result {
            Ok(_) => Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::ETIME)
                    || e.raw_os_error() == Some(libc::EINTR) =>
            {
                if let Some(d) = deadline
                    && Instant::now() >= d
                    && self.item_started.is_none()
                {
                    self.close(format!(
                        "idle: no message for {:?}; peer gone?",
                        self.config.idle_timeout
                    ));
                } else if let Some(d) = deadline
                    && Instant::now() >= d
                {
                    let what = match self.incomplete() {
                        Some(ProtocolError::Truncated { have, need }) => {
                            format!(" (got {have} of {need} bytes)")
                        }
                        _ => String::new(),
                    };
                    self.close(format!(
                        "read deadline: message not complete within {:?}{what}; peer too slow or stalled",
                        self.config.frame_timeout
                    ));
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn incomplete(&self) -> Option<ProtocolError> {
        match self.phase {
            Phase::Handshake => self.decoder.finish_hello().err(),
            _ => self.decoder.finish().err(),
        }
    }

    /// Parses what arrived, starts writes, sends acks and re-arms the receive, as far as the
    /// limits allow. Decoder memory is only touched while no receive is in flight.
    fn progress(&mut self) {
        if !self.recv_inflight && matches!(self.phase, Phase::Handshake | Phase::Streaming) {
            self.parse();
        }
        if self.phase == Phase::Draining
            && self.writes_inflight == 0
            && self.acks.is_empty()
            && !self.send_inflight
            && !self.recv_inflight
        {
            // Everything answered: end (the caller sees no ops in flight).
            let _ = self.stream.shutdown(Shutdown::Both);
            return;
        }
        self.start_send();
        if !self.recv_inflight
            && !self.eof
            && matches!(self.phase, Phase::Handshake | Phase::Streaming)
            && !self.at_limit()
        {
            if self.decoder.buffered() > 0 && self.item_started.is_none() {
                self.item_started = Some(Instant::now());
            }
            let buf = self.decoder.recv_buf();
            if buf.is_empty() {
                // Only complete messages are buffered; parsing them comes first.
                return;
            }
            let (ptr, len) = (buf.as_mut_ptr(), buf.len().min(u32::MAX as usize) as u32);
            let sqe = opcode::Recv::new(types::Fd(self.stream.as_raw_fd()), ptr, len)
                .build()
                .user_data(RECV);
            // SAFETY: the decoder's buffer outlives the op (the loop waits for every op before
            // the connection is dropped) and is not touched until the completion arrives.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                self.recv_inflight = true;
            }
        }
    }

    /// True while the connection holds as much as it may: it neither parses nor receives.
    fn at_limit(&self) -> bool {
        self.open_requests >= MAX_INFLIGHT
            || self.write_bytes_inflight >= MAX_INFLIGHT_BYTES
            || self.free_slots.is_empty()
    }

    fn parse(&mut self) {
        let mut completed = false;
        loop {
            if self.phase == Phase::Handshake {
                match self.decoder.next_hello() {
                    Ok(None) => break,
                    Ok(Some(hello)) => self.on_hello(hello),
                    Err(e) => return self.on_protocol_error(e),
                }
                if self.phase != Phase::Streaming {
                    return;
                }
                completed = true;
                continue;
            }
            if self.at_limit() {
                // Leave the rest buffered; completions resume parsing, and the read deadline
                // restarts when receiving does.
                self.item_started = None;
                return;
            }
            match self.decoder.next_frame() {
                Ok(None) => break,
                Ok(Some(Frame::Write { id, offset, data })) => {
                    completed = true;
                    let len = data.len();
                    let aligned = offset.is_multiple_of(BLOCK_ALIGN)
                        && (len as u64).is_multiple_of(BLOCK_ALIGN)
                        && offset.checked_add(len as u64).is_some();
                    self.open_requests += 1;
                    self.writes += 1;
                    if !aligned {
                        self.queue_ack(id, AckStatus::Invalid);
                        continue;
                    }
                    let buf = AlignedBuf::from_slice(data);
                    self.bytes += len as u64;
                    self.submit_write(id, offset, buf);
                    if self.config.ack_on_receive {
                        self.queue_ack(id, AckStatus::Ok);
                    }
                }
                Ok(Some(Frame::Ack { .. })) => {
                    return self.on_protocol_error(ProtocolError::Malformed {
                        what: "an ack frame sent to the server",
                    });
                }
                Err(e) => return self.on_protocol_error(e),
            }
        }
        // A message that completed ends its deadline; bytes left over start the next one's.
        // Before the hello, the deadline runs from the accept.
        if completed || (self.decoder.buffered() == 0 && self.phase == Phase::Streaming) {
            self.item_started = (self.decoder.buffered() > 0).then(Instant::now);
        }
    }

    fn on_hello(&mut self, hello: super::protocol::Hello) {
        let refuse = |c: &mut Self, status: HelloStatus, reason: String| {
            c.reply_hello(status);
            c.reason = Some(reason);
            c.phase = Phase::Draining;
        };
        if let Err(e) = hello.verify(self.config.token.as_deref()) {
            let status = match e {
                ProtocolError::WrongToken => HelloStatus::WrongToken,
                _ => HelloStatus::BadVolume,
            };
            return refuse(self, status, format!("handshake refused: {e}"));
        }
        self.admission.handshake_ended(self.id);
        if !self.admission.start_streaming() {
            return refuse(
                self,
                HelloStatus::Busy,
                format!(
                    "refused: already {} connections streaming",
                    self.config.max_connections
                ),
            );
        }
        self.streaming = true;
        let path = self.config.dir.join(&hello.volume);
        match open_volume(&path) {
            Ok(f) => {
                self.file = Some(f);
                self.volume = hello.volume;
                self.reply_hello(HelloStatus::Ok);
                self.phase = Phase::Streaming;
            }
            Err(e) => refuse(
                self,
                HelloStatus::VolumeUnavailable,
                format!("handshake refused: cannot open {}: {e}", path.display()),
            ),
        }
    }

    fn reply_hello(&mut self, status: HelloStatus) {
        let ack = HelloAck {
            version: VERSION,
            status,
            max_payload: MAX_PAYLOAD,
        };
        self.acks.extend_from_slice(&ack.encode());
    }

    fn on_protocol_error(&mut self, e: ProtocolError) {
        if let ProtocolError::UnsupportedVersion { .. } = e {
            // Tell the client which version this side speaks before closing.
            self.reply_hello(HelloStatus::UnsupportedVersion);
            self.reason = Some(format!("handshake refused: {e}"));
            self.phase = Phase::Draining;
            return;
        }
        self.close(format!("protocol error: {e}"));
    }

    /// Ends a broken connection: shutting the socket down completes its pending operations.
    fn close(&mut self, reason: String) {
        if self.phase == Phase::Closing {
            return;
        }
        self.reason = Some(reason);
        self.phase = Phase::Closing;
        self.acks.clear();
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    fn submit_write(&mut self, id: u64, offset: u64, buf: AlignedBuf) {
        let slot = self.free_slots.pop().expect("a free slot was checked");
        let fd = self
            .file
            .as_ref()
            .expect("file opened at handshake")
            .as_raw_fd();
        let sqe = opcode::Write::new(types::Fd(fd), buf.as_slice().as_ptr(), buf.len as u32)
            .offset(offset)
            .build()
            .user_data(slot as u64);
        self.write_bytes_inflight += buf.len;
        self.slots[slot] = Some(WriteSlot { id, buf });
        // The ring has room for every slot plus the receive and the send.
        // SAFETY: the buffer lives in `slots` until the completion for this slot arrives.
        if unsafe { self.ring.submission().push(&sqe) }.is_err() {
            let _ = self.ring.submit();
            // SAFETY: as above.
            unsafe { self.ring.submission().push(&sqe) }.expect("ring sized for all slots");
        }
        self.writes_inflight += 1;
    }

    fn on_write(&mut self, slot: usize, res: i32) {
        let Some(WriteSlot { id, buf }) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.free_slots.push(slot);
        self.writes_inflight -= 1;
        self.write_bytes_inflight -= buf.len;
        let status = if res < 0 {
            AckStatus::IoError((-res) as u32)
        } else if res as usize != buf.len {
            AckStatus::IoError(0)
        } else {
            AckStatus::Ok
        };
        if status != AckStatus::Ok {
            tracing::warn!(
                volume = %self.volume,
                request = id,
                status = %status,
                "write failed"
            );
        }
        if !self.config.ack_on_receive && self.phase != Phase::Closing {
            self.queue_ack(id, status);
        } else if !self.config.ack_on_receive {
            self.open_requests -= 1;
        }
    }

    fn queue_ack(&mut self, id: u64, status: AckStatus) {
        self.acks.extend_from_slice(&ack_frame(id, status));
    }

    fn start_send(&mut self) {
        if self.send_inflight || self.phase == Phase::Closing {
            return;
        }
        if self.sent == self.sending.len() {
            if self.acks.is_empty() {
                return;
            }
            std::mem::swap(&mut self.acks, &mut self.sending);
            self.acks.clear();
            self.sent = 0;
            // Hello acks are 16 bytes and answer no request; only frames count.
            self.acks_in_send = self.sending.len() / 32;
        }
        let rest = &self.sending[self.sent..];
        let sqe = opcode::Send::new(
            types::Fd(self.stream.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(SEND);
        // SAFETY: `sending` is not modified while the send is in flight.
        if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
            self.send_inflight = true;
        }
    }

    fn on_send(&mut self, res: i32) {
        self.send_inflight = false;
        if res < 0 {
            let e = io::Error::from_raw_os_error(-res);
            self.close(format!("sending acks failed: {e}"));
            return;
        }
        self.sent += res as usize;
        if self.sent == self.sending.len() {
            self.open_requests -= self.acks_in_send;
            self.acks_in_send = 0;
        }
    }

    fn on_recv(&mut self, res: i32) {
        self.recv_inflight = false;
        if self.phase == Phase::Closing {
            return;
        }
        if res < 0 {
            let e = io::Error::from_raw_os_error(-res);
            if res == -libc::EINTR || res == -libc::EAGAIN {
                return;
            }
            self.close(format!("receive failed: {e}"));
            return;
        }
        if res == 0 {
            self.eof = true;
            if let Some(e) = self.incomplete() {
                self.close(format!("protocol error: {e}"));
            } else {
                self.reason = Some("peer closed the connection".to_string());
                self.phase = Phase::Draining;
            }
            return;
        }
        self.decoder.filled(res as usize);
        self.last_recv = Instant::now();
        if self.item_started.is_none() {
            self.item_started = Some(Instant::now());
        }
    }
}
