//! The host side of the job service (`loadgen serve --jobs-listen`): one controller's job at
//! a time.
//!
//! Until its hello carries the token a connection costs a few KiB: its first line may be
//! short, it has one deadline for the whole handshake, and at the cap on connections a new
//! one pushes out the oldest that has not shown the token. A job order is parsed and checked
//! here, its job files taken from the order alone, its targets opened beneath `--dir`
//! (`policy`, `confine`); it then runs as a child process (`order`) handed the checked
//! plan and the opened descriptors, so nothing is read or resolved twice. The child lays
//! out the files, says `ready` and starts at the instant the controller names; while it runs
//! the controller hears from the host every second and may stop it (SIGINT: the job reports
//! what it ran). A controller that goes away, or vanishes without a word (keepalive), stops
//! it too. No scratch files: the child's messages and run record come back through pipes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::order::{ChildOrder, Handed};
use super::policy::{Confinement, Targets};
use super::protocol::{self, Deadline, JobFile, Msg};
use crate::console::plain;
use crate::options::Plan;
use crate::options::parse::{JobFiles, Parsed, parse_args_from};

/// From a connection to its hello.
const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// From the welcome to the job order (the controller measures the clock meanwhile).
const ORDER_WITHIN: Duration = Duration::from_secs(120);
/// From `ready` to `start`: the controller waits up to 600 s for every host's layout.
const UNTIL_START: Duration = Duration::from_secs(660);
/// Connections at once; at the cap a new one closes the oldest that has not shown the token.
pub const MAX_CONNECTIONS: usize = 64;
/// The last bytes of the job's messages sent back with its result.
const LOG_TAIL: usize = 4096;
/// A host sends at most this much run record (escaped in its result, it may grow by half).
const MAX_RECORD: u64 = protocol::MAX_RESULT / 2;

/// The open connections, oldest first, and whether each has shown the token.
#[derive(Default)]
struct Connections {
    next: u64,
    open: BTreeMap<u64, (Arc<TcpStream>, bool)>,
}

pub struct JobService {
    pub confinement: Confinement,
    pub token: Option<Vec<u8>>,
    /// The serve side's token file, passed to jobs that replicate (their peers share it).
    pub token_file: Option<PathBuf>,
    /// This host's stornet-agent, sampled by every job into its run record.
    pub agent: Option<String>,
    /// The replication service's own address: left out of a job's `--replica`s.
    pub replica_listen: SocketAddr,
    busy: AtomicBool,
    conns: Mutex<Connections>,
}

/// A connection's place among the open ones, given up when it ends.
struct Slot<'a> {
    svc: &'a JobService,
    id: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.svc.lock().open.remove(&self.id);
    }
}

impl JobService {
    pub fn new(
        confinement: Confinement,
        token: Option<Vec<u8>>,
        token_file: Option<PathBuf>,
        agent: Option<String>,
        replica_listen: SocketAddr,
    ) -> JobService {
        JobService {
            confinement,
            token,
            token_file,
            agent,
            replica_listen,
            busy: AtomicBool::new(false),
            conns: Mutex::new(Connections::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection; at the cap the oldest one without the token is closed
    /// to make room (none: every open connection has shown the token, so the new one waits
    /// its turn outside).
    fn admit(&self, s: &Arc<TcpStream>) -> Option<u64> {
        let mut c = self.lock();
        if c.open.len() >= MAX_CONNECTIONS {
            let oldest = c
                .open
                .iter()
                .find(|(_, (_, authenticated))| !authenticated)
                .map(|(id, _)| *id)?;
            if let Some((victim, _)) = c.open.remove(&oldest) {
                let _ = victim.shutdown(Shutdown::Both);
            }
        }
        let id = c.next;
        c.next += 1;
        c.open.insert(id, (Arc::clone(s), false));
        Some(id)
    }

    fn authenticated(&self, id: u64) {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.1 = true;
        }
    }

    /// Serves controllers on `listener` from a thread of its own.
    pub fn spawn(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("jobs".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let conn = match conn {
                        Ok(c) => Arc::new(c),
                        // Out of descriptors and the like: the connections that exist go on.
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    };
                    protocol::tune(&conn, protocol::GONE_WHILE_QUIET);
                    let Some(id) = self.admit(&conn) else {
                        let _ = protocol::send(
                            &mut &*conn,
                            &Msg::Error {
                                message: "busy: this host has as many controllers as it takes"
                                    .into(),
                            },
                        );
                        continue;
                    };
                    let svc = Arc::clone(&self);
                    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    let spawned = std::thread::Builder::new()
                        .name("job".into())
                        .spawn(move || {
                            let _slot = Slot { svc: &svc, id };
                            if let Err(e) = svc.handle(&conn, id) {
                                tracing::warn!(controller = %peer, error = %plain(&e, 300), "job order ended");
                            }
                        });
                    if spawned.is_err() {
                        self.lock().open.remove(&id);
                    }
                }
            })
            .map(|_| ())
    }

