//! Run records (`--record run.json`): everything `loadgen analyze` needs to judge a run
//! later, on any machine. The format is versioned and described in `docs/run-record.md`.

pub mod latency;
pub mod recorder;
pub mod system;

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::scrape::SampleStatus;
use crate::stats::RunResult;

pub use recorder::Recorder;

/// The `format` every record carries.
pub const FORMAT: &str = "stornet-run-record";
/// The version this loadgen writes; it reads this one and older.
pub const VERSION: u32 = 1;

/// A run record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: String,
    pub version: u32,
    /// The loadgen version that wrote it.
    pub loadgen_version: String,
    /// The host loadgen ran on: in `points[].run` it carries loadgen's latency.
    pub host: String,
    /// The agents sampled during the run (`--agent`), in the order given.
    #[serde(default)]
    pub agents: Vec<AgentEntry>,
    /// loadgen's own results: the options, and per sweep point the merged histograms (per
    /// leg for replicated writes) and the timeline.
    pub result: RunResult,
    /// Per sweep point: the analysis input and how the agents were sampled.
    pub points: Vec<PointRecord>,
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
            .map(|(bs, d)| {
                format!(
                    "bs={} iodepth={d}",
                    crate::options::values::format_bytes(*bs)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Record {
    /// Writes the record as JSON through a temporary file renamed into place, so a reader
    /// never sees half a record and an older record is replaced only by a complete one.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_file_name(format!(
            ".{}.tmp{}",
            path.file_name()
                .map_or("record".into(), |n| n.to_string_lossy().into_owned()),
            std::process::id()
        ));
        let result = (|| -> std::io::Result<()> {
            let f = std::fs::File::create(&tmp)?;
            let mut w = std::io::BufWriter::new(f);
            serde_json::to_writer(&mut w, self)?;
            w.write_all(b"\n")?;
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        result.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("writing the run record {}: {e}", path.display())
        })
    }

    /// Reads and checks a record; every problem is one line naming the file.
    pub fn read(path: &Path) -> Result<Record, String> {
        let p = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {p}: {e}"))?;
        Record::parse(&text).map_err(|e| format!("{p}: {e}"))
    }

    pub fn parse(text: &str) -> Result<Record, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
        if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!(
                "not a stornet run record (no \"format\": \"{FORMAT}\"; `loadgen run --record FILE` writes one)"
            ));
        }
        match v.get("version").and_then(|x| x.as_u64()) {
            Some(n) if n >= 1 && n <= VERSION as u64 => {}
            Some(n) => {
                return Err(format!(
                    "record version {n}, but this loadgen reads versions 1 to {VERSION}"
                ));
            }
            None => return Err("the record has no version".into()),
        }
        let r: Record =
            serde_json::from_value(v).map_err(|e| format!("not a valid run record ({e})"))?;
        for p in &r.points {
            p.run
                .validate()
                .map_err(|e| format!("point {}: {e}", p.index))?;
        }
        Ok(r)
    }
}
