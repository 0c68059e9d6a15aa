//! What a job measures, per direction, and the results of a run. All of it serializes, so
//! a run record (options, timeline, histograms) can be written and analysed later.

use serde::{Deserialize, Serialize};

use crate::histogram::Histogram;
use crate::latency_search::SearchResult;
use crate::options::RunOptions;
use crate::timeline::TimelineRow;
use crate::workload::{Rw, SizeDist};

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
    /// IOPS and bytes per second over `runtime_ns`.
    pub fn rates(&self, runtime_ns: u64) -> (f64, f64) {
        if runtime_ns == 0 {
            return (0.0, 0.0);
        }
        let s = runtime_ns as f64 / 1e9;
        (self.ios as f64 / s, self.bytes as f64 / s)
    }

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

/// fio's distributions of one job (`iodepth_level`, `iodepth_submit`, `iodepth_complete`,
/// `latency_ns|us|ms`), counted as fio counts them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IoDists {
    /// IOs by the IOs in flight once their batch was submitted: 1, 2–3, 4–7, 8–15, 16–31,
    /// 32–63, 64 and more.
    pub depth: [u64; 7],
    /// Submissions by the IOs they carried: 0, 1–4, 5–8, 9–16, 17–32, 33–64, more.
    pub submit: [u64; 7],
    /// Reapings by the IOs they completed, in the same classes.
    pub complete: [u64; 7],
    /// IOs by completion latency: below 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000 ns, then
    /// the same in µs, then 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000 ms and more.
    pub lat: Vec<u64>,
}

/// Upper ends of fio's latency classes within a unit (the last ms class is open).
const LAT_EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

impl IoDists {
    pub const LAT_CLASSES: usize = 32;

    /// fio's class of a count of IOs per submission or reaping.
    #[inline]
    pub fn batch_class(n: u64) -> usize {
        match n {
            0 => 0,
            1..=4 => 1,
            5..=8 => 2,
            9..=16 => 3,
            17..=32 => 4,
            33..=64 => 5,
            _ => 6,
        }
    }

    /// fio's class of a depth: each covers depths from its power of two to the next.
    #[inline]
    pub fn depth_class(depth: u64) -> usize {
        (63 - depth.max(1).leading_zeros() as usize).min(6)
    }

    /// fio's class of a completion latency in ns.
    #[inline]
    pub fn lat_class(ns: u64) -> usize {
        let (base, v) = if ns < 1_000 {
            (0, ns)
        } else if ns < 1_000_000 {
            (10, ns / 1_000)
        } else {
            let ms = ns / 1_000_000;
            if ms >= 2000 {
                return 31;
            }
            if ms >= 1000 {
                return 30;
            }
            (20, ms)
        };
        base + LAT_EDGES.iter().position(|&e| v < e).unwrap_or(9)
    }

    #[inline]
    pub fn record_lat(&mut self, ns: u64) {
        if self.lat.len() < Self::LAT_CLASSES {
            self.lat.resize(Self::LAT_CLASSES, 0);
        }
        self.lat[Self::lat_class(ns)] += 1;
    }

    pub fn merge(&mut self, o: &IoDists) {
        for (a, b) in [
            (&mut self.depth, &o.depth),
            (&mut self.submit, &o.submit),
            (&mut self.complete, &o.complete),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        if self.lat.len() < o.lat.len() {
            self.lat.resize(o.lat.len(), 0);
        }
        for (x, y) in self.lat.iter_mut().zip(&o.lat) {
            *x += y;
        }
    }
}

/// What one job did in one timeline interval, for fio's per-interval bandwidth and IOPS
/// statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalCount {
    pub covered_ns: u64,
    pub ios: [u64; 2],
    pub bytes: [u64; 2],
}

/// CPU of a job's own thread over its measured time (getrusage RUSAGE_THREAD), as fio
/// reports per job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    pub user_ns: u64,
    pub sys_ns: u64,
    /// Voluntary and involuntary context switches.
    pub ctx: u64,
    pub majf: u64,
    pub minf: u64,
}

impl ThreadCpu {
    pub fn since(&self, start: &ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user_ns: self.user_ns.saturating_sub(start.user_ns),
            sys_ns: self.sys_ns.saturating_sub(start.sys_ns),
            ctx: self.ctx.saturating_sub(start.ctx),
            majf: self.majf.saturating_sub(start.majf),
            minf: self.minf.saturating_sub(start.minf),
        }
    }
    pub fn add(&mut self, o: &ThreadCpu) {
        self.user_ns += o.user_ns;
        self.sys_ns += o.sys_ns;
        self.ctx += o.ctx;
        self.majf += o.majf;
        self.minf += o.minf;
    }
}

