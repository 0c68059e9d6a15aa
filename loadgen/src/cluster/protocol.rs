//! The job service's messages: one JSON object per line, each with a `type`. The controller
//! speaks first (`hello` with its version and the token), then every exchange is a request
//! and its answer, except while a job runs: the host sends `running` every second until
//! its `result`, and the controller may send `stop`. docs/loadgen.md describes the exchange.
//!
//! Every side reads a message against a limit on its length and a deadline for the whole of
//! it (not for each read), so a peer that trickles or never ends a line costs little.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::console::plain;

/// Longest line a host reads before the token is checked: a hello fits many times over.
pub const MAX_HELLO: u64 = 4 << 10;
/// Longest line a host reads after the hello: a job order with its job files.
pub const MAX_ORDER: u64 = 4 << 20;
/// Longest message a controller takes from a host: its result, with the run record (one
/// agent sampled every second takes about 7 KB a second: two and a half hours fit).
pub const MAX_RESULT: u64 = 128 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    /// Controller: its version, and the serve side's token (hex) if it has one.
    Hello { version: String, token: String },
    /// Host: accepted; its version and the name of its machine.
    Welcome { version: String, hostname: String },
    /// Either side: refused or failed, and why (one line).
    Error { message: String },
    /// Controller: read your clock.
    Clock,
    /// Host: its wall clock, nanoseconds since the Unix epoch.
    Time { unix_ns: u64 },
    /// Controller: the job to check and prepare under `name`: `loadgen run` arguments, with
    /// job files sent by content.
    Job {
        name: String,
        args: Vec<String>,
        files: Vec<JobFile>,
    },
    /// Host: the job is checked and its files laid out; waiting for `start`.
    Ready,
    /// Controller: start at this instant of the host's clock.
    Start { unix_ns: u64 },
    /// Controller: do not start (another host refused its job).
    Abort,
    /// Host: the job runs (sent every second).
    Running { elapsed_s: f64 },
    /// Controller: stop the running job now and send what it measured.
    Stop,
    /// Host: the job ended. `exit` is `loadgen run`'s status; `record` its run record
    /// (JSON text) when it wrote one; `log` the last lines it printed.
    Result {
        exit: i32,
        stopped: bool,
        record: Option<String>,
        log: String,
    },
}

/// A job file: its name on the controller's command line and its content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobFile {
    pub arg: String,
    pub text: String,
}

impl Msg {
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Welcome { .. } => "welcome",
            Msg::Error { .. } => "error",
            Msg::Clock => "clock",
            Msg::Time { .. } => "time",
            Msg::Job { .. } => "job",
            Msg::Ready => "ready",
            Msg::Start { .. } => "start",
            Msg::Abort => "abort",
            Msg::Running { .. } => "running",
            Msg::Stop => "stop",
            Msg::Result { .. } => "result",
        }
    }
}

pub fn send(w: &mut impl Write, m: &Msg) -> Result<(), String> {
    let mut line = serde_json::to_vec(m).map_err(|e| e.to_string())?;
    line.push(b'\n');
    w.write_all(&line)
        .and_then(|()| w.flush())
        .map_err(|e| format!("sending {}: {e}", m.kind()))
}

/// Sends `m` within `within` in all, however slowly the peer takes it.
pub fn send_within(s: &TcpStream, m: &Msg, within: Duration) -> Result<(), String> {
    let mut line = serde_json::to_vec(m).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let end = Instant::now() + within;
    let mut done = 0;
    let stalled = || {
        format!(
            "sending {}: not taken within {} s",
            m.kind(),
            within.as_secs_f64()
        )
    };
    while done < line.len() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(stalled());
        }
        s.set_write_timeout(Some(left))
            .map_err(|e| format!("sending {}: {e}", m.kind()))?;
        match (&*s).write(&line[done..]) {
            Ok(0) => return Err(format!("sending {}: the connection closed", m.kind())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(stalled());
            }
            Err(e) => return Err(format!("sending {}: {e}", m.kind())),
        }
    }
    Ok(())
}

/// `4 KiB`, `64 MiB`.
pub fn size_name(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{} MiB", n >> 20)
    } else {
        format!("{} KiB", n >> 10)
    }
}

/// The next message, of at most `max` bytes; `Ok(None)` when the peer closed the
/// connection between messages.
pub fn receive<R: BufRead>(r: &mut R, max: u64) -> Result<Option<Msg>, String> {
    let mut line = Vec::new();
    let n = <&mut R as std::io::Read>::take(r, max + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                "no complete message within the timeout".to_string()
            }
            _ => e.to_string(),
        })?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        if line.len() as u64 > max {
            return Err(format!(
                "a message longer than {}, the most taken here",
                size_name(max)
            ));
        }
        return Err("the connection closed in the middle of a message".into());
    }
    parse(&line).map(Some)
}

/// A connection read against a deadline for a whole message or exchange, however the
/// bytes trickle in; with `per_mib`, each MiB that arrives moves the deadline that much
/// later (a large result on a slow link is not a peer that stalls).
pub struct Deadline {
    stream: std::sync::Arc<TcpStream>,
    at: Option<Instant>,
    per_mib: Duration,
    since: u64,
}

impl Deadline {
    pub fn new(stream: std::sync::Arc<TcpStream>) -> Deadline {
        Deadline {
            stream,
            at: None,
            per_mib: Duration::ZERO,
            since: 0,
        }
    }

