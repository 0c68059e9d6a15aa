//! `loadgen serve` as a child process inside a namespace, with its stderr log in a file the
//! test can read, and scratch directories; all removed (and the server killed) on drop.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::netns::Netns;

/// How the server's log (logfmt) marks the start and the end of a connection.
pub const CONNECTION_START: &str = "msg=\"connection start\"";
pub const CONNECTION_END: &str = "msg=\"connection end\"";

static SEQ: AtomicU32 = AtomicU32::new(0);

fn unique(tag: &str) -> String {
    format!(
        "stornet-test-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh directory under /tmp (a disk file system, so O_DIRECT works), removed on drop.
pub struct ScratchDir {
    pub path: PathBuf,
}

impl ScratchDir {
    pub fn new(tag: &str) -> Result<ScratchDir> {
        let path = std::env::temp_dir().join(unique(tag));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ScratchDir { path })
    }
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `loadgen serve` running in a namespace. Killed on drop.
pub struct ServeProcess {
    pub child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl ServeProcess {
    /// Starts `loadgen serve --listen addr --dir dir <extra>` in `ns` and waits until it
    /// listens.
    pub fn start(ns: &Netns, addr: SocketAddr, dir: &Path, extra: &[&str]) -> Result<ServeProcess> {
        Self::start_with(ns, addr, dir, extra, &|_| Ok(()))
    }

    /// As [`ServeProcess::start`], with `prepare` applied to the command first (to put the
    /// server in cgroups, say).
    pub fn start_with(
        ns: &Netns,
        addr: SocketAddr,
        dir: &Path,
        extra: &[&str],
        prepare: &dyn Fn(&mut std::process::Command) -> Result<()>,
    ) -> Result<ServeProcess> {
        let log = std::env::temp_dir().join(format!("{}.log", unique("serve")));
        let stderr = File::create(&log)?;
        let bin = crate::bins::path("loadgen");
        let mut cmd = ns.command(bin.to_str().context("binary path")?);
        prepare(&mut cmd)?;
        let child = cmd
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .context("starting loadgen serve")?;
        let mut p = ServeProcess { child, addr, log };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if p.log().contains("msg=listening") {
                return Ok(p);
            }
            if let Some(status) = p.child.try_wait()? {
                bail!(
                    "loadgen serve exited during start-up ({status}): {}",
                    p.log()
                );
            }
            if Instant::now() > deadline {
                bail!("loadgen serve did not listen within 10 s: {}", p.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until a log line contains `needle`; returns that line.
    pub fn wait_for_line(&self, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.log().lines().find(|l| l.contains(needle)) {
                return Ok(line.to_string());
            }
            if Instant::now() > deadline {
                bail!(
                    "no line with {needle:?} in the server log within {timeout:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes the server logged for `volume` over its connections that have ended (its
    /// own count, from the `summary="(volume V) after N writes, …"` of the end lines).
    pub fn writes_logged(&self, volume: &str) -> u64 {
        let needle = format!("(volume {volume}) after ");
        self.log()
            .lines()
            .filter_map(|l| l.split(&needle).nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Waits until the server has logged the end of `n` connections.
    pub fn wait_for_ends(&self, n: usize, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.log().matches(CONNECTION_END).count() < n {
            if Instant::now() > deadline {
                bail!(
                    "fewer than {n} connection ends logged within {timeout:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `sig` to the server process (`ip netns exec` execs it, so the child is loadgen).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Waits for a child for at most `limit` (a hang, not a performance bound); kills it and
/// fails if it is still running then. Returns its output and how long it took.
pub fn wait_bounded(mut child: Child, limit: Duration) -> Result<(Output, Duration)> {
    let start = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            return Ok((child.wait_with_output()?, start.elapsed()));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output()?;
            bail!(
                "still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
