//! Running the loadgen binary from tests and reading its JSON report.

use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result};
use serde_json::Value;

/// `loadgen run --direct=1 <args>` with stdout and stderr captured. The lab measures
/// devices, so its runs take O_DIRECT unless `args` say `--direct=0` (fio's and loadgen's
/// default is buffered IO); a job file's own `direct=` is overridden by it.
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(crate::bins::path("loadgen"));
    c.arg("run")
        .arg("--direct=1")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(o: Output) -> Run {
        Run {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
    /// The whole of stdout as JSON (it must hold nothing else).
    pub fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("stdout is not one JSON document; stderr: {}", self.stderr))
    }
}

pub fn run(args: &[&str]) -> Result<Run> {
    Ok(Run::from_output(
        command(args).output().context("running loadgen")?,
    ))
}

/// Follows a path like `jobs.0.read.clat_ns.percentile.99.000000` (segments split on `/`).
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('/').try_fold(v, |v, seg| match v {
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        Value::Object(o) => o.get(seg),
        _ => None,
    })
}

/// A number at `path`, or a panic naming the missing path.
pub fn num(v: &Value, path: &str) -> f64 {
    at(v, path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {path}"))
}
