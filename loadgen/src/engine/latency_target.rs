//! fio's latency-target mode (`latency_target`, `latency_window`, `latency_percentile`,
//! `latency_run`): find the highest queue depth whose IOs meet the target. Each window runs
//! at one depth; it passes when at least `percentile` % of its IOs took at most `target`
//! (from their intended start). As fio: start at depth 1, double while windows pass, then
//! bisect between the last depth that passed and the first that failed; when the depth
//! stops changing, run one more window at it with fresh statistics (the job's results) and
//! stop, unless `latency_run` keeps adjusting until the runtime ends. A depth that fails
//! waits for the IOs in flight before its window starts, so that they do not count against
//! it. Every window is one step in the report.

use crate::results::histogram::Histogram;
pub use crate::results::latency_search::{SearchResult, Step, Target};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// The final window begins: the job starts its statistics afresh.
    ResetStats,
}

pub struct Search {
    t: Target,
    max: u32,
    qd: u32,
    low: u32,
    high: u32,
    stable: u32,
    end_run: bool,
    done: bool,
    met: bool,
    /// Waiting for the IOs in flight before the next window starts.
    quiesce: bool,
    /// The window under way: its start, IOs, IOs over the target, latencies.
    start: u64,
    ios: u64,
    failed: u64,
    hist: Histogram,
    /// When the measurement began (step times count from there).
    origin: u64,
    steps: Vec<Step>,
}

impl Search {
    pub fn new(t: Target, max_depth: u32, now: u64) -> Search {
        Search {
            t,
            max: max_depth.max(1),
            qd: 1,
            low: 1,
            high: max_depth.max(1),
            stable: 0,
            end_run: false,
            done: false,
            met: false,
            quiesce: false,
            start: now,
            ios: 0,
            failed: 0,
            hist: Histogram::new(),
            origin: now,
            steps: Vec::new(),
        }
    }

    /// The depth IOs may reach now.
    pub fn depth(&self) -> u32 {
        self.qd
    }
    /// No new IO until those in flight are done.
    pub fn quiescing(&self) -> bool {
        self.quiesce
    }
    pub fn done(&self) -> bool {
        self.done
    }

    /// A measured IO completed with latency `lat`.
    pub fn io(&mut self, lat: u64, now: u64) -> Action {
        if self.quiesce || self.done {
            return Action::None;
        }
        self.ios += 1;
        self.hist.record(lat);
        if lat > self.t.target_ns {
            self.failed += 1;
            // With 100 %, one IO over the target fails the depth at once, as in fio.
            if self.t.percentile >= 100.0 {
                return self.decide(false, now);
            }
        }
        Action::None
    }

    /// After each reaping: a window that has run its length is judged.
    pub fn check(&mut self, now: u64) -> Action {
        if self.quiesce || self.done || self.ios == 0 {
            return Action::None;
        }
        if now.saturating_sub(self.start) < self.t.window_ns {
            return Action::None;
        }
        let within = 100.0 * (self.ios - self.failed) as f64 / self.ios as f64;
        self.decide(within >= self.t.percentile, now)
    }

    /// The IOs in flight are done: the next window starts.
    pub fn drained(&mut self, now: u64) {
        if self.quiesce {
            self.quiesce = false;
            self.new_window(now);
        }
    }

    fn new_window(&mut self, now: u64) {
        self.start = now;
        self.ios = 0;
        self.failed = 0;
        self.hist = Histogram::new();
    }

    fn record(&mut self, met: bool, now: u64) {
        let duration = now.saturating_sub(self.start);
        self.steps.push(Step {
            depth: self.qd,
            start_ns: self.start.saturating_sub(self.origin),
            duration_ns: duration,
            ios: self.ios,
            iops: if duration > 0 {
                self.ios as f64 * 1e9 / duration as f64
            } else {
                0.0
            },
            latency_ns: self.hist.percentile(self.t.percentile),
            within_pct: if self.ios > 0 {
                100.0 * (self.ios - self.failed) as f64 / self.ios as f64
            } else {
                0.0
            },
            met,
            last: self.end_run,
        });
    }

    fn decide(&mut self, met: bool, now: u64) -> Action {
        self.record(met, now);
        if met {
            self.success(now)
        } else {
            self.failure(now)
        }
    }

