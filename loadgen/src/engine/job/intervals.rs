//! Interval boundaries: each interval's samples handed to the collector, and the fresh
//! statistics of a latency-target search's last window.

use super::{Job, new_interval};
use crate::engine::Msg;
use crate::results::histogram::Histogram;
use crate::results::stats::{DirStats, IntervalCount, IoDists, LegStats, SyncStats};

impl Job<'_> {
    /// The last window of a latency-target search begins: the job's results are its.
    pub(super) fn reset_stats(&mut self, now: u64) {
        for d in &mut self.dirs {
            let legs = d
                .legs
                .iter()
                .map(|l| LegStats {
                    name: l.name.clone(),
                    lat: Histogram::new(),
                })
                .collect();
            *d = DirStats {
                legs,
                ..DirStats::default()
            };
        }
        self.dists = IoDists::default();
        self.intervals.clear();
        self.sync = SyncStats::default();
        self.cpu_start = Some(crate::cpu::thread_cpu());
        self.results_from = now;
    }

    /// Sends the samples of every interval that has ended by `now`. The interval that ends
    /// at the deadline stays open: it also takes the IOs that drain after the deadline.
    pub(super) fn boundaries(&mut self, now: u64) {
        while now >= self.next_boundary && self.deadline.is_none_or(|d| self.next_boundary < d) {
            // The first interval of a job held back by `startdelay` is covered in part.
            let start = self.next_boundary - self.spec.interval_ns;
            // IOs in flight count in each interval they spanned, also when nothing
            // completed in it.
            self.advance_qd(self.next_boundary);
            self.send_interval(self.next_boundary - start.max(self.measure_start));
            self.next_boundary += self.spec.interval_ns;
        }
        self.advance_qd(now);
    }

    pub(super) fn send_interval(&mut self, covered_ns: u64) {
        let next = new_interval(self.interval_index + 1, self.leg_names.len());
        let mut s = std::mem::replace(&mut self.ivl, next);
        s.covered_ns = covered_ns;
        self.intervals.push(IntervalCount {
            covered_ns,
            ios: [s.dirs[0].ios, s.dirs[1].ios],
            bytes: [s.dirs[0].bytes, s.dirs[1].bytes],
        });
        let _ = self.tx.send(Msg::Interval(self.spec.index, Box::new(s)));
        self.interval_index += 1;
    }

    /// The last, partial interval.
    pub(super) fn last_interval(&mut self, end: u64) {
        let start = self.next_boundary - self.spec.interval_ns;
        if end > start && end > self.measure_start {
            self.send_interval(end - start.max(self.measure_start));
        }
    }
}