    /// What is read from now on must arrive within `d` (`None`: no deadline).
    pub fn within(&mut self, d: Option<Duration>) {
        self.at = d.map(|d| Instant::now() + d);
        self.since = 0;
    }

    /// Gives each MiB read this much more time.
    pub fn per_mib(&mut self, d: Duration) {
        self.per_mib = d;
    }
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = match self.at {
            None => None,
            Some(at) => {
                let extra = self.per_mib * (self.since >> 20) as u32;
                let left = (at + extra).saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
                Some(left)
            }
        };
        self.stream.set_read_timeout(left)?;
        let n = (&*self.stream).read(buf)?;
        self.since += n as u64;
        Ok(n)
    }
}

/// How long a peer may leave data unacknowledged, or an idle connection unanswered, before
/// it is taken for gone: before a job starts, when little crosses the connection.
pub const GONE_WHILE_QUIET: Duration = Duration::from_secs(10);
/// While a job runs: its own traffic may congest the network the connection crosses (a
/// shallow switch buffer drops segments through several retransmission timeouts).
pub const GONE_WHILE_RUNNING: Duration = Duration::from_secs(20);

/// Settings of a job-service connection on either side: no delay for the small messages,
/// writes that give up, and a peer that vanishes without a word (a link down, a host off)
/// noticed after `gone` (keepalive while idle, `TCP_USER_TIMEOUT` while data waits).
pub fn tune(s: &TcpStream, gone: Duration) {
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    use std::os::fd::AsRawFd;
    let fd = s.as_raw_fd();
    let set = |level: i32, opt: i32, v: i32| {
        // SAFETY: setsockopt with a pointer to an int of the given size, on our own socket.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                &v as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
    };
    let secs = gone.as_secs().max(2) as i32;
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 2);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, secs);
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, secs * 1000);
}

/// One line as a message, or what is wrong with it.
pub fn parse(line: &[u8]) -> Result<Msg, String> {
    serde_json::from_slice(line).map_err(|e| {
        let shown: String = String::from_utf8_lossy(line)
            .chars()
            .take(60)
            .collect::<String>()
            .trim_end()
            .to_string();
        format!("not a job-service message ({e}): {shown:?}")
    })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares without stopping at the first difference, so the time taken says nothing about
/// how much of a guessed token was right.
pub fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A job's name is a plain name: it becomes the agent's name in the record and a prefix of
/// replica volumes, so nothing in it may read as more than a name.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "refused: the job name {:?} is not a plain name (letters, digits, `.`, `_`, `-` and `:`, at most 64)",
            plain(name, 64)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_one_per_line() {
        let msgs = [
            Msg::Hello {
                version: "0.3.0".into(),
                token: hex(b"s3cret"),
            },
            Msg::Clock,
            Msg::Job {
                name: "a".into(),
                args: vec!["--rw=write".into(), "x.fio".into()],
                files: vec![JobFile {
                    arg: "x.fio".into(),
                    text: "[w]\nrw=write\n".into(),
                }],
            },
            Msg::Result {
                exit: 0,
                stopped: false,
                record: Some("{}".into()),
                log: "line\n".into(),
            },
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            send(&mut buf, m).unwrap();
        }
        assert_eq!(buf.iter().filter(|&&b| b == b'\n').count(), msgs.len());
        let mut r = std::io::Cursor::new(buf);
        for m in &msgs {
            assert_eq!(receive(&mut r, MAX_ORDER).unwrap().as_ref(), Some(m));
        }
        assert_eq!(receive(&mut r, MAX_ORDER).unwrap(), None);
        assert_eq!(hex(b"s3cret"), "733363726574");
    }

    #[test]
    fn bytes_that_are_not_a_message_are_named() {
        let rx = |b: &[u8]| receive(&mut std::io::Cursor::new(b.to_vec()), MAX_HELLO);
        let e = rx(b"GET / HTTP/1.1\r\n").unwrap_err();
        assert!(e.starts_with("not a job-service message"), "{e}");
        assert!(e.contains("GET / HTTP/1.1"), "{e}");
        let e = rx(b"{\"type\":\"launch\"}\n");
        assert!(e.unwrap_err().contains("unknown variant `launch`"));
        let e = rx(b"{\"type\":\"clock\"");
        assert_eq!(
            e.unwrap_err(),
            "the connection closed in the middle of a message"
        );
        let e = rx(&[0xff, 0xfe, b'\n']).unwrap_err();
        assert!(e.starts_with("not a job-service message"), "{e}");
        let e = rx(&vec![b'x'; 100_000]).unwrap_err();
        assert_eq!(e, "a message longer than 4 KiB, the most taken here");
    }

    /// A peer that sends a byte now and then, each within any per-read timeout, is cut
    /// off when the message's deadline passes.
    #[test]
    fn the_deadline_is_for_the_whole_message() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let trickle = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for b in b"{\"type\":\"clock\"}\n" {
                if s.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let (s, _) = l.accept().unwrap();
        let mut d = Deadline::new(std::sync::Arc::new(s));
        d.within(Some(Duration::from_millis(300)));
        let start = Instant::now();
        let e = receive(&mut std::io::BufReader::new(d), MAX_HELLO).unwrap_err();
        let took = start.elapsed();
        assert!(e.contains("within the timeout"), "{e}");
        assert!(took < Duration::from_millis(700), "{took:?}");
        trickle.join().unwrap();
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abc", b"abd"));
        assert!(!same_token(b"abc", b"abcd"));
    }
}
