//! The client side of replication: [`ReplicaConn`], a sans-IO state machine for one
//! connection to one replica, and [`BlockingClient`], a plain-socket driver of it.
//!
//! `ReplicaConn` does no IO and reads no clock: the caller moves bytes (with io_uring
//! `Send`/`Recv`, or anything else) and passes `now` in. It owns the connection's receive
//! buffer (fixed size, so a misbehaving replica cannot grow it), matches acks to request ids,
//! times out requests, and on failure names the replica and every request that failed.
//!
//! Driving it from an event loop (one connection per job and replica):
//!
//! ```ignore
//! use std::time::{Duration, Instant};
//! use replica::client::{ClientOptions, Event, ReplicaConn};
//! let opts = ClientOptions { token: vec![], volume: "job0".into(), timeout: Duration::from_secs(5) };
//! let mut conn = ReplicaConn::new("198.18.0.2:7000", &opts, Instant::now())?;
//! // after connect(2): send conn.hello() in full, then keep one Recv into conn.recv_buf()
//! // (never touch recv_buf while that Recv is in flight). Start writes after Event::Ready:
//! // writes pipelined behind the hello work too, but if the replica refuses the hello, the
//! // unread writes make its kernel reset the connection and the refusal reason is lost.
//! let data = vec![0u8; 4096];
//! let header = conn.start_write(42, 0, &data, Instant::now())?;
//! // send `header`, then `data`: two iovecs of one SendMsg, both kept alive until it
//! // completes. Keep one send in flight per connection (or chain them with IO_LINK) and
//! // resend the rest of a short send first: separate sends on one TCP socket may interleave.
//! // on a Recv completion of n bytes (0 = the replica closed):
//! let n = 32;
//! if let Err(failure) = conn.received(n) {
//!     // failure.replica, failure.cause, failure.failed_ids: complete those IOs as failed
//! }
//! while let Some(ev) = conn.next_event() {
//!     match ev {
//!         Event::Ready { .. } => {}
//!         Event::Acked { id, sent_at, status } => { /* round trip = now - sent_at */ }
//!     }
//! }
//! // before waiting: wake up no later than conn.next_deadline(), then conn.check_timeouts(now)
//! // a failed Send/Recv: conn.io_failed(&err) gives the same kind of failure
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Semantics: TCP delivers in order or not at all, so a request without an ack after the
//! timeout means the replica or the path to it is stuck: the whole connection fails, and
//! every outstanding request with it. An ack with a non-`Ok` status fails only its own IO.
//! After a failure every call returns the same failure; reconnecting is a new `ReplicaConn`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::decoder::Decoder;
use super::protocol::{
    AckStatus, BLOCK_ALIGN, FRAME_HEADER_LEN, Frame, Hello, HelloStatus, MAX_PAYLOAD,
    MAX_TOKEN_LEN, ProtocolError, VERSION, valid_volume, write_header,
};

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Shared secret the replica expects (empty when it has none).
    pub token: Vec<u8>,
    /// The file on the replica this connection writes (see `protocol::valid_volume`).
    pub volume: String,
    /// How long the handshake and each write may wait for the replica's answer.
    pub timeout: Duration,
}

/// Why a replica connection failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailCause {
    /// The replica sent bytes that break the protocol, or refused the handshake.
    Protocol(ProtocolError),
    /// No hello ack within the timeout.
    HandshakeTimeout(Duration),
    /// No ack for this request within the timeout.
    AckTimeout { id: u64, after: Duration },
    /// An ack for a request that is not outstanding.
    UnknownAck { id: u64 },
    /// The replica closed the connection.
    Closed,
    /// A socket call failed (the connect, a send or a receive).
    Io {
        kind: io::ErrorKind,
        message: String,
    },
}

impl fmt::Display for FailCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailCause::Protocol(e) => write!(f, "{e}"),
            FailCause::HandshakeTimeout(t) => write!(f, "no handshake answer within {t:?}"),
            FailCause::AckTimeout { id, after } => {
                write!(f, "no ack for request {id} within {after:?}")
            }
            FailCause::UnknownAck { id } => write!(f, "ack for unknown request {id}"),
            FailCause::Closed => f.write_str("connection closed by the replica"),
            FailCause::Io { message, .. } => f.write_str(message),
        }
    }
}

