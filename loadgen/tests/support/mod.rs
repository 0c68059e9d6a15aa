//! What the tests of `loadgen serve --jobs-listen` share: hosts as child processes, each on
//! an address of its own on loopback, the controller, and a raw client of the job service's
//! protocol (docs/loadgen.md), written here from the documented messages.

#![allow(dead_code, reason = "each test target uses a part of the support")]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const LOADGEN: &str = env!("CARGO_BIN_EXE_loadgen");

/// A fresh directory for one test, under cargo's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// 127.N.0.1, 127.N.0.2, …: one per host started by this process, with N from the test
/// binary's name, so hosts of test binaries running at once never meet on a port.
pub fn next_loopback() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let net = 10
        + env!("CARGO_CRATE_NAME")
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32))
            % 200;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("127.{net}.{}.{}", n / 250, n % 250 + 1)
}

/// A `loadgen serve` with a job service, stopped when dropped.
pub struct Host {
    pub name: String,
    pub child: Child,
    pub jobs: String,
    /// The replication service.
    pub listen: String,
    pub dir: PathBuf,
}

impl Host {
    pub fn start(root: &Path, name: &str, extra: &[&str]) -> Host {
        Host::start_with(root, name, extra, |_| {})
    }

    /// As [`Host::start`], with `prepare` applied to the command first.
    pub fn start_with(
        root: &Path,
        name: &str,
        extra: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Host {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let ip = next_loopback();
        let jobs = format!("{ip}:7481");
        let listen = format!("{ip}:7480");
        let mut cmd = Command::new(LOADGEN);
        cmd.args(["serve", "--listen", &listen])
            .arg("--dir")
            .arg(&dir)
            .args(["--jobs-listen", &jobs])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        prepare(&mut cmd);
        let child = cmd.spawn().expect("loadgen serve starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&jobs).is_err() {
            assert!(
                Instant::now() < deadline,
                "the job service of {name} never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Host {
            name: name.into(),
            child,
            jobs,
            listen,
            dir,
        }
    }

    pub fn client(&self) -> String {
        format!("--client={}={}", self.name, self.jobs)
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) of our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// A line of the process's /proc status file, in kB (`VmHWM`, `VmRSS`).
    pub fn status_kb(&self, field: &str) -> u64 {
        status_kb(self.child.id(), field)
    }

    /// The process's open file descriptors.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn status_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

pub fn controller(args: &[String]) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new(LOADGEN)
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("loadgen runs");
    (out, start.elapsed())
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A controller's connection to a job service, speaking the protocol by hand.
pub struct Raw {
    pub w: TcpStream,
    pub r: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    /// Connects and says hello with `token` (hex): the welcome, or the error.
    pub fn hello(addr: &str, token: &str) -> (Raw, Value) {
        let mut c = Raw::connect(addr);
        let v =
            c.ask(&json!({"type": "hello", "version": env!("CARGO_PKG_VERSION"), "token": token}));
        (c, v)
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.w.write_all(&line).unwrap();
    }

    /// The next message; `null` when the connection closed or no message came in time.
    pub fn next(&mut self) -> Value {
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    pub fn ask(&mut self, v: &Value) -> Value {
        self.send(v);
        self.next()
    }

    /// Sends a job order: `args` with `files` as (name on the command line, content).
    pub fn order(&mut self, name: &str, args: &[&str], files: &[(&str, &str)]) -> Value {
        let files: Vec<Value> = files
            .iter()
            .map(|(arg, text)| json!({"arg": arg, "text": text}))
            .collect();
        self.ask(&json!({"type": "job", "name": name, "args": args, "files": files}))
    }
}

/// Hello (no token) and one job order: the host's first answer to it.
pub fn order(addr: &str, name: &str, args: &[&str], files: &[(&str, &str)]) -> Value {
    let (mut c, welcome) = Raw::hello(addr, "");
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let answer = c.order(name, args, files);
    if answer["type"] == "ready" {
        c.send(&json!({"type": "abort"}));
    }
    answer
}