/// fsync/fdatasync of a job (`--fsync`, `--fdatasync`): how many, and their latency from
/// submission to completion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncStats {
    pub ios: u64,
    pub lat: Histogram,
}

impl SyncStats {
    pub fn merge(&mut self, o: &SyncStats) {
        self.ios += o.ios;
        self.lat.merge(&o.lat);
    }
}

/// A block that failed verification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Corruption {
    pub offset: u64,
    pub problem: String,
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
    /// fio's `groupid` when the run has groups (`stonewall`, `new_group`); None: the
    /// point's index is the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groupid: Option<usize>,
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
    /// fio's distributions (depths, batches, latency classes) of the measured IOs.
    #[serde(default)]
    pub dists: IoDists,
    /// IOs and bytes per timeline interval, for fio's bandwidth and IOPS statistics.
    #[serde(default)]
    pub intervals: Vec<IntervalCount>,
    /// The job thread's own CPU over its measured time.
    #[serde(default)]
    pub thread_cpu: ThreadCpu,
    #[serde(default)]
    pub sync: SyncStats,
    /// With `latency_target`: the depth found and every window of the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_search: Option<SearchResult>,
    /// fio's steady state check of the job (of its reporting group with group_reporting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steadystate: Option<crate::steadystate::SteadyState>,
    /// Why the job stopped early (a failed IO or replica); its IOs until then are above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With fio's `continue_on_error`: the IO errors the job went on after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors_continued: Option<ErrorCount>,
}

/// fio's `total_err` and `first_error` (an errno; 0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub total: u64,
    pub first: i32,
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

/// CPU used over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    pub window_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Part of user+sys spent in io_uring worker threads (seen alive at the window's ends).
    pub io_workers_s: f64,
    /// user+sys in % of one CPU.
    pub process_pct: f64,
    /// user+sys per IO, in microseconds.
    pub per_io_us: f64,
    /// Busy time of all CPUs (everything but idle and iowait), in % of all of them.
    pub system_pct: f64,
    pub cpus: u32,
}

/// A whole run: what was asked and what was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "crate::v1::RunResultOnDisk")]
pub struct RunResult {
    /// The version of the load generator that ran it.
    pub version: String,
    pub started_unix_ms: u64,
    /// The options as given (records of version 1 kept the load generator's resolved plan,
    /// read into this).
    pub options: RunOptions,
    /// Reads made by the safety check of block devices before the run.
    pub safety_probe_reads: u64,
    pub points: Vec<PointResult>,
    /// The devices under the targets, over the whole run.
    #[serde(default)]
    pub disk_util: Vec<DiskUtil>,
}

/// fio's `disk_util` of one device over the run, from `/sys/block/*/stat`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskUtil {
    pub name: String,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_merges: u64,
    pub write_merges: u64,
    /// Milliseconds spent on reads and writes.
    pub read_ticks: u64,
    pub write_ticks: u64,
    pub in_queue: u64,
    /// Share of the run's time the device was busy, in percent.
    pub util: f64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_classes() {
        assert_eq!(IoDists::batch_class(0), 0);
        assert_eq!(IoDists::batch_class(4), 1);
        assert_eq!(IoDists::batch_class(5), 2);
        assert_eq!(IoDists::batch_class(64), 5);
        assert_eq!(IoDists::batch_class(65), 6);
        assert_eq!(IoDists::depth_class(1), 0);
        assert_eq!(IoDists::depth_class(3), 1);
        assert_eq!(IoDists::depth_class(4), 2);
        assert_eq!(IoDists::depth_class(63), 5);
        assert_eq!(IoDists::depth_class(64), 6);
        assert_eq!(IoDists::depth_class(4096), 6);
        for (ns, class) in [
            (0, 0),
            (1, 0),
            (2, 1),
            (999, 9),
            (1_000, 10),
            (1_999, 10),
            (2_000, 11),
            (99_999, 15),
            (100_000, 16),
            (999_999, 19),
            (1_000_000, 20),
            (4_000_000, 22),
            (999_000_000, 29),
            (1_500_000_000, 30),
            (2_000_000_000, 31),
            (u64::MAX, 31),
        ] {
            assert_eq!(IoDists::lat_class(ns), class, "{ns} ns");
        }
        let mut d = IoDists::default();
        d.record_lat(50_000);
        let mut e = IoDists::default();
        e.merge(&d);
        e.merge(&d);
        assert_eq!(e.lat[IoDists::lat_class(50_000)], 2);
        assert_eq!(e.lat.len(), IoDists::LAT_CLASSES);
    }
}
