//! Ceph's command-line clients (`ceph`, `rados`, `rbd`, fio's rbd engine) run inside a lab
//! namespace, never in the root one (there they would route through the machine's default
//! route), each under `timeout -k`: a client stuck on a full pool or an unreachable mon
//! ignores SIGTERM.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::netns::Netns;

/// Where and with which configuration clients run.
#[derive(Clone)]
pub struct Clients {
    /// The namespace's name (`stn-…-client-<pid>`).
    pub ns: String,
    pub conf: PathBuf,
}

impl Clients {
    pub fn new(ns: &Netns, conf: PathBuf) -> Clients {
        Clients {
            ns: ns.name.clone(),
            conf,
        }
    }

    /// `program args…` in the namespace, under `timeout -k 5 <limit>`, with `CEPH_CONF`.
    pub fn command(&self, limit: Duration, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, "timeout", "-k", "5"])
            .arg(format!("{}", limit.as_secs().max(1)))
            .arg(program)
            .args(args)
            .env("CEPH_CONF", &self.conf)
            .stdin(Stdio::null());
        c
    }

    /// Runs a command to its end; its stdout, or an error with its stderr.
    pub fn run(&self, limit: Duration, program: &str, args: &[&str]) -> Result<String> {
        let out = self.output(limit, program, args)?;
        if !out.status.success() {
            bail!(
                "{program} {} in {} failed ({}): {}",
                args.join(" "),
                self.ns,
                exit(&out),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn output(&self, limit: Duration, program: &str, args: &[&str]) -> Result<Output> {
        self.command(limit, program, args)
            .output()
            .with_context(|| format!("running {program} in {}", self.ns))
    }

    /// `ceph <args>` (30 s at most).
    pub fn ceph(&self, args: &[&str]) -> Result<String> {
        self.run(Duration::from_secs(30), "ceph", args)
    }

    /// `ceph <args> -f json`, parsed.
    pub fn ceph_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut a = args.to_vec();
        a.extend(["-f", "json"]);
        let out = self.ceph(&a)?;
        serde_json::from_str(&out).with_context(|| format!("ceph {} printed {out:?}", a.join(" ")))
    }

    /// `ceph health`'s first word (`HEALTH_OK`, `HEALTH_WARN`, `HEALTH_ERR`).
    pub fn health(&self) -> Result<String> {
        Ok(self
            .run(Duration::from_secs(10), "ceph", &["health"])?
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string())
    }

    /// `ceph health detail`, for errors and reports.
    pub fn health_detail(&self) -> String {
        self.run(Duration::from_secs(10), "ceph", &["health", "detail"])
            .unwrap_or_else(|e| format!("{e:#}"))
    }
}

fn exit(out: &Output) -> String {
    match out.status.code() {
        Some(124) => "timed out".into(),
        Some(137) => "killed after its timeout".into(),
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".into(),
    }
}

/// Polls `ready` every half second until it holds or `timeout` passes; then the error names
/// `what` and carries `context()` (the daemons' last log lines).
pub fn wait(
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> Result<bool>,
    context: impl FnOnce() -> String,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        crate::lab::interrupt::check()?;
        match ready() {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() > deadline {
            bail!(
                "{what}: not within {} s{}\n{}",
                timeout.as_secs(),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(" (last error: {last})")
                },
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
