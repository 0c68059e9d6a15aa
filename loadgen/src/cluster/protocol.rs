//! The job service's messages: one JSON object per line, each with a `type`. The controller
//! speaks first (`hello` with its version and the token), then every exchange is a request
//! and its answer, except while a job runs: the host sends `running` every second until
//! its `result`, and the controller may send `stop`. docs/loadgen.md describes the exchange.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

/// A result carries the host's whole run record: allow for a long run with many agents.
pub const MAX_LINE: u64 = 512 << 20;

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

/// The next message; `Ok(None)` when the peer closed the connection between messages.
pub fn receive<R: BufRead>(r: &mut R) -> Result<Option<Msg>, String> {
    let mut line = Vec::new();
    let n = <&mut R as std::io::Read>::take(r, MAX_LINE + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                "no message within the timeout".to_string()
            }
            _ => e.to_string(),
        })?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        if line.len() as u64 > MAX_LINE {
            return Err(format!("a message longer than {MAX_LINE} bytes"));
        }
        return Err("the connection closed in the middle of a message".into());
    }
    parse(&line).map(Some)
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
            assert_eq!(receive(&mut r).unwrap().as_ref(), Some(m));
        }
        assert_eq!(receive(&mut r).unwrap(), None);
        assert_eq!(hex(b"s3cret"), "733363726574");
    }

    #[test]
    fn bytes_that_are_not_a_message_are_named() {
        let e = receive(&mut std::io::Cursor::new(b"GET / HTTP/1.1\r\n".to_vec())).unwrap_err();
        assert!(e.starts_with("not a job-service message"), "{e}");
        assert!(e.contains("GET / HTTP/1.1"), "{e}");
        let e = receive(&mut std::io::Cursor::new(
            b"{\"type\":\"launch\"}\n".to_vec(),
        ));
        assert!(e.unwrap_err().contains("unknown variant `launch`"));
        let e = receive(&mut std::io::Cursor::new(b"{\"type\":\"clock\"".to_vec()));
        assert_eq!(
            e.unwrap_err(),
            "the connection closed in the middle of a message"
        );
        let e = receive(&mut std::io::Cursor::new(vec![0xff, 0xfe, b'\n'])).unwrap_err();
        assert!(e.starts_with("not a job-service message"), "{e}");
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abc", b"abd"));
        assert!(!same_token(b"abc", b"abcd"));
    }
}
