//! A job order's child process while the host supervises it: started with the checked plan
//! and the opened targets, its `ready`, the controller's messages, its stderr's last bytes
//! and its run record (through a pipe), until it ends or is stopped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::order::{ChildOrder, Handed};
use super::policy::Targets;
use super::{LOG_TAIL, MAX_RECORD, UNTIL_START};
use crate::cluster::protocol::{self, Deadline, Msg};
use crate::options::Plan;

pub(super) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two descriptors the kernel just returned, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What happens around a job while the host supervises it.
pub(super) enum Event {
    /// The job said `ready`.
    Ready,
    /// The job's stdout closed (it ended, or failed before it was ready).
    Quiet,
    /// A message from the controller (or its end).
    Controller(Result<Option<Msg>, String>),
}

/// The controller's messages while its job runs, each an event; the last is its end.
pub(super) fn watch_controller(mut r: BufReader<Deadline>, events: mpsc::Sender<Event>) -> bool {
    r.get_mut().within(None);
    std::thread::Builder::new()
        .name("job-controller".into())
        .stack_size(128 << 10)
        .spawn(move || {
            loop {
                let m = protocol::receive(&mut r, protocol::MAX_HELLO);
                let end = !matches!(m, Ok(Some(_)));
                if events.send(Event::Controller(m)).is_err() || end {
                    return;
                }
            }
        })
        .is_ok()
}

/// The last bytes a job wrote to stderr.
#[derive(Default)]
pub(super) struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
        if self.0.len() > 2 * LOG_TAIL {
            let cut = self.0.len() - LOG_TAIL;
            self.0.drain(..cut);
        }
    }

    /// The last `LOG_TAIL` bytes, from a line start.
    fn text(&self) -> String {
        let s = String::from_utf8_lossy(&self.0);
        let mut cut = s.len().saturating_sub(LOG_TAIL);
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        let from = if cut == 0 {
            0
        } else {
            s[cut..].find('\n').map_or(cut, |i| cut + i + 1)
        };
        s[from..].to_string()
    }

    /// The last line: the job's error, when it failed before it was ready.
    fn last_line(&self) -> Option<String> {
        self.text()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim_start_matches("loadgen: error: ").to_string())
    }
}

/// A job's child process and what comes back from it.
pub(super) struct Job {
    child: Child,
    stdin: Option<ChildStdin>,
    pub(super) events: mpsc::Sender<Event>,
    rx: Receiver<Event>,
    log: Arc<Mutex<Tail>>,
    /// The reader of the child's stderr: joined once the child has ended, so the tail holds
    /// its last words.
    stderr: Option<std::thread::JoinHandle<()>>,
    record: std::thread::JoinHandle<Result<Option<String>, String>>,
}

