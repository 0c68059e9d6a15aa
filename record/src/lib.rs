//! Run records (`loadgen run --record run.json`): everything `stornet analyze` needs to judge
//! a run later, on any machine, as plain data. The format is versioned and described in
//! `docs/run-record.md`; a reader reads every earlier version.
//!
//! - the record itself (this file): the run's host and agents, its results, and per sweep
//!   point the analysis input and how the agents were sampled; a cluster run's hosts;
//! - [`options`]: the options as given; [`v1`] reads the plan that version 1 kept instead;
//! - [`stats`], [`histogram`], [`timeline`], [`latency_search`], [`live_verdict`],
//!   [`workload`]: the results of a run, as the load generator measures them;
//! - [`sampling`]: how the agents were sampled;
//! - [`read`]: reading and checking a record; [`files`]: reading a file a user names, with a
//!   cap; [`units`]: fio's value syntax as the records and reports print it.

pub mod files;
pub mod histogram;
pub mod latency_search;
pub mod live_verdict;
pub mod options;
pub mod read;
pub mod sampling;
pub mod stats;
pub mod steadystate;
pub mod timeline;
pub mod units;
mod v1;
pub mod workload;

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use options::RunOptions;
use sampling::SampleStatus;
use stats::RunResult;

/// The `format` every record carries.
pub const FORMAT: &str = "stornet-run-record";
/// The version written; every version from 1 to this one reads.
pub const VERSION: u32 = 2;
/// The most a run record may hold: a day-long run at one-second intervals with agents.
pub const MAX_RECORD: u64 = 4 << 30;
/// The longest string a record may hold (a host or device name, a path list).
pub const MAX_TEXT: usize = 64 << 10;

/// A run record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: String,
    pub version: u32,
    /// The version of the load generator that wrote it.
    pub loadgen_version: String,
    /// The host loadgen ran on: in `points[].run` it carries loadgen's latency.
    pub host: String,
    /// The agents sampled during the run (`--agent`), in the order given.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// The load generator's own results: the options as given, and per sweep point the
    /// merged histograms (per leg for replicated writes) and the timeline.
    pub result: RunResult,
    /// Per sweep point: the analysis input and how the agents were sampled.
    pub points: Vec<PointRecord>,
    /// A cluster run (`loadgen run --client`): each host's own results and clock; `result`
    /// then holds every host's IOs merged ("All clients").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientEntry>,
    /// A host failed or was stopped: the record holds what was measured until then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
}

