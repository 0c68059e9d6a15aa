//! The host side of the job service (`loadgen serve --jobs-listen`): one controller at a
//! time; its job is checked here (options, and every target inside what this host serves),
//! then run as a child `loadgen run --start-gate` in the first `--dir`, which does the rest
//! of the checks and the layout, says `ready`, and starts at the instant the controller
//! names. While it runs, the controller hears from the host every second and may stop it
//! (SIGINT: the job reports what it ran); a controller that goes away stops it too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::policy::Confinement;
use super::protocol::{self, JobFile, Msg};
use crate::options::parse::{Parsed, parse_args};

/// How long a controller has for each message before the job starts.
const HANDSHAKE: Duration = Duration::from_secs(30);
/// Between `ready` and `start`: the other hosts may still be laying out their files.
const UNTIL_START: Duration = Duration::from_secs(3600);

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
    jobs: AtomicU64,
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
            jobs: AtomicU64::new(0),
        }
    }

    /// Serves controllers on `listener` from a thread of its own.
    pub fn spawn(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("jobs".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let svc = Arc::clone(&self);
                    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    let _ = std::thread::Builder::new()
                        .name("job".into())
                        .spawn(move || {
                            if let Err(e) = svc.handle(conn) {
                                tracing::warn!(controller = %peer, error = %e, "job order ended");
                            }
                        });
                }
            })
            .map(|_| ())
    }

    fn handle(&self, conn: TcpStream) -> Result<(), String> {
        let _ = conn.set_nodelay(true);
        conn.set_read_timeout(Some(HANDSHAKE))
            .map_err(|e| e.to_string())?;
        let mut w = conn.try_clone().map_err(|e| e.to_string())?;
        let mut r = BufReader::new(conn.try_clone().map_err(|e| e.to_string())?);
        let refuse = |w: &mut TcpStream, message: String| {
            let _ = protocol::send(
                w,
                &Msg::Error {
                    message: message.clone(),
                },
            );
            Err(message)
        };
        let ours = env!("CARGO_PKG_VERSION");
        match protocol::receive(&mut r) {
            Ok(Some(Msg::Hello { version, token })) => {
                if version != ours {
                    return refuse(
                        &mut w,
                        format!(
                            "version mismatch: the controller runs loadgen {version}, this host {ours}"
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
        protocol::send(
            &mut w,
            &Msg::Welcome {
                version: ours.into(),
                hostname: crate::record::system::hostname(),
            },
        )?;
        loop {
            match protocol::receive(&mut r) {
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
                    let done = self.job(&conn, &mut r, &mut w, &name, args, &files);
                    self.busy.store(false, Ordering::Release);
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
        conn: &TcpStream,
        r: &mut BufReader<TcpStream>,
        w: &mut TcpStream,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<(), String> {
        let n = self.jobs.fetch_add(1, Ordering::Relaxed);
        let scratch = std::env::temp_dir().join(format!("loadgen-job-{}-{n}", std::process::id()));
        let result = (|| {
            std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
            let args = self.prepare_args(&scratch, name, args, files)?;
            self.supervise(conn, r, w, &scratch, &args)
        })();
        let _ = std::fs::remove_dir_all(&scratch);
        if let Err(message) = &result {
            let _ = protocol::send(
                w,
                &Msg::Error {
                    message: message.clone(),
                },
            );
        }
        result
    }

    /// The job's arguments checked, job files written to `scratch`, and the host's own
    /// options added.
    fn prepare_args(
        &self,
        scratch: &Path,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<Vec<String>, String> {
        let mut out = Vec::with_capacity(args.len() + 8);
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
                    Ok(a) if own_address(self.replica_listen, a, &local_addresses()) => {}
                    _ => out.push(format!("--replica={addr}")),
                }
                continue;
            }
            match files.iter().position(|f| &f.arg == a) {
                Some(k) => {
                    let p = scratch.join(format!("job{k}.fio"));
                    std::fs::write(&p, &files[k].text)
                        .map_err(|e| format!("{}: {e}", p.display()))?;
                    out.push(p.display().to_string());
                }
                None => out.push(a.clone()),
            }
        }
        let mut plan = match parse_args(&out)? {
            Parsed::Plan(p) => *p,
            Parsed::Help => return Err("--help is not a job".into()),
        };
        crate::options::validate::validate(&plan)?;
        self.confinement.check_options(&plan)?;
        self.confinement.anchor(&mut plan);
        let (layout, _) = crate::target::resolve(&plan)?;
        self.confinement.check_targets(&layout)?;
        out.extend([
            "--start-gate".to_string(),
            "--eta=never".into(),
            "--output-format=json".into(),
            format!("--output={}", scratch.join("report.json").display()),
            format!("--record={}", scratch.join("record.json").display()),
        ]);
        if let Some(url) = &self.agent {
            out.push(format!("--agent={name}={url}"));
        }
        if !plan.settings.replicas.is_empty() {
            out.push(format!("--replica-volume-prefix={name}"));
            if let Some(t) = &self.token_file {
                out.push(format!("--replica_token_file={}", t.display()));
            }
        }
        Ok(out)
    }

    /// Runs the child: ready, start, heartbeats, stop, result.
    fn supervise(
        &self,
        conn: &TcpStream,
        r: &mut BufReader<TcpStream>,
        w: &mut TcpStream,
        scratch: &Path,
        args: &[String],
    ) -> Result<(), String> {
        // The running binary itself, whose version the controller checked, even after a
        // package upgrade replaced the file.
        let exe = std::env::current_exe().map_err(|e| format!("loadgen's own path: {e}"))?;
        let log_path = scratch.join("log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0(&exe);
        // A host's serve that dies takes its job with it (the job stops and reports).
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
                Ok(())
            })
        };
        let mut child = cmd
            .arg("run")
            .args(args)
            .current_dir(self.confinement.home())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the job: {e}"))?;
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut stdin = child.stdin.take().expect("piped");
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let _ = child.wait();
            return Err(
                last_line(&log_path).unwrap_or_else(|| "the job ended before it was ready".into())
            );
        }
        protocol::send(w, &Msg::Ready)?;
        conn.set_read_timeout(Some(UNTIL_START))
            .map_err(|e| e.to_string())?;
        let order = match protocol::receive(r) {
            Ok(Some(Msg::Start { unix_ns })) => format!("start {unix_ns}\n"),
            Ok(Some(Msg::Abort)) | Ok(None) => "abort\n".into(),
            Ok(Some(m)) => {
                let _ = stdin.write_all(b"abort\n");
                let _ = child.wait();
                return Err(format!("expected start, got {}", m.kind()));
            }
            Err(e) => {
                let _ = stdin.write_all(b"abort\n");
                let _ = child.wait();
                return Err(e);
            }
        };
        let _ = stdin.write_all(order.as_bytes());
        drop(stdin);
        if order.starts_with("abort") {
            let _ = child.wait();
            return Ok(());
        }
        let (exit, stopped) = run_child(conn, w, child)?;
        let record = match std::fs::read(scratch.join("record.json")) {
            Ok(b) => Some(String::from_utf8(b).map_err(|e| format!("the job's record: {e}"))?),
            Err(_) => None,
        };
        protocol::send(
            w,
            &Msg::Result {
                exit,
                stopped,
                record,
                log: tail(&log_path, 4096),
            },
        )
    }
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

/// Waits for the running child, with a heartbeat every second; a `stop` from the controller,
/// or the controller gone, interrupts it. Returns its exit status and whether it was stopped.
fn run_child(conn: &TcpStream, w: &mut TcpStream, child: Child) -> Result<(i32, bool), String> {
    let pid = child.id() as libc::pid_t;
    // The pid while the child is not reaped: a stop after that must not signal a reused pid.
    let alive = Arc::new(Mutex::new(Some(pid)));
    let stopped = Arc::new(AtomicBool::new(false));
    {
        let (alive, stopped) = (Arc::clone(&alive), Arc::clone(&stopped));
        let mut r = BufReader::new(conn.try_clone().map_err(|e| e.to_string())?);
        let _ = conn.set_read_timeout(None);
        std::thread::spawn(move || {
            // Any stop, anything unexpected, or the controller gone: stop the job.
            let _ = protocol::receive(&mut r);
            if let Some(pid) = *alive.lock().unwrap_or_else(|e| e.into_inner()) {
                stopped.store(true, Ordering::Relaxed);
                // SAFETY: plain kill(2) of our own unreaped child.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
        });
    }
    let mut child = child;
    let began = Instant::now();
    let mut last = Instant::now();
    let status = loop {
        {
            let mut a = alive.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
                *a = None;
                break s;
            }
        }
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            // A controller that cannot be written to is gone: the reader stops the job.
            let _ = protocol::send(
                w,
                &Msg::Running {
                    elapsed_s: began.elapsed().as_secs_f64(),
                },
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok((status.code().unwrap_or(-1), stopped.load(Ordering::Relaxed)))
}

/// The last `max` bytes of a file, from a line start.
fn tail(path: &Path, max: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    if s.len() > max {
        let mut cut = s.len() - max;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        let from = s[cut..].find('\n').map_or(cut, |i| cut + i + 1);
        s.drain(..from);
    }
    s
}

/// The last line the job printed: its error, when it failed before it was ready.
fn last_line(path: &Path) -> Option<String> {
    let t = tail(path, 4096);
    t.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim_start_matches("loadgen: error: ").to_string())
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