    fn handle(&self, conn: &Arc<TcpStream>, id: u64) -> Result<(), String> {
        let mut w: &TcpStream = conn;
        let mut r = BufReader::new(Deadline::new(Arc::clone(conn)));
        r.get_mut().within(Some(HELLO_WITHIN));
        let refuse = |w: &mut &TcpStream, message: String| {
            let _ = protocol::send(
                w,
                &Msg::Error {
                    message: message.clone(),
                },
            );
            Err(message)
        };
        let ours = env!("CARGO_PKG_VERSION");
        match protocol::receive(&mut r, protocol::MAX_HELLO) {
            Ok(Some(Msg::Hello { version, token })) => {
                if version != ours {
                    return refuse(
                        &mut w,
                        format!(
                            "version mismatch: the controller runs loadgen {}, this host {ours}",
                            plain(&version, 40)
                        ),
                    );
                }
                if let Some(want) = &self.token
                    && !protocol::same_token(token.as_bytes(), protocol::hex(want).as_bytes())
                {
                    return refuse(
                        &mut w,
                        "the token is not this host's (--client-token-file)".into(),
                    );
                }
            }
            Ok(Some(m)) => return refuse(&mut w, format!("expected hello, got {}", m.kind())),
            Ok(None) => return Ok(()),
            Err(e) => return refuse(&mut w, e),
        }
        self.authenticated(id);
        protocol::send(
            &mut w,
            &Msg::Welcome {
                version: ours.into(),
                hostname: crate::record::system::hostname(),
            },
        )?;
        r.get_mut().within(Some(ORDER_WITHIN));
        loop {
            match protocol::receive(&mut r, protocol::MAX_ORDER) {
                Ok(Some(Msg::Clock)) => protocol::send(
                    &mut w,
                    &Msg::Time {
                        unix_ns: super::clock::unix_ns(),
                    },
                )?,
                Ok(Some(Msg::Job { name, args, files })) => {
                    if self.busy.swap(true, Ordering::AcqRel) {
                        return refuse(
                            &mut w,
                            "busy: another controller's job runs on this host".into(),
                        );
                    }
                    let done = self.job(conn, r, &name, args, &files);
                    self.busy.store(false, Ordering::Release);
                    if let Err(message) = &done {
                        let _ = protocol::send(
                            &mut w,
                            &Msg::Error {
                                message: message.clone(),
                            },
                        );
                    }
                    // The reader of the job's connection ends with it.
                    let _ = conn.shutdown(Shutdown::Read);
                    return done;
                }
                Ok(Some(m)) => return refuse(&mut w, format!("unexpected {} message", m.kind())),
                Ok(None) => return Ok(()),
                Err(e) => return refuse(&mut w, e),
            }
        }
    }