/// A failed replica connection: which replica, why, and the requests that failed with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaError {
    pub replica: String,
    pub cause: FailCause,
    /// Requests outstanding when the connection failed; none of them is known to be written.
    pub failed_ids: Vec<u64>,
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replica {} failed: {}; {} outstanding write(s) failed",
            self.replica,
            self.cause,
            self.failed_ids.len()
        )
    }
}

impl std::error::Error for ReplicaError {}

/// A write the connection refuses before sending anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// Longer than the replica accepts (`MAX_PAYLOAD`, or less if the replica said so).
    TooLarge {
        len: usize,
        max: u32,
    },
    /// Offset or length not a multiple of `BLOCK_ALIGN`.
    Unaligned {
        offset: u64,
        len: usize,
    },
    Empty,
    /// This id is still outstanding.
    DuplicateId(u64),
    /// The connection has failed.
    Failed(ReplicaError),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::TooLarge { len, max } => {
                write!(
                    f,
                    "write of {len} bytes exceeds the replica's maximum of {max}"
                )
            }
            SubmitError::Unaligned { offset, len } => write!(
                f,
                "write at offset {offset} of {len} bytes is not aligned to {BLOCK_ALIGN} bytes"
            ),
            SubmitError::Empty => f.write_str("empty write"),
            SubmitError::DuplicateId(id) => write!(f, "request id {id} is already outstanding"),
            SubmitError::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SubmitError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The replica accepted the handshake.
    Ready { max_payload: u32 },
    /// The replica answered request `id`, sent at `sent_at` (the `now` of `start_write`).
    Acked {
        id: u64,
        sent_at: Instant,
        status: AckStatus,
    },
}

/// Counts for one replica connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    pub writes: u64,
    pub acked_ok: u64,
    /// Writes the replica failed (non-`Ok` ack) plus writes lost when the connection failed.
    pub failed: u64,
}

#[derive(Debug)]
enum Phase {
    Handshake { deadline: Instant },
    Ready,
    Failed(ReplicaError),
}

/// One connection to one replica, without IO. See the module documentation.
pub struct ReplicaConn {
    replica: String,
    hello: Vec<u8>,
    timeout: Duration,
    decoder: Decoder,
    phase: Phase,
    max_payload: u32,
    /// Outstanding requests and when each was sent.
    outstanding: HashMap<u64, Instant>,
    /// (deadline, id) in send order; entries of acked requests are skipped lazily.
    deadlines: VecDeque<(Instant, u64)>,
    events: VecDeque<Event>,
    stats: ReplicaStats,
}

