//! A Ceph daemon (mon, mgr, OSD, MDS) or `ceph-fuse` as a child process of the lab: in its
//! host's network namespace, with a UTS namespace and hostname of its own (CRUSH's host
//! buckets and the mgr's `hostname` labels come from it), in the foreground (`-f`, so the
//! child is the daemon and no pid file has to be trusted), logging to the cluster's
//! directory. Stopped on drop.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::netns::Netns;

pub struct Daemon {
    /// `mon.a`, `osd.0`, …
    pub name: String,
    child: Child,
    log: PathBuf,
    stderr: PathBuf,
}

/// `program args…` in `ns` under hostname `host`: `ip netns exec` and `unshare` exec in
/// place, so the command's pid is the program's.
pub fn in_host(ns: &Netns, host: &str, program: &str, args: &[&str]) -> Command {
    let mut c = ns.command("unshare");
    c.args([
        "--uts",
        "sh",
        "-c",
        "hostname \"$0\" && exec \"$@\"",
        host,
        program,
    ])
    .args(args);
    c
}

impl Daemon {
    /// Starts `cmd` (from [`in_host`]), whose log file is `log`, with its stdout and stderr
    /// in `stderr`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf, stderr: PathBuf) -> Result<Daemon> {
        let out = File::create(&stderr)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Daemon {
            name: name.to_string(),
            child,
            log,
            stderr,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs; an exited daemon is reaped.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last `n` lines of its log and of what it printed.
    pub fn tail(&self, n: usize) -> String {
        let last = |p: &PathBuf| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        format!(
            "--- {} ({}) ---\n{}\n--- its stderr ---\n{}",
            self.name,
            self.log.display(),
            last(&self.log),
            last(&self.stderr)
        )
    }

    fn signal(&mut self, sig: i32) {
        if self.running() {
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(self.child.id() as i32, sig) };
        }
    }
}

/// Stops daemons together: SIGTERM to all, then SIGKILL to those still running after
/// `grace` (a throw-away cluster keeps no data worth a slow shutdown).
pub fn stop_all(daemons: &mut [&mut Daemon], grace: Duration) {
    for d in daemons.iter_mut() {
        d.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while daemons.iter_mut().any(|d| d.running()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for d in daemons.iter_mut() {
        d.signal(libc::SIGKILL);
        let _ = d.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_all(&mut [self], Duration::from_secs(3));
    }
}