/// One host of a cluster run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientEntry {
    /// Its name in `points[].run.hosts` and the reports.
    pub name: String,
    /// Its job service, as `--client` gave it.
    pub address: String,
    /// The machine's own name.
    pub hostname: String,
    /// Its clock minus the controller's, and the round trip that bounds the estimate.
    pub clock_offset_seconds: f64,
    pub rtt_seconds: f64,
    /// Start of each point's measured part, on the controller's clock.
    pub starts_unix_seconds: Vec<f64>,
    /// `loadgen run`'s exit status on the host (none when it never reported).
    pub exit: Option<i32>,
    /// Stopped by the controller because another host failed.
    pub stopped: bool,
    pub error: Option<String>,
    /// Its own results (per-host histograms), when it sent them.
    pub result: Option<RunResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentEntry {
    /// The host's name in `points[].run.hosts`.
    pub name: String,
    /// The URL scraped (without credentials).
    pub url: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    pub index: usize,
    /// Per job: its IO size and depth at this point.
    pub jobs: Vec<PointJob>,
    /// Start of the measured part (after the ramp), seconds since the Unix epoch.
    pub start_unix_seconds: f64,
    /// Per agent, in the order of `agents`.
    #[serde(default)]
    pub sampling: Vec<SampleStatus>,
    /// The analysis input: loadgen's latency and its split on `host`, each agent's series
    /// on its own host; one entry per timeline row.
    pub run: analysis::Run,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointJob {
    pub name: String,
    pub bs: u64,
    pub iodepth: u32,
}

impl PointRecord {
    /// "bs=4k iodepth=32" (several jobs: each job's values).
    pub fn label(&self) -> String {
        let mut seen: Vec<(u64, u32)> = Vec::new();
        for j in &self.jobs {
            if !seen.contains(&(j.bs, j.iodepth)) {
                seen.push((j.bs, j.iodepth));
            }
        }
        seen.iter()
            .map(|(bs, d)| format!("bs={} iodepth={d}", units::format_bytes(*bs)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Record {
    /// A record of an analysis input alone, without a load generator's results: for inputs
    /// built elsewhere (another load generator, a simulation) that `stornet analyze` should
    /// judge.
    pub fn for_run(host: &str, run: analysis::Run) -> Record {
        Record {
            format: FORMAT.into(),
            version: VERSION,
            loadgen_version: env!("CARGO_PKG_VERSION").into(),
            host: host.into(),
            agents: Vec::new(),
            result: RunResult {
                version: env!("CARGO_PKG_VERSION").into(),
                started_unix_ms: (run.starts.first().copied().unwrap_or(0.0) * 1000.0) as u64,
                options: RunOptions::none(),
                safety_probe_reads: 0,
                points: Vec::new(),
                disk_util: Vec::new(),
            },
            points: vec![PointRecord {
                index: 0,
                jobs: Vec::new(),
                start_unix_seconds: run.starts.first().copied().unwrap_or(0.0),
                sampling: Vec::new(),
                run,
            }],
            clients: Vec::new(),
            incomplete: false,
        }
    }

    /// The record as JSON, one line.
    pub fn write_json(&self, w: &mut impl Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *w, self)?;
        w.write_all(b"\n")
    }

    /// Writes the record to `path` (the load generator writes it through a temporary file
    /// renamed into place instead, so that a reader never sees half of it).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let mut out = Vec::new();
        self.write_json(&mut out)
            .and_then(|_| std::fs::write(path, out))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Reads and checks a record; every problem is one line naming the file.
    pub fn read(path: &Path) -> Result<Record, String> {
        read::file(path)
    }

    /// Checks and reads a record's text; the error is one line.
    pub fn parse(text: &str) -> Result<Record, String> {
        read::text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;
    use crate::options::{JobFile, JobSummary};
    use crate::stats::{DirStats, LegStats, PointResult};
    use crate::timeline::TimelineRow;

    fn sample() -> Record {
        let mut lat = Histogram::new();
        for v in [1_234u64, 98_765, 4_321_000, 70_000_000_000] {
            lat.record(v);
        }
        let mut write = DirStats {
            ios: 4,
            bytes: 16384,
            total: lat.clone(),
            ..DirStats::default()
        };
        write.legs.push(LegStats {
            name: "replica 198.18.0.2:7000".into(),
            lat: lat.clone(),
        });
        let point = PointResult {
            index: 0,
            jobs: Vec::new(),
            merged: [DirStats::default(), write],
            runtime_ns: 1_000_000_007,
            timeline: vec![TimelineRow {
                t_s: 0.0,
                duration_s: 1.0 / 3.0,
                ..TimelineRow::default()
            }],
            cpu: Default::default(),
        };
        let mut host = analysis::Host {
            name: "h1".into(),
            addresses: vec!["198.18.0.1".into()],
            ..analysis::Host::default()
        };
        host.write = Some(analysis::Latency {
            p99_seconds: vec![Some(0.1 + 0.2)],
            iops: vec![None],
            histograms: vec![Some(analysis::BucketHistogram {
                bounds_seconds: vec![1e-6, 1e-3, 1.0],
                counts: vec![0, 2, 1, 1],
            })],
            ..analysis::Latency::default()
        });
        Record {
            format: FORMAT.into(),
            version: VERSION,
            loadgen_version: "0.1.0".into(),
            host: "h1".into(),
            agents: vec![AgentEntry {
                name: "h1".into(),
                url: "http://127.0.0.1:9477/metrics".into(),
            }],
            result: RunResult {
                version: "0.1.0".into(),
                started_unix_ms: 1_700_000_000_123,
                options: RunOptions {
                    args: ["--agent=h1=http://127.0.0.1:9477", "w.fio"]
                        .map(String::from)
                        .to_vec(),
                    job_files: vec![JobFile {
                        name: "w.fio".into(),
                        text: "[w]\nrw=randwrite\n".into(),
                    }],
                    jobs: vec![JobSummary {
                        name: "w".into(),
                        given: [("rw".to_string(), "randwrite".to_string())].into(),
                        ramp_time_ns: 0,
                        percentile_list: Some(vec![50.0, 99.5]),
                    }],
                    ..RunOptions::none()
                },
                safety_probe_reads: 3,
                points: vec![point],
                disk_util: Vec::new(),
            },
            points: vec![PointRecord {
                index: 0,
                jobs: vec![PointJob {
                    name: "w".into(),
                    bs: 4096,
                    iodepth: 32,
                }],
                start_unix_seconds: 1_700_000_000.123_456_7,
                sampling: vec![SampleStatus {
                    samples: 2,
                    missing: 1,
                    max_delay_seconds: 0.004,
                    errors: vec!["at 1.0 s: connection refused".into()],
                }],
                run: analysis::Run {
                    interval_seconds: 1.0,
                    starts: vec![1_700_000_000.123_456_7],
                    hosts: vec![host],
                },
            }],
            clients: Vec::new(),
            incomplete: false,
        }
    }

    #[test]
    fn a_record_reads_back_exactly_as_written() {
        let r = sample();
        let path = std::env::temp_dir().join(format!("stornet-record-{}.json", std::process::id()));
        r.write(&path).unwrap();
        let back = Record::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, r);
        let w = &back.result.points[0].merged[1];
        assert_eq!(w.total.saturated(), 1, "histograms keep every bucket");
        assert_eq!(
            w.legs[0].lat.percentile(50.0),
            r.result.points[0].merged[1].legs[0].lat.percentile(50.0)
        );
        assert_eq!(back.points[0].label(), "bs=4k iodepth=32");
    }

    #[test]
    fn a_record_with_a_huge_name_is_refused_before_it_is_analysed() {
        let mut r = sample();
        r.points[0].run.hosts.push(analysis::Host {
            name: "h".repeat(10 << 20),
            ..Default::default()
        });
        let text = serde_json::to_string(&r).unwrap();
        let e = Record::parse(&text).unwrap_err();
        assert!(e.contains("at most 65536"), "{e}");
        assert_eq!(read::longest_string(r#"{"a":"x\"y","b":"zz"}"#), 4);
        assert_eq!(read::longest_string(r#"{"a":"unterminated"#), 12);
    }

    #[test]
    fn foreign_or_damaged_records_are_refused_with_the_reason() {
        let good = serde_json::to_string(&sample()).unwrap();
        assert!(Record::parse(&good).is_ok());
        assert!(Record::parse("[1, 2").unwrap_err().starts_with("not JSON"));
        assert!(
            Record::parse("{\"jobs\": []}")
                .unwrap_err()
                .starts_with("not a stornet run record")
        );
        let newer = good.replacen("\"version\":2", "\"version\":3", 1);
        assert!(
            Record::parse(&newer)
                .unwrap_err()
                .contains("record version 3")
        );
        for (bad, shown) in [("\"1.5\"", "\"1.5\""), ("-1", "-1"), ("1.5", "1.5")] {
            let e =
                Record::parse(&good.replacen("\"version\":2", &format!("\"version\":{bad}"), 1))
                    .unwrap_err();
            assert!(
                e.contains(&format!("version {shown} is not a whole number")),
                "{e}"
            );
        }
        assert!(
            Record::parse(&good.replacen("\"version\":2,", "", 1))
                .unwrap_err()
                .contains("no version")
        );
        let no_points = good.replacen("\"points\":[{\"index\"", "\"pointz\":[{\"index\"", 1);
        assert!(
            Record::parse(&no_points)
                .unwrap_err()
                .contains("not a valid run record")
        );
        let mut bad = sample();
        bad.points[0].run.starts.push(0.5);
        let e = Record::parse(&serde_json::to_string(&bad).unwrap()).unwrap_err();
        assert!(e.starts_with("point 0: "), "{e}");
    }
}