impl ReplicaConn {
    /// `replica` names the peer in every error (e.g. its address). Fails if the token or
    /// volume cannot be sent.
    pub fn new(
        replica: impl Into<String>,
        opts: &ClientOptions,
        now: Instant,
    ) -> Result<ReplicaConn, ProtocolError> {
        if opts.token.len() > MAX_TOKEN_LEN {
            return Err(ProtocolError::BadHello {
                what: "token longer than 256 bytes",
            });
        }
        if !valid_volume(&opts.volume) {
            return Err(ProtocolError::BadVolume {
                name: opts.volume.clone(),
            });
        }
        Ok(ReplicaConn {
            replica: replica.into(),
            hello: Hello::new(&opts.token, &opts.volume).encode(),
            timeout: opts.timeout,
            // Acks and hello acks carry no payload.
            decoder: Decoder::new(0),
            phase: Phase::Handshake {
                deadline: now + opts.timeout,
            },
            max_payload: MAX_PAYLOAD,
            outstanding: HashMap::new(),
            deadlines: VecDeque::new(),
            events: VecDeque::new(),
            stats: ReplicaStats::default(),
        })
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The bytes to send first, before any write.
    pub fn hello(&self) -> &[u8] {
        &self.hello
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    pub fn failure(&self) -> Option<&ReplicaError> {
        match &self.phase {
            Phase::Failed(e) => Some(e),
            _ => None,
        }
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }

    /// Registers write `id` (unique among outstanding ones) and returns the frame header to
    /// send, followed by `data`. Allowed before the handshake completes.
    pub fn start_write(
        &mut self,
        id: u64,
        offset: u64,
        data: &[u8],
        now: Instant,
    ) -> Result<[u8; FRAME_HEADER_LEN], SubmitError> {
        if let Phase::Failed(e) = &self.phase {
            return Err(SubmitError::Failed(e.clone()));
        }
        if data.is_empty() {
            return Err(SubmitError::Empty);
        }
        if data.len() > self.max_payload as usize {
            return Err(SubmitError::TooLarge {
                len: data.len(),
                max: self.max_payload,
            });
        }
        if !offset.is_multiple_of(BLOCK_ALIGN) || !(data.len() as u64).is_multiple_of(BLOCK_ALIGN) {
            return Err(SubmitError::Unaligned {
                offset,
                len: data.len(),
            });
        }
        if self.outstanding.contains_key(&id) {
            return Err(SubmitError::DuplicateId(id));
        }
        self.outstanding.insert(id, now);
        self.deadlines.push_back((now + self.timeout, id));
        self.stats.writes += 1;
        Ok(write_header(id, offset, data))
    }

    /// Where the next Recv should put its bytes.
    pub fn recv_buf(&mut self) -> &mut [u8] {
        self.decoder.recv_buf()
    }

    /// `n` bytes arrived in `recv_buf` (0: the replica closed the connection). Queues the
    /// events they complete; fails the connection on a protocol error.
    pub fn received(&mut self, n: usize) -> Result<(), ReplicaError> {
        self.check_failed()?;
        if n == 0 {
            let cause = match self.decoder.finish() {
                Err(e) => FailCause::Protocol(e),
                Ok(()) => FailCause::Closed,
            };
            return Err(self.fail(cause));
        }
        self.decoder.filled(n);
        loop {
            if let Phase::Handshake { .. } = self.phase {
                match self.decoder.next_hello_ack() {
                    Ok(None) => return Ok(()),
                    Ok(Some(ack)) if ack.status == HelloStatus::Ok && ack.version == VERSION => {
                        self.max_payload = ack.max_payload.min(MAX_PAYLOAD);
                        self.phase = Phase::Ready;
                        self.events.push_back(Event::Ready {
                            max_payload: self.max_payload,
                        });
                    }
                    Ok(Some(ack)) => {
                        let status = if ack.status == HelloStatus::Ok {
                            HelloStatus::UnsupportedVersion
                        } else {
                            ack.status
                        };
                        return Err(
                            self.fail(FailCause::Protocol(ProtocolError::Rejected { status }))
                        );
                    }
                    Err(e) => return Err(self.fail(FailCause::Protocol(e))),
                }
                continue;
            }
            let (id, status) = match self.decoder.next_frame() {
                Ok(None) => break,
                Ok(Some(Frame::Ack { id, status })) => (id, status),
                Ok(Some(Frame::Write { .. })) => {
                    return Err(self.fail(FailCause::Protocol(ProtocolError::Malformed {
                        what: "a write frame sent to the client",
                    })));
                }
                Err(e) => return Err(self.fail(FailCause::Protocol(e))),
            };
            let Some(sent_at) = self.outstanding.remove(&id) else {
                return Err(self.fail(FailCause::UnknownAck { id }));
            };
            if status == AckStatus::Ok {
                self.stats.acked_ok += 1;
            } else {
                self.stats.failed += 1;
            }
            self.events.push_back(Event::Acked {
                id,
                sent_at,
                status,
            });
        }
        self.drop_acked_deadlines();
        Ok(())
    }

    /// The next event, in the order the replica's bytes produced them.
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest moment `check_timeouts` may fail the connection (None: nothing waits).
    pub fn next_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Handshake { deadline } => Some(
                self.deadlines
                    .front()
                    .map_or(*deadline, |(d, _)| (*d).min(*deadline)),
            ),
            Phase::Ready => self.deadlines.front().map(|(d, _)| *d),
            Phase::Failed(_) => None,
        }
    }