    /// One job order, from its checks to its result.
    fn job(
        &self,
        conn: &Arc<TcpStream>,
        r: BufReader<Deadline>,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<(), String> {
        let (plan, targets, record) = self.prepare(name, args, files)?;
        let mut job = match Job::start(plan, &targets, record, self.confinement.home()) {
            Ok(j) => j,
            Err(e) => {
                targets.remove_created();
                return Err(e);
            }
        };
        if !watch_controller(r, job.events.clone()) {
            job.call_off(false);
            targets.remove_created();
            return Err("cannot watch the controller's connection".into());
        }
        job.supervise(conn, targets)
    }

    /// The job order checked (see [`check_order`]) and the host's own settings put in; also
    /// the pipe the run record will come back through.
    fn prepare(
        &self,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<(Plan, Targets, (OwnedFd, OwnedFd)), String> {
        let (mut plan, targets) =
            check_order(&self.confinement, self.replica_listen, name, &args, files)?;
        let record = match pipe() {
            Ok(p) => p,
            Err(e) => {
                targets.remove_created();
                return Err(format!("a pipe for the run record: {e}"));
            }
        };
        let s = &mut plan.settings;
        s.start_gate = true;
        s.eta = crate::options::Eta::Never;
        s.output = Some(PathBuf::from("/dev/null"));
        s.record = Some(PathBuf::from(format!(
            "/proc/self/fd/{}",
            record.1.as_raw_fd()
        )));
        if let Some(url) = &self.agent {
            s.agents = vec![format!("{name}={url}")];
        }
        if !s.replicas.is_empty() {
            s.replica_volume_prefix = Some(name.to_string());
            s.replica_token_file = self.token_file.clone();
        }
        Ok((plan, targets, record))
    }
}

/// A job order checked as the host runs it: its name plain, its job files within their cap
/// and taken from the order alone, its options a job order may have, and every target
/// opened beneath the served directories (see `policy`). `replica_listen`: this host's
/// replication service, left out of the order's `--replica`s.
pub fn check_order(
    confinement: &Confinement,
    replica_listen: SocketAddr,
    name: &str,
    args: &[String],
    files: &[JobFile],
) -> Result<(Plan, Targets), String> {
    check_name(name)?;
    for f in files {
        if f.text.len() as u64 > crate::files::MAX_JOB_FILE {
            return Err(format!(
                "refused: job file {} is {} bytes, more than the {} a job file may hold",
                plain(&f.arg, 80),
                f.text.len(),
                protocol::size_name(crate::files::MAX_JOB_FILE)
            ));
        }
    }
    let mut out = Vec::with_capacity(args.len());
    let mut skip_next = false;
    for (i, a) in args.iter().enumerate() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        // This host's own replication service is not a replica of its writes.
        let replica = match a.strip_prefix("--replica") {
            Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
            Some("") => {
                skip_next = true;
                args.get(i + 1).cloned()
            }
            _ => None,
        };
        if let Some(addr) = replica {
            match crate::options::values::parse_addr(&addr) {
                Ok(a) if own_address(replica_listen, a, &local_addresses()) => {}
                _ => out.push(format!("--replica={addr}")),
            }
            continue;
        }
        out.push(a.clone());
    }
    let given: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.arg.clone(), f.text.clone()))
        .collect();
    let mut plan = match parse_args_from(&out, JobFiles::Given(&given))? {
        Parsed::Plan(p) => *p,
        Parsed::Help => return Err("--help is not a job".into()),
    };
    crate::options::validate::validate(&plan)?;
    confinement.check_options(&plan)?;
    confinement.anchor(&mut plan);
    let targets = confinement.targets(&plan)?;
    if let Err(e) = crate::target::check_space(&targets.layout) {
        targets.remove_created();
        return Err(e);
    }
    Ok((plan, targets))
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

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two descriptors the kernel just returned, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// What happens around a job while the host supervises it.
enum Event {
    /// The job said `ready`.
    Ready,
    /// The job's stdout closed (it ended, or failed before it was ready).
    Quiet,
    /// A message from the controller (or its end).
    Controller(Result<Option<Msg>, String>),
}

/// The controller's messages while its job runs, each an event; the last is its end.
fn watch_controller(mut r: BufReader<Deadline>, events: mpsc::Sender<Event>) -> bool {
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
struct Tail(Vec<u8>);

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
struct Job {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::Sender<Event>,
    rx: Receiver<Event>,
    log: Arc<Mutex<Tail>>,
    /// The reader of the child's stderr: joined once the child has ended, so the tail holds
    /// its last words.
    stderr: Option<std::thread::JoinHandle<()>>,
    record: std::thread::JoinHandle<Result<Option<String>, String>>,
}

impl Job {
    /// Starts the child with the plan and the opened targets.
    fn start(
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
    #[allow(clippy::type_complexity)]
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
    fn call_off(&mut self, ready: bool) {
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
    fn supervise(mut self, conn: &Arc<TcpStream>, targets: Targets) -> Result<(), String> {
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
fn called_off(m: Result<Option<Msg>, String>) -> Result<(), String> {
    match m {
        Ok(Some(Msg::Abort)) | Ok(None) => Ok(()),
        Ok(Some(m)) => Err(format!("expected start, got {}", m.kind())),
        Err(e) => Err(e),
    }
}

/// The run record from the job's pipe: at most [`MAX_RECORD`] bytes of UTF-8 (the rest is
/// read and dropped, so the job never blocks on a full pipe).
fn read_record(f: std::fs::File) -> Result<Option<String>, String> {
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

/// This host's addresses, as `--replica` may name them.
fn local_addresses() -> Vec<std::net::IpAddr> {
    crate::record::system::addresses()
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// Whether `replica` is the replication service at `listen` itself: the same address, or
/// with `listen` on every address (0.0.0.0 or ::), its port on loopback or on one of `own`.
pub fn own_address(listen: SocketAddr, replica: SocketAddr, own: &[std::net::IpAddr]) -> bool {
    if replica == listen {
        return true;
    }
    listen.ip().is_unspecified()
        && replica.port() == listen.port()
        && (replica.ip().is_loopback() || own.contains(&replica.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_leaves_out_only_its_own_replication_service() {
        let own: Vec<std::net::IpAddr> = vec!["198.18.0.1".parse().unwrap()];
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.1:7480"),
            &own
        ));
        assert!(!own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.2:7480"),
            &own
        ));
        assert!(!own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.1:7490"),
            &own
        ));
        let any = at("0.0.0.0:7480");
        assert!(own_address(any, at("198.18.0.1:7480"), &own));
        assert!(own_address(any, at("127.0.0.1:7480"), &own));
        assert!(!own_address(any, at("198.18.0.2:7480"), &own));
        assert!(!own_address(any, at("198.18.0.1:7481"), &own));
        assert!(own_address(at("[::]:7480"), at("[::1]:7480"), &own));
    }
}
