//! What a job measures, per direction, and the results of a run. All of it serializes, so
//! a run record (options, timeline, histograms) can be written and analysed later.

use serde::{Deserialize, Serialize};

use crate::cpu::CpuUsage;
use crate::histogram::Histogram;
use crate::options::sizes::SizeDist;
use crate::options::{Plan, Rw};
use crate::timeline::TimelineRow;
use crate::verify::Corruption;

/// Read or write: index into per-direction arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    Read = 0,
    Write = 1,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
        }
    }
}

/// Latency of one leg of an IO (the local device, or one replica's round trip).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LegStats {
    pub name: String,
    pub lat: Histogram,
}

/// One direction of one job (or of several merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// From preparation to submission (fio's slat).
    pub slat: Histogram,
    /// Submission to completion (fio's clat).
    pub clat: Histogram,
    /// From when the IO was prepared, after any rate wait, to completion (fio's lat).
    pub lat: Histogram,
    /// From the IO's intended start on the schedule to completion (open-loop latency).
    /// Equal to `lat` without `--rate_iops`.
    pub total: Histogram,
    /// Per-leg latency when an IO has more than one leg (replicated writes); empty otherwise.
    pub legs: Vec<LegStats>,
}

impl DirStats {
    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.lat.merge(&o.lat);
        self.total.merge(&o.total);
        for leg in &o.legs {
            match self.legs.iter_mut().find(|l| l.name == leg.name) {
                Some(l) => l.lat.merge(&leg.lat),
                None => self.legs.push(leg.clone()),
            }
        }
    }
}

/// Verification counts of one job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifyStats {
    pub blocks_written: u64,
    pub blocks_checked: u64,
    /// Reads of the pass after the workload that checks every written block.
    pub readback_ios: u64,
    pub corruptions: Vec<Corruption>,
    /// Corruptions beyond those listed.
    pub more_corruptions: u64,
}

/// One job thread's results at one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub name: String,
    /// Index of the job in the plan (clones of one job share it).
    pub group: usize,
    pub jobnum: u32,
    pub filename: String,
    pub rw: Rw,
    /// The smallest IO size (the one size when all IOs have it).
    pub bs: u64,
    /// IO sizes of reads and writes.
    #[serde(default)]
    pub sizes: [SizeDist; 2],
    pub iodepth: u32,
    /// `rate_iops` of reads and writes (records before per-direction rates hold one number).
    #[serde(deserialize_with = "per_direction")]
    pub rate_iops: [Option<u64>; 2],
    /// Measured IOs by direction (after the ramp); `[read, write]`.
    pub dirs: [DirStats; 2],
    /// IOs completed during the ramp, not in `dirs`.
    pub ramp_ios: [u64; 2],
    /// From the end of the ramp to the last completion.
    pub runtime_ns: u64,
    pub verify: Option<VerifyStats>,
    /// Why the job stopped early (a failed IO or replica); its IOs until then are above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads `[r, w]`, or one value (or null) for both, as older run records have it.
fn per_direction<'de, D: serde::Deserializer<'de>>(d: D) -> Result<[Option<u64>; 2], D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Both([Option<u64>; 2]),
        One(Option<u64>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Both(v) => v,
        Either::One(v) => [v, v],
    })
}

/// All jobs of one sweep point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub index: usize,
    pub jobs: Vec<JobResult>,
    /// Every job merged, per direction.
    pub merged: [DirStats; 2],
    pub runtime_ns: u64,
    pub timeline: Vec<TimelineRow>,
    pub cpu: CpuUsage,
}

impl PointResult {
    /// Jobs merged per plan job (`group_reporting` merges clones and jobs alike).
    pub fn total_ios(&self) -> u64 {
        self.merged[0].ios + self.merged[1].ios
    }
}

/// A whole run: what was asked and what was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub version: String,
    pub started_unix_ms: u64,
    pub plan: Plan,
    /// Reads made by the safety check of block devices before the run.
    pub safety_probe_reads: u64,
    pub points: Vec<PointResult>,
}

impl RunResult {
    pub fn corruptions(&self) -> u64 {
        self.points
            .iter()
            .flat_map(|p| &p.jobs)
            .filter_map(|j| j.verify.as_ref())
            .map(|v| v.corruptions.len() as u64 + v.more_corruptions)
            .sum()
    }
}
