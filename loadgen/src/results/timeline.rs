//! The per-interval timeline: each job thread hands over what it measured in every interval;
//! rows are merged across jobs (histograms added, never percentiles averaged) once every job
//! has passed the interval.

use std::collections::BTreeMap;

pub use record::timeline::{DirRow, LegRow, TimelineRow};

use crate::results::histogram::Histogram;

/// One direction of one job in one interval.
#[derive(Clone, Debug, Default)]
pub struct DirInterval {
    pub ios: u64,
    pub bytes: u64,
    /// Latency from intended start.
    pub total: Histogram,
    pub clat: Histogram,
    /// fio's slat and lat, kept only for interim reports (`--status-interval`).
    pub slat: Histogram,
    pub lat: Histogram,
    /// Per-leg latency, in the job's leg order (empty for local-only IO).
    pub legs: Vec<Histogram>,
}

impl DirInterval {
    fn merge(&mut self, o: &DirInterval) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.total.merge(&o.total);
        self.clat.merge(&o.clat);
        self.slat.merge(&o.slat);
        self.lat.merge(&o.lat);
        if self.legs.len() < o.legs.len() {
            self.legs.resize_with(o.legs.len(), Histogram::new);
        }
        for (a, b) in self.legs.iter_mut().zip(&o.legs) {
            a.merge(b);
        }
    }
}

/// What one job measured in interval `index`.
#[derive(Clone, Debug, Default)]
pub struct IntervalSample {
    pub index: u64,
    /// Time covered, in ns: the interval length, or less for a job's last, partial interval.
    pub covered_ns: u64,
    pub dirs: [DirInterval; 2],
    /// Integral of IOs in flight over the interval, in IO·ns.
    pub inflight_area: u128,
}

#[derive(Default)]
struct Pending {
    covered_ns: u64,
    dirs: [DirInterval; 2],
    inflight_area: u128,
}

/// Collects samples from `jobs` job threads and yields finished rows in order.
pub struct TimelineBuilder {
    interval_ns: u64,
    /// Per job: the next interval index it has not reported yet, or None once done.
    next: Vec<Option<u64>>,
    pending: BTreeMap<u64, Pending>,
    emitted: u64,
    leg_names: Vec<String>,
}

impl TimelineBuilder {
    pub fn new(jobs: usize, interval_ns: u64, leg_names: Vec<String>) -> Self {
        TimelineBuilder {
            interval_ns,
            next: vec![Some(0); jobs],
            pending: BTreeMap::new(),
            emitted: 0,
            leg_names,
        }
    }

    pub fn add(&mut self, job: usize, s: IntervalSample) {
        let p = self.pending.entry(s.index).or_default();
        p.covered_ns = p.covered_ns.max(s.covered_ns);
        p.inflight_area += s.inflight_area;
        for (a, b) in p.dirs.iter_mut().zip(&s.dirs) {
            a.merge(b);
        }
        if let Some(n) = &mut self.next[job] {
            *n = (*n).max(s.index + 1);
        }
    }

    pub fn job_done(&mut self, job: usize) {
        self.next[job] = None;
    }

    /// Rows every job has passed, in order, each with its merged interval histograms.
    pub fn ready(&mut self) -> Vec<(TimelineRow, [DirInterval; 2])> {
        let horizon = self
            .next
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or(u64::MAX);
        let mut out = Vec::new();
        while let Some((&k, _)) = self.pending.first_key_value() {
            if k >= horizon {
                break;
            }
            let p = self.pending.remove(&k).unwrap_or_default();
            // Intervals nobody reported (all jobs idle) still get a row, so time stays regular.
            while self.emitted < k {
                let idle = Pending {
                    covered_ns: self.interval_ns,
                    ..Default::default()
                };
                out.push((self.row(self.emitted, &idle), idle.dirs));
                self.emitted += 1;
            }
            out.push((self.row(k, &p), p.dirs));
            self.emitted = k + 1;
        }
        out
    }

    fn row(&self, index: u64, p: &Pending) -> TimelineRow {
        let secs = p.covered_ns.max(1) as f64 / 1e9;
        let dir = |d: &DirInterval| DirRow {
            ios: d.ios,
            bytes: d.bytes,
            iops: d.ios as f64 / secs,
            bw_bytes: d.bytes as f64 / secs,
            lat_ns: d.total.summary(),
            clat_ns: d.clat.summary(),
            legs: d
                .legs
                .iter()
                .zip(&self.leg_names)
                .map(|(h, n)| LegRow {
                    name: n.clone(),
                    lat_ns: h.summary(),
                })
                .collect(),
        };
        TimelineRow {
            t_s: (index * self.interval_ns) as f64 / 1e9,
            duration_s: secs,
            read: dir(&p.dirs[0]),
            write: dir(&p.dirs[1]),
            queue_depth: p.inflight_area as f64 / p.covered_ns.max(1) as f64,
            cpu_process_pct: 0.0,
            cpu_system_pct: 0.0,
            verdict: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(index: u64, ios: u64, lat: u64) -> IntervalSample {
        let mut s = IntervalSample {
            index,
            covered_ns: 1_000_000_000,
            inflight_area: 4 * 1_000_000_000,
            ..Default::default()
        };
        s.dirs[0].ios = ios;
        s.dirs[0].bytes = ios * 4096;
        for _ in 0..ios {
            s.dirs[0].total.record(lat);
        }
        s
    }

    #[test]
    fn rows_wait_for_every_job_and_merge_them() {
        let mut t = TimelineBuilder::new(2, 1_000_000_000, vec![]);
        t.add(0, sample(0, 100, 1_000));
        assert!(t.ready().is_empty(), "job 1 has not reported interval 0");
        t.add(1, sample(0, 100, 1_000_000));
        let rows = t.ready();
        assert_eq!(rows.len(), 1);
        let r = &rows[0].0;
        assert_eq!(r.read.ios, 200);
        assert!((r.read.iops - 200.0).abs() < 1e-9);
        assert!((r.queue_depth - 8.0).abs() < 1e-9);
        // Half the IOs took 1 ms: the merged p99 is 1 ms, the p50 1 µs.
        assert!((r.read.lat_ns.p99 as f64 - 1e6).abs() < 1e4);
        assert!((r.read.lat_ns.p50 as f64 - 1e3).abs() < 10.0);
    }

    #[test]
    fn a_finished_job_no_longer_holds_rows_back() {
        let mut t = TimelineBuilder::new(2, 1_000_000_000, vec![]);
        t.add(0, sample(0, 10, 1_000));
        t.add(1, sample(0, 10, 1_000));
        t.job_done(1);
        t.add(0, sample(2, 10, 1_000));
        let rows = t.ready();
        assert_eq!(
            rows.len(),
            3,
            "interval 1 had no samples but still gets a row"
        );
        assert_eq!(rows[1].0.read.ios, 0);
        assert!((rows[2].0.t_s - 2.0).abs() < 1e-9);
    }
}
