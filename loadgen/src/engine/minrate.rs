//! fio's `rate_min` and `rate_iops_min`: once the job has run 2 s (and its ramp is over),
//! every `rate_cycle` the bytes and IOs it completed in that window must reach the minimums
//! of each direction it does, or the job fails naming the rate in fio's words.

/// The minimums of reads and writes (None: no minimum) and the window, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinRate {
    pub bytes: [Option<u64>; 2],
    pub iops: [Option<u64>; 2],
    pub cycle_ns: u64,
}

/// fio lets a job settle this long before it checks.
const SETTLE_NS: u64 = 2_000_000_000;

pub struct Checker {
    min: MinRate,
    /// When the current window started (None: not yet), and the job's counts then.
    since: Option<u64>,
    first: u64,
    last: [(u64, u64); 2],
}

impl Checker {
    /// A checker for a job that started at `start` and measures from `measure_start`; None
    /// when no minimum is set.
    pub fn new(min: MinRate, start: u64, measure_start: u64) -> Option<Checker> {
        let any = min.bytes.iter().chain(&min.iops).any(Option::is_some);
        any.then(|| Checker {
            min,
            since: None,
            first: (start + SETTLE_NS).max(measure_start),
            last: [(0, 0); 2],
        })
    }

    /// `done`: the (IOs, bytes) of reads and writes the job completed so far. An error
    /// names the first minimum a finished window missed.
    pub fn check(
        &mut self,
        now: u64,
        done: impl FnOnce() -> [(u64, u64); 2],
    ) -> Result<(), String> {
        let Some(since) = self.since else {
            if now >= self.first {
                self.since = Some(now);
                self.last = done();
            }
            return Ok(());
        };
        let spent = now - since;
        if spent < self.min.cycle_ns {
            return Ok(());
        }
        let done = done();
        let per_s = |n: u64| (n as u128 * 1_000_000_000 / spent as u128) as u64;
        let ms = spent / 1_000_000;
        for (d, dir) in ["reads", "writes"].iter().enumerate() {
            let ios = done[d].0.saturating_sub(self.last[d].0);
            let bytes = done[d].1.saturating_sub(self.last[d].1);
            if let Some(min) = self.min.bytes[d]
                && per_s(bytes) < min
            {
                return Err(format!(
                    "rate_min={min}B/s not met, got {}B/s ({dir}, over the last {ms} ms)",
                    per_s(bytes)
                ));
            }
            if let Some(min) = self.min.iops[d]
                && per_s(ios) < min
            {
                return Err(format!(
                    "rate_iops_min={min} not met, got {} IOPS ({dir}, over the last {ms} ms)",
                    per_s(ios)
                ));
            }
        }
        self.since = Some(now);
        self.last = done;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_window_below_the_minimum_fails_after_the_settling() {
        let min = MinRate {
            bytes: [Some(1 << 20), None],
            iops: [None, Some(100)],
            cycle_ns: S,
        };
        let mut c = Checker::new(min, 0, 0).unwrap();
        // Nothing at all in the first 2 s is forgiven, as fio's settling.
        assert!(c.check(S, || [(0, 0); 2]).is_ok());
        assert!(c.check(2 * S, || [(0, 0), (0, 0)]).is_ok());
        // 1 MiB and 100 writes in the window: met.
        assert!(c.check(3 * S, || [(256, 1 << 20), (100, 409_600)]).is_ok());
        // Half a window later: not judged yet.
        assert!(
            c.check(3 * S + S / 2, || [(256, 1 << 20), (100, 409_600)])
                .is_ok()
        );
        let e = c
            .check(4 * S, || [(384, 3 << 19), (200, 819_200)])
            .unwrap_err();
        assert_eq!(
            e,
            "rate_min=1048576B/s not met, got 524288B/s (reads, over the last 1000 ms)"
        );
        let mut c = Checker::new(min, 0, 0).unwrap();
        c.check(2 * S, || [(0, 0); 2]).unwrap();
        let e = c.check(3 * S, || [(256, 1 << 20), (99, 0)]).unwrap_err();
        assert!(
            e.starts_with("rate_iops_min=100 not met, got 99 IOPS (writes"),
            "{e}"
        );
        assert!(Checker::new(MinRate::default(), 0, 0).is_none());
    }

    #[test]
    fn the_ramp_is_not_judged() {
        let min = MinRate {
            bytes: [Some(1), None],
            iops: [None, None],
            cycle_ns: S,
        };
        let mut c = Checker::new(min, 0, 5 * S).unwrap();
        assert!(c.check(3 * S, || [(0, 0); 2]).is_ok());
        assert!(c.check(4 * S + S / 2, || [(0, 0); 2]).is_ok());
        assert!(c.check(5 * S, || [(0, 0); 2]).is_ok());
        assert!(c.check(6 * S, || [(0, 0); 2]).is_err());
    }
}