impl Job {
    /// Starts the child with the plan and the opened targets.
    pub(super) fn start(
        plan: Plan,
        targets: &Targets,
        record: (OwnedFd, OwnedFd),
        home: &std::path::Path,
    ) -> Result<Job, String> {
        let (record_r, record_w) = record;
        let order = ChildOrder {
            plan,
            targets: targets
                .opened
                .iter()
                .map(|o| Handed {
                    path: o.path.clone(),
                    fd: o.fd.as_raw_fd(),
                    created: o.created,
                })
                .collect(),
        };
        let mut line = serde_json::to_vec(&order).map_err(|e| e.to_string())?;
        line.push(b'\n');
        // The running binary itself, whose version the controller checked, even after a
        // package upgrade replaced the file.
        let exe = std::env::current_exe().map_err(|e| format!("loadgen's own path: {e}"))?;
        let inherit: Vec<RawFd> = order
            .targets
            .iter()
            .map(|t| t.fd)
            .chain([record_w.as_raw_fd()])
            .collect();
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0(&exe).arg("job-order");
        // SAFETY: prctl and fcntl are async-signal-safe; `inherit` was allocated before
        // the fork and is only read.
        unsafe {
            cmd.pre_exec(move || {
                // A host's serve that dies takes its job with it (the job stops and reports).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
                for &fd in &inherit {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            })
        };
        let mut child = cmd
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the job: {e}"))?;
        drop(record_w);
        let watched = Job::watch(&mut child, record_r);
        let (events, rx, log, stderr, record) = match watched {
            Ok(w) => w,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let mut stdin = child.stdin.take().expect("piped");
        if let Err(e) = stdin.write_all(&line) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cannot hand the job over: {e}"));
        }
        Ok(Job {
            child,
            stdin: Some(stdin),
            events,
            rx,
            log,
            stderr: Some(stderr),
            record,
        })
    }

    /// Threads that read what the child says (`ready`), its messages and its record.
    #[allow(
        clippy::type_complexity,
        reason = "the channel, the tail and the two threads, taken apart by the one caller"
    )]
    fn watch(
        child: &mut Child,
        record_r: OwnedFd,
    ) -> Result<
        (
            mpsc::Sender<Event>,
            Receiver<Event>,
            Arc<Mutex<Tail>>,
            std::thread::JoinHandle<()>,
            std::thread::JoinHandle<Result<Option<String>, String>>,
        ),
        String,
    > {
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let (events, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(Tail::default()));
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .stack_size(128 << 10)
                .spawn(f)
                .map_err(|e| format!("cannot watch the job: {e}"))
        };
        let said = events.clone();
        spawn(
            "job-stdout",
            Box::new(move || {
                let mut r = BufReader::new(stdout);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match (&mut r).take(4096).read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line.trim_ascii() == b"ready" => {
                            let _ = said.send(Event::Ready);
                        }
                        Ok(_) => {}
                    }
                }
                let _ = said.send(Event::Quiet);
            }),
        )?;
        let tail = Arc::clone(&log);
        let stderr = spawn(
            "job-stderr",
            Box::new(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    tail.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(&buf[..n]);
                }
            }),
        )?;
        let record = std::thread::Builder::new()
            .name("job-record".into())
            .stack_size(128 << 10)
            .spawn(move || read_record(std::fs::File::from(record_r)))
            .map_err(|e| format!("cannot watch the job: {e}"))?;
        Ok((events, rx, log, stderr, record))
    }

    /// The tail of what the job wrote to stderr, once it has ended.
    fn tail(&mut self) -> std::sync::MutexGuard<'_, Tail> {
        if let Some(t) = self.stderr.take() {
            let _ = t.join();
        }
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn last_line(&mut self) -> String {
        self.tail()
            .last_line()
            .unwrap_or_else(|| "the job ended before it was ready".into())
    }

    /// Ends the child before it started: `abort` on its stdin, or a kill while it lays out.
    pub(super) fn call_off(&mut self, ready: bool) {
        match (ready, self.stdin.take()) {
            (true, Some(mut stdin)) => {
                let _ = stdin.write_all(b"abort\n");
            }
            _ => {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }

    /// Ready, start, heartbeats, stop, result.
    pub(super) fn supervise(
        mut self,
        conn: &Arc<TcpStream>,
        targets: Targets,
    ) -> Result<(), String> {
        let mut w: &TcpStream = conn;
        // Until the job is laid out; the controller may call it off meanwhile.
        match self.rx.recv() {
            Ok(Event::Ready) => {}
            Ok(Event::Quiet) | Err(_) => {
                let _ = self.child.wait();
                targets.remove_created();
                return Err(self.last_line());
            }
            Ok(Event::Controller(m)) => {
                self.call_off(false);
                targets.remove_created();
                return called_off(m);
            }
        }
        drop(targets);
        protocol::send(&mut w, &Msg::Ready)?;
        let until = Instant::now() + UNTIL_START;
        let unix_ns = loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Event::Controller(Ok(Some(Msg::Start { unix_ns })))) => break unix_ns,
                Ok(Event::Controller(m)) => {
                    self.call_off(true);
                    return called_off(m);
                }
                Ok(Event::Ready) => {}
                Ok(Event::Quiet) | Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    return Err(self.last_line());
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.call_off(true);
                    return Err(format!(
                        "no start within {} s of ready",
                        UNTIL_START.as_secs()
                    ));
                }
            }
        };
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(format!("start {unix_ns}\n").as_bytes());
        }
        protocol::tune(conn, protocol::GONE_WHILE_RUNNING);
        let (exit, stopped) = self.run(&mut w)?;
        let log = self.tail().text();
        let record = match self.record.join() {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(e),
            Err(_) => None,
        };
        protocol::send(
            &mut w,
            &Msg::Result {
                exit,
                stopped,
                record,
                log,
            },
        )
    }

    /// Waits for the running child, with a heartbeat every second; a `stop` from the
    /// controller, anything else from it, or its end interrupts the job. Returns its exit
    /// status and whether it was stopped.
    fn run(&mut self, w: &mut &TcpStream) -> Result<(i32, bool), String> {
        let began = Instant::now();
        let mut beat = Instant::now();
        let mut stopped = false;
        let stop = |child: &Child, stopped: &mut bool| {
            if !*stopped {
                *stopped = true;
                // SAFETY: kill(2) of our own child, not yet reaped (only this loop reaps it).
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            }
        };
        loop {
            if let Some(s) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok((s.code().unwrap_or(-1), stopped));
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Controller(_)) => stop(&self.child, &mut stopped),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(50))
                }
            }
            if beat.elapsed() >= Duration::from_secs(1) {
                beat = Instant::now();
                let alive = protocol::send(
                    w,
                    &Msg::Running {
                        elapsed_s: began.elapsed().as_secs_f64(),
                    },
                );
                // A controller that cannot be written to is gone.
                if alive.is_err() {
                    stop(&self.child, &mut stopped);
                }
            }
        }
    }
}

/// The end of a job order the controller called off before its start.
pub(super) fn called_off(m: Result<Option<Msg>, String>) -> Result<(), String> {
    match m {
        Ok(Some(Msg::Abort)) | Ok(None) => Ok(()),
        Ok(Some(m)) => Err(format!("expected start, got {}", m.kind())),
        Err(e) => Err(e),
    }
}

/// The run record from the job's pipe: at most [`MAX_RECORD`] bytes of UTF-8 (the rest is
/// read and dropped, so the job never blocks on a full pipe).
pub(super) fn read_record(f: std::fs::File) -> Result<Option<String>, String> {
    let mut r = BufReader::new(f);
    let mut data = Vec::new();
    (&mut r)
        .take(MAX_RECORD + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("the job's record: {e}"))?;
    if data.len() as u64 > MAX_RECORD {
        let _ = std::io::copy(&mut r, &mut std::io::sink());
        return Err(format!(
            "the job's run record is more than {}, the most a host sends",
            protocol::size_name(MAX_RECORD)
        ));
    }
    if data.is_empty() {
        return Ok(None);
    }
    String::from_utf8(data)
        .map(Some)
        .map_err(|e| format!("the job's record: {e}"))
}