    fn success(&mut self, now: u64) -> Action {
        let qd = self.qd;
        self.low = qd;
        if qd + 1 == self.high {
            // Stuck one below the depth that failed: after three passes try that one again,
            // since the failure may have been a passing disturbance (fio's heuristic).
            self.stable += 1;
            if self.stable >= 3 {
                self.high += 1;
                self.stable = 0;
            }
        }
        self.qd = if self.high != self.max {
            (qd + self.high) / 2
        } else {
            qd.saturating_mul(2)
        }
        .clamp(1, self.max);
        if !self.t.run && self.qd == qd {
            if self.end_run {
                self.done = true;
                self.met = true;
                return Action::None;
            }
            self.end_run = true;
            self.quiesce = true;
            return Action::ResetStats;
        }
        self.new_window(now);
        Action::None
    }

    fn failure(&mut self, now: u64) -> Action {
        if self.qd == 1 {
            // Even one IO at a time misses the target: nothing to find. A last window at
            // depth 1 gives the job's results, then the search ends.
            if self.end_run || self.t.run {
                if !self.t.run {
                    self.done = true;
                }
                self.new_window(now);
                return Action::None;
            }
            self.end_run = true;
            self.quiesce = true;
            return Action::ResetStats;
        }
        self.high = self.qd;
        if self.qd == self.low {
            self.low -= 1;
        }
        self.qd = ((self.qd + self.low) / 2).max(1);
        self.stable = 0;
        self.quiesce = true;
        let _ = now;
        Action::None
    }

    pub fn result(&self) -> SearchResult {
        SearchResult {
            target: self.t,
            depth: self.qd,
            met: self.met,
            finished: self.done,
            steps: self.steps.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn target(pct: f64) -> Target {
        Target {
            target_ns: MS,
            window_ns: 100 * MS,
            percentile: pct,
            run: false,
        }
    }

    /// Runs the search against a device whose latency is `lat(depth)` for every IO, with
    /// 100 IOs per window; returns the depths of the steps and the result.
    fn simulate(pct: f64, max: u32, mut lat: impl FnMut(u32) -> u64) -> (Vec<u32>, SearchResult) {
        let mut s = Search::new(target(pct), max, 0);
        let mut now = 0;
        for _ in 0..10_000 {
            if s.done() {
                break;
            }
            if s.quiescing() {
                s.drained(now);
                continue;
            }
            for _ in 0..100 {
                now += MS;
                if s.io(lat(s.depth()), now) == Action::ResetStats {
                    break;
                }
            }
            s.check(now);
        }
        let r = s.result();
        (r.steps.iter().map(|x| x.depth).collect(), r)
    }

    #[test]
    fn doubles_then_bisects_to_the_highest_passing_depth() {
        // Depths up to 12 meet 1 ms.
        let (depths, r) = simulate(99.0, 64, |d| if d <= 12 { 900_000 } else { 2 * MS });
        assert_eq!(&depths[..6], [1, 2, 4, 8, 16, 12], "{depths:?}");
        assert!(r.finished && r.met, "{r:?}");
        assert_eq!(r.depth, 12);
        let last = r.steps.last().unwrap();
        assert!(last.last && last.met && last.depth == 12);
        assert!(r.steps.iter().all(|s| s.met == (s.depth <= 12)));
    }

    #[test]
    fn the_ceiling_is_iodepth() {
        let (depths, r) = simulate(99.0, 8, |_| 10_000);
        assert_eq!(depths, [1, 2, 4, 8, 8]);
        assert_eq!(r.depth, 8);
        assert!(r.met);
    }

    #[test]
    fn a_target_no_depth_meets_ends_at_depth_1() {
        let (depths, r) = simulate(99.0, 32, |_| 5 * MS);
        assert_eq!(depths, [1, 1]);
        assert!(r.finished && !r.met);
        assert_eq!(r.depth, 1);
    }

    #[test]
    fn percentiles_below_100_allow_some_slow_ios() {
        // 2% of IOs are slow at every depth: p99 fails, p95 passes up to the ceiling.
        let mut n = 0u64;
        let (_, r) = simulate(95.0, 16, |_| {
            n += 1;
            if n.is_multiple_of(50) {
                5 * MS
            } else {
                100_000
            }
        });
        assert!(r.met && r.depth == 16, "{r:?}");
        let step = &r.steps[0];
        assert!((step.within_pct - 98.0).abs() < 1.5, "{step:?}");
    }
}
