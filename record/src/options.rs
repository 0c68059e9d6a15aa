//! The options of a run as given: its command line and job files as the user wrote them, and
//! per job what the reports need of them (its options as given, its ramp, its percentiles).
//! A record keeps these, not the load generator's resolved plan, so that its format does not
//! change when an option does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// The arguments of `loadgen run` as given, user and password in URLs left out (empty in
    /// records of version 1, which kept the resolved options only).
    #[serde(default)]
    pub args: Vec<String>,
    /// The job files among them, with their text as it was read.
    #[serde(default)]
    pub job_files: Vec<JobFile>,
    /// Job options given for every job (before the first `--name`, or in `[global]`): fio's
    /// `global options`.
    #[serde(default)]
    pub global: BTreeMap<String, String>,
    /// Per job of the command line and job files, in order (`JobResult::group` indexes it).
    #[serde(default)]
    pub jobs: Vec<JobSummary>,
    /// Length of one timeline interval.
    pub interval_ns: u64,
    /// `group_reporting`: the reports merge each job's clones.
    #[serde(default)]
    pub group_reporting: bool,
}

/// A job file named on the command line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFile {
    /// As the command line names it.
    pub name: String,
    pub text: String,
}

/// One job as the reports need it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    pub name: String,
    /// Its options as given (those for every job included): fio's `job options`.
    pub given: BTreeMap<String, String>,
    /// `ramp_time`: before the measured part, added to the job's elapsed time.
    #[serde(default)]
    pub ramp_time_ns: u64,
    /// `percentile_list`: the percentiles reported instead of fio's default list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile_list: Option<Vec<f64>>,
}

impl RunOptions {
    /// No options at all: an analysis input built elsewhere, one-second intervals.
    pub fn none() -> RunOptions {
        RunOptions {
            interval_ns: 1_000_000_000,
            ..RunOptions::default()
        }
    }
}

/// `arg` with the user and password of every URL in it left out
/// (`--agent=h1=https://user:secret@host:9477` keeps `--agent=h1=https://host:9477`).
pub fn without_credentials(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let skip = tail[..authority].rfind('@').map_or(0, |i| i + 1);
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_are_left_out() {
        for (given, kept) in [
            (
                "--agent=h1=https://loadgen:s3cret@stor1:9477",
                "--agent=h1=https://stor1:9477",
            ),
            (
                "h2=http://u:p%40ss@198.18.0.2:9477/metrics?x=a@b",
                "h2=http://198.18.0.2:9477/metrics?x=a@b",
            ),
            ("--rw=randwrite", "--rw=randwrite"),
            ("--filename=/tmp/a@b", "--filename=/tmp/a@b"),
            ("a=http://x:1 b=https://u@y:2", "a=http://x:1 b=https://y:2"),
            ("http://", "http://"),
        ] {
            assert_eq!(without_credentials(given), kept);
        }
    }
}