    /// Fails the connection if the handshake or the oldest outstanding write is overdue.
    pub fn check_timeouts(&mut self, now: Instant) -> Result<(), ReplicaError> {
        self.check_failed()?;
        if let Phase::Handshake { deadline } = self.phase
            && now >= deadline
        {
            return Err(self.fail(FailCause::HandshakeTimeout(self.timeout)));
        }
        self.drop_acked_deadlines();
        if let Some(&(deadline, id)) = self.deadlines.front()
            && now >= deadline
        {
            return Err(self.fail(FailCause::AckTimeout {
                id,
                after: self.timeout,
            }));
        }
        Ok(())
    }

    /// A Send or Recv on this connection failed: the connection fails with it.
    pub fn io_failed(&mut self, err: &io::Error) -> ReplicaError {
        if let Phase::Failed(e) = &self.phase {
            return e.clone();
        }
        self.fail(FailCause::Io {
            kind: err.kind(),
            message: err.to_string(),
        })
    }

    fn check_failed(&self) -> Result<(), ReplicaError> {
        match &self.phase {
            Phase::Failed(e) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn drop_acked_deadlines(&mut self) {
        while let Some((_, id)) = self.deadlines.front() {
            if self.outstanding.contains_key(id) {
                break;
            }
            self.deadlines.pop_front();
        }
    }

    fn fail(&mut self, cause: FailCause) -> ReplicaError {
        let mut failed_ids: Vec<u64> = self.outstanding.drain().map(|(id, _)| id).collect();
        failed_ids.sort_unstable();
        self.deadlines.clear();
        self.stats.failed += failed_ids.len() as u64;
        let err = ReplicaError {
            replica: self.replica.clone(),
            cause,
            failed_ids,
        };
        self.phase = Phase::Failed(err.clone());
        err
    }
}

/// A replica connection over a blocking socket: for tests, tools, and as the reference
/// driver of [`ReplicaConn`]. Never blocks longer than the timeout.
pub struct BlockingClient {
    stream: TcpStream,
    conn: ReplicaConn,
    scratch: Vec<u8>,
}

impl BlockingClient {
    /// Connects and completes the handshake.
    pub fn connect(addr: SocketAddr, opts: &ClientOptions) -> Result<BlockingClient, ReplicaError> {
        let mut conn =
            ReplicaConn::new(addr.to_string(), opts, Instant::now()).map_err(|e| ReplicaError {
                replica: addr.to_string(),
                cause: FailCause::Protocol(e),
                failed_ids: vec![],
            })?;
        let stream = TcpStream::connect_timeout(&addr, opts.timeout)
            .and_then(|s| {
                s.set_nodelay(true)?;
                s.set_write_timeout(Some(opts.timeout))?;
                Ok(s)
            })
            .map_err(|e| conn.io_failed(&e))?;
        let mut c = BlockingClient {
            stream,
            conn,
            scratch: Vec::new(),
        };
        let hello = c.conn.hello().to_vec();
        c.send(&hello)?;
        match c.next_event()? {
            Event::Ready { .. } => Ok(c),
            Event::Acked { id, .. } => Err(c.conn.fail(FailCause::UnknownAck { id })),
        }
    }

    pub fn conn(&self) -> &ReplicaConn {
        &self.conn
    }

    /// The connected socket (timeouts cleared, for an io_uring driver) and its state
    /// machine, ready for writes.
    pub fn into_parts(self) -> Result<(TcpStream, ReplicaConn), ReplicaError> {
        let BlockingClient {
            stream, mut conn, ..
        } = self;
        if let Err(e) = stream
            .set_read_timeout(None)
            .and_then(|_| stream.set_write_timeout(None))
        {
            return Err(conn.io_failed(&e));
        }
        Ok((stream, conn))
    }

    /// Sends write `id` without waiting for its ack.
    pub fn submit(&mut self, id: u64, offset: u64, data: &[u8]) -> Result<(), SubmitError> {
        let header = self.conn.start_write(id, offset, data, Instant::now())?;
        let mut frame = std::mem::take(&mut self.scratch);
        frame.clear();
        frame.extend_from_slice(&header);
        frame.extend_from_slice(data);
        let r = self.send(&frame);
        self.scratch = frame;
        r.map_err(SubmitError::Failed)
    }

    /// Waits for the next ack (or handshake answer), at most until the oldest deadline.
    pub fn next_event(&mut self) -> Result<Event, ReplicaError> {
        loop {
            if let Some(ev) = self.conn.next_event() {
                return Ok(ev);
            }
            let now = Instant::now();
            self.conn.check_timeouts(now)?;
            let wait = self
                .conn
                .next_deadline()
                .map_or(Duration::from_secs(1), |d| d.saturating_duration_since(now))
                .max(Duration::from_millis(1));
            if let Err(e) = self.stream.set_read_timeout(Some(wait)) {
                return Err(self.conn.io_failed(&e));
            }
            match self.stream.read(self.conn.recv_buf()) {
                Ok(n) => self.conn.received(n)?,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(self.conn.io_failed(&e)),
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), ReplicaError> {
        match self.stream.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(self.conn.fail(FailCause::Io {
                    kind: e.kind(),
                    message: format!("send blocked for more than {:?}", self.conn.timeout),
                }))
            }
            Err(e) => Err(self.conn.io_failed(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{HelloAck, ack_frame};

    fn opts() -> ClientOptions {
        ClientOptions {
            token: b"tok".to_vec(),
            volume: "job0".into(),
            timeout: Duration::from_secs(2),
        }
    }

    fn feed(c: &mut ReplicaConn, bytes: &[u8]) -> Result<(), ReplicaError> {
        let buf = c.recv_buf();
        buf[..bytes.len()].copy_from_slice(bytes);
        c.received(bytes.len())
    }

    fn ready(now: Instant) -> ReplicaConn {
        let mut c = ReplicaConn::new("r1", &opts(), now).unwrap();
        assert!(!c.is_ready());
        let ack = HelloAck {
            version: VERSION,
            status: HelloStatus::Ok,
            max_payload: MAX_PAYLOAD,
        };
        feed(&mut c, &ack.encode()).unwrap();
        assert_eq!(
            c.next_event(),
            Some(Event::Ready {
                max_payload: MAX_PAYLOAD
            })
        );
        c
    }

    #[test]
    fn hello_carries_token_and_volume() {
        let c = ReplicaConn::new("r1", &opts(), Instant::now()).unwrap();
        let mut d = Decoder::new(0);
        d.push(c.hello());
        let h = d.next_hello().unwrap().unwrap();
        assert_eq!(h, Hello::new(b"tok", "job0"));
    }

    #[test]
    fn acks_match_requests_in_any_order() {
        let t0 = Instant::now();
        let mut c = ready(t0);
        let data = [1u8; 4096];
        for id in 1..=3 {
            c.start_write(id, id * 4096, &data, t0 + Duration::from_millis(id))
                .unwrap();
        }
        assert_eq!(c.outstanding(), 3);
        let mut acks = ack_frame(3, AckStatus::Ok).to_vec();
        acks.extend_from_slice(&ack_frame(1, AckStatus::IoError(5)));
        // Split inside the second ack.
        feed(&mut c, &acks[..40]).unwrap();
        feed(&mut c, &acks[40..]).unwrap();
        assert_eq!(
            c.next_event(),
            Some(Event::Acked {
                id: 3,
                sent_at: t0 + Duration::from_millis(3),
                status: AckStatus::Ok
            })
        );
        assert_eq!(
            c.next_event(),
            Some(Event::Acked {
                id: 1,
                sent_at: t0 + Duration::from_millis(1),
                status: AckStatus::IoError(5)
            })
        );
        assert_eq!(c.next_event(), None);
        assert_eq!(c.outstanding(), 1);
        assert_eq!(
            c.stats(),
            ReplicaStats {
                writes: 3,
                acked_ok: 1,
                failed: 1
            }
        );
    }

    #[test]
    fn timeout_fails_the_replica_and_every_outstanding_write() {
        let t0 = Instant::now();
        let mut c = ready(t0);
        let data = [0u8; 512];
        c.start_write(10, 0, &data, t0).unwrap();
        c.start_write(11, 512, &data, t0 + Duration::from_millis(500))
            .unwrap();
        feed(&mut c, &ack_frame(10, AckStatus::Ok)).unwrap();
        // The oldest outstanding is now 11, due at t0 + 2.5 s.
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_millis(2500)));
        assert!(c.check_timeouts(t0 + Duration::from_secs(2)).is_ok());
        c.start_write(12, 1024, &data, t0 + Duration::from_secs(2))
            .unwrap();
        let err = c
            .check_timeouts(t0 + Duration::from_millis(2600))
            .unwrap_err();
        assert_eq!(err.replica, c.replica());
        assert_eq!(c.failure(), Some(&err));
        assert!(!c.is_ready());
        assert_eq!(
            err.cause,
            FailCause::AckTimeout {
                id: 11,
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(err.failed_ids, vec![11, 12]);
        assert!(err.to_string().contains("replica r1 failed"));
        assert_eq!(c.stats().failed, 2);
        // Sticky.
        assert!(matches!(
            c.start_write(13, 0, &data, t0),
            Err(SubmitError::Failed(_))
        ));
        assert_eq!(c.received(0), Err(err));
    }

    #[test]
    fn handshake_timeout_and_refusal() {
        let t0 = Instant::now();
        let mut c = ReplicaConn::new("r2", &opts(), t0).unwrap();
        c.start_write(1, 0, &[0; 512], t0).unwrap();
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_secs(2)));
        let err = c.check_timeouts(t0 + Duration::from_secs(3)).unwrap_err();
        assert_eq!(
            err.cause,
            FailCause::HandshakeTimeout(Duration::from_secs(2))
        );
        assert_eq!(err.failed_ids, vec![1]);

        let mut c = ReplicaConn::new("r2", &opts(), t0).unwrap();
        let ack = HelloAck {
            version: VERSION,
            status: HelloStatus::WrongToken,
            max_payload: 0,
        };
        let err = feed(&mut c, &ack.encode()).unwrap_err();
        assert_eq!(
            err.cause,
            FailCause::Protocol(ProtocolError::Rejected {
                status: HelloStatus::WrongToken
            })
        );
        assert!(err.to_string().contains("wrong token"), "{err}");
    }

    #[test]
    fn closed_connection_and_protocol_errors() {
        let t0 = Instant::now();
        let mut c = ready(t0);
        c.start_write(1, 0, &[0; 512], t0).unwrap();
        let err = c.received(0).unwrap_err();
        assert_eq!(err.cause, FailCause::Closed);
        assert_eq!(err.failed_ids, vec![1]);

        let mut c = ready(t0);
        c.start_write(1, 0, &[0; 512], t0).unwrap();
        feed(&mut c, &ack_frame(1, AckStatus::Ok)[..20]).unwrap();
        let err = c.received(0).unwrap_err();
        assert!(matches!(
            err.cause,
            FailCause::Protocol(ProtocolError::Truncated { have: 20, .. })
        ));

        let mut c = ready(t0);
        let err = feed(&mut c, &ack_frame(99, AckStatus::Ok)).unwrap_err();
        assert_eq!(err.cause, FailCause::UnknownAck { id: 99 });

        let mut c = ready(t0);
        let err = feed(&mut c, b"\xffgarbage").unwrap_err();
        assert!(matches!(
            err.cause,
            FailCause::Protocol(ProtocolError::Garbage { first: 0xff })
        ));
    }

    #[test]
    fn refuses_bad_writes_without_failing() {
        let t0 = Instant::now();
        let mut c = ready(t0);
        assert_eq!(
            c.start_write(1, 100, &[0; 512], t0),
            Err(SubmitError::Unaligned {
                offset: 100,
                len: 512
            })
        );
        assert!(matches!(
            c.start_write(1, 0, &vec![0; MAX_PAYLOAD as usize + 512], t0),
            Err(SubmitError::TooLarge { .. })
        ));
        assert_eq!(c.start_write(1, 0, &[], t0), Err(SubmitError::Empty));
        c.start_write(1, 0, &[0; 512], t0).unwrap();
        assert_eq!(
            c.start_write(1, 512, &[0; 512], t0),
            Err(SubmitError::DuplicateId(1))
        );
        assert!(c.failure().is_none());
        assert!(
            ReplicaConn::new(
                "r",
                &ClientOptions {
                    volume: "../x".into(),
                    ..opts()
                },
                t0
            )
            .is_err()
        );
    }
}
