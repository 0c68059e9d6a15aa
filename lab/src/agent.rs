//! stornet-agent as a child process of a test: started on a free loopback port, waited for,
//! and stopped (SIGTERM, then SIGKILL) on drop. Its stderr goes to a log file the test can
//! read; the log is printed when a test fails.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::metrics::{self, Sample};

pub struct AgentProcess {
    pub child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
    /// The network namespace it runs in (`/run/netns/…`), when not the test's own.
    netns: Option<String>,
}

/// A free port on 127.0.0.1 (bound and released; the agent binds it right after).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// How to run the agent.
#[derive(Default)]
pub struct Launch<'a> {
    /// The binary; `bins::path("stornet-agent")` when `None`.
    pub bin: Option<PathBuf>,
    /// A command the agent runs under, e.g. `["setpriv", "--reuid=65534", …]`.
    pub wrapper: &'a [&'a str],
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    /// Where to listen; a free loopback port when `None`.
    pub addr: Option<SocketAddr>,
}

/// A fresh log file path for one agent run.
fn log_path() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    // The sequence number is not all digits: `cargo xtask lab clean` takes every number in
    // a harness name for a pid that must be gone.
    std::env::temp_dir().join(format!(
        "stornet-agent-test-{}-n{}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

impl AgentProcess {
    /// Starts the agent with `args` on a free port and waits until it answers /-/healthy.
    pub fn start(args: &[&str]) -> Result<AgentProcess> {
        let mut a = AgentProcess::launch(&Launch {
            args,
            ..Default::default()
        })?;
        a.wait_healthy()?;
        Ok(a)
    }

    /// Starts the agent with a configuration file holding `toml` (plus `args`).
    pub fn with_config(toml: &str, args: &[&str]) -> Result<AgentProcess> {
        let path = log_path().with_extension("toml");
        std::fs::write(&path, toml)?;
        let flag = format!("--config.file={}", path.display());
        let mut all = vec![flag.as_str()];
        all.extend_from_slice(args);
        // The agent reads its configuration once, at start.
        let agent = AgentProcess::start(&all);
        let _ = std::fs::remove_file(&path);
        agent
    }

    /// Starts the agent inside network namespace `ns` with a configuration file holding
    /// `toml`, listening on that namespace's loopback; waits until it answers /-/healthy.
    pub fn in_netns(ns: &crate::netns::Netns, toml: &str) -> Result<AgentProcess> {
        let wrapper = ["ip", "netns", "exec", ns.name.as_str()];
        Self::in_namespace(ns, toml, &wrapper, &[], None)
    }

    /// A host's agent that others scrape over the network: in namespace `ns`, listening on
    /// `addr` (an address of the namespace), with `toml` and `args`. It enters only the
    /// network namespace (nsenter), so it keeps the host's mounts: `ip netns exec` replaces
    /// /sys, and the cgroup hierarchies under /sys/fs/cgroup with it.
    pub fn host_agent(
        ns: &crate::netns::Netns,
        addr: SocketAddr,
        toml: &str,
        args: &[&str],
    ) -> Result<AgentProcess> {
        let net = format!("--net={}", ns.path());
        Self::in_namespace(ns, toml, &["nsenter", &net], args, Some(addr))
    }

    /// The agent under `wrapper`, which puts it in `ns`, with a configuration file holding
    /// `toml`; waits until it answers /-/healthy.
    fn in_namespace(
        ns: &crate::netns::Netns,
        toml: &str,
        wrapper: &[&str],
        args: &[&str],
        addr: Option<SocketAddr>,
    ) -> Result<AgentProcess> {
        let path = log_path().with_extension("toml");
        std::fs::write(&path, toml)?;
        let flag = format!("--config.file={}", path.display());
        let mut all = vec![flag.as_str()];
        all.extend_from_slice(args);
        let launched = AgentProcess::launch(&Launch {
            wrapper,
            args: &all,
            addr,
            ..Default::default()
        });
        let agent = launched.and_then(|mut a| {
            a.netns = Some(ns.path());
            a.wait_healthy()?;
            Ok(a)
        });
        let _ = std::fs::remove_file(&path);
        agent
    }

    /// GET `path` from the agent (from inside its namespace).
    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        match &self.netns {
            None => metrics::http_get(self.addr, path),
            Some(ns) => crate::netns::in_namespace(ns, || metrics::http_get(self.addr, path)),
        }
    }

    /// Starts the agent on a free loopback port without waiting for it.
    pub fn launch(l: &Launch) -> Result<AgentProcess> {
        wait_after_previous_exit();
        let addr: SocketAddr = match l.addr {
            Some(a) => a,
            None => format!("127.0.0.1:{}", free_port()?).parse()?,
        };
        let bin = l
            .bin
            .clone()
            .unwrap_or_else(|| crate::bins::path("stornet-agent"));
        let mut cmd = match l.wrapper.split_first() {
            None => Command::new(&bin),
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(&bin);
                c
            }
        };
        let log = log_path();
        let child = cmd
            .arg(format!("--web.listen-address={addr}"))
            .args(l.args)
            .envs(l.env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).context("agent log file")?)
            .spawn()
            .context("starting stornet-agent")?;
        Ok(AgentProcess {
            child,
            addr,
            log,
            netns: None,
        })
    }

    pub fn wait_healthy(&mut self) -> Result<()> {
        let netns = self.netns.clone();
        let addr = self.addr;
        self.wait_until(|| {
            let get = || metrics::http_get(addr, "/-/healthy");
            let r = match &netns {
                None => get(),
                Some(ns) => crate::netns::in_namespace(ns, get),
            };
            matches!(r, Ok((200, _)))
        })
    }

    /// Waits up to 30 s for `ready` to hold; fails early if the agent exits.
    pub fn wait_until(&mut self, ready: impl Fn() -> bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if ready() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "stornet-agent exited during start-up: {status}; log:\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "stornet-agent did not get ready on {} within 30 s",
                    self.addr
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the agent wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The metrics as of this call or later: scrapes until every reader the agent refreshes
    /// in the background shows a read begun after the call (its
    /// `stornet_scrape_collector_age_seconds` is under the time since), so a test sees what
    /// it did just before. A scrape by Prometheus may show reads up to the agent's refresh
    /// interval older.
    pub fn scrape(&self) -> Result<Vec<Sample>> {
        let called = Instant::now();
        loop {
            // The agent measures the age after this, so a read it shows that is younger
            // than this began after the call.
            let since = called.elapsed().as_secs_f64();
            let samples = self.scrape_once()?;
            let fresh = samples
                .iter()
                .filter(|s| s.name == "stornet_scrape_collector_age_seconds")
                .all(|s| s.value <= since);
            if fresh {
                return Ok(samples);
            }
            if called.elapsed() > Duration::from_secs(30) {
                bail!("the agent's background readers showed no read younger than 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One scrape, showing whatever the agent read last.
    pub fn scrape_once(&self) -> Result<Vec<Sample>> {
        let (code, body) = self.get("/metrics")?;
        if code != 200 {
            bail!("/metrics answered {code}: {body}");
        }
        metrics::parse(&body)
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus> {
        self.signal(libc::SIGTERM);
        self.wait_exit(timeout)
            .with_context(|| format!("stornet-agent still running {timeout:?} after SIGTERM"))
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill9(&mut self) -> Result<ExitStatus> {
        self.signal(libc::SIGKILL);
        self.wait_exit(Duration::from_secs(5))
    }

    fn signal(&mut self, sig: i32) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: plain kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }

    /// Waits up to `timeout` for the agent to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if Instant::now() > deadline {
                bail!("stornet-agent did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// When the last agent this process started has exited.
static LAST_EXIT: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// Under heavy load the kernel was seen to deliver no tracepoint events for a moment after
/// another agent detached from the same tracepoints (to no BPF program at all, bpftrace
/// included); counts compared right after a back-to-back restart could then come up short.
/// Agents started by tests therefore begin at least this long after the previous one ended.
const RESTART_GAP: Duration = Duration::from_secs(2);

fn wait_after_previous_exit() {
    let last = *LAST_EXIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(gap) = last.and_then(|t| RESTART_GAP.checked_sub(t.elapsed())) {
        std::thread::sleep(gap);
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None))
            && self.terminate(Duration::from_secs(3)).is_err()
        {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        *LAST_EXIT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if std::thread::panicking() {
            eprintln!("--- stornet-agent log ({}) ---\n{}", self.addr, self.log());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}
