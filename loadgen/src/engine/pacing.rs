//! When IOs are due under `rate`/`rate_iops`: each limited direction has its own schedule of
//! intended start times, counted in bytes as fio counts (`rate_iops` is turned into bytes per
//! second with the direction's smallest IO size). `rate_process=linear` spaces IOs evenly;
//! `poisson` draws exponential gaps, the arrivals of an open system. The schedule never
//! waits for completions: an IO that cannot start on time is late, and its latency counts
//! from when it was due.

use super::workload::Rng;
use crate::results::stats::Dir;

struct Schedule {
    bytes_per_s: u64,
    /// Bytes issued so far (linear).
    issued: u64,
    /// Poisson: mean gap in ns and the due time of the next IO.
    poisson: Option<(f64, f64)>,
}

pub struct Pacer {
    start: u64,
    dirs: [Option<Schedule>; 2],
    rng: Rng,
}

impl Pacer {
    /// None when no direction is limited.
    pub fn new(
        start: u64,
        bytes_per_s: [Option<u64>; 2],
        min_bs: [u64; 2],
        poisson: bool,
        seed: u64,
    ) -> Option<Pacer> {
        if bytes_per_s.iter().all(Option::is_none) {
            return None;
        }
        let mut rng = Rng::new(seed ^ 0x5851_f42d_4c95_7f2d);
        let mut dirs = [None, None];
        for d in 0..2 {
            dirs[d] = bytes_per_s[d].filter(|&b| b > 0).map(|b| {
                let gap = 1e9 * min_bs[d].max(1) as f64 / b as f64;
                Schedule {
                    bytes_per_s: b,
                    issued: 0,
                    poisson: poisson.then(|| (gap, gap * -rng.unit().ln())),
                }
            });
        }
        Some(Pacer { start, dirs, rng })
    }

    /// When the next IO of `dir` is due; None if the direction is not limited.
    #[inline]
    pub fn due(&self, dir: Dir) -> Option<u64> {
        self.dirs[dir as usize].as_ref().map(|s| match s.poisson {
            Some((_, next)) => self.start + next as u64,
            None => self.start + (s.issued as u128 * 1_000_000_000 / s.bytes_per_s as u128) as u64,
        })
    }

    /// An IO of `len` bytes in `dir` was issued: the schedule moves on.
    #[inline]
    pub fn issued(&mut self, dir: Dir, len: u64) {
        if let Some(s) = &mut self.dirs[dir as usize] {
            match &mut s.poisson {
                Some((gap, next)) => *next += *gap * -self.rng.unit().ln(),
                None => s.issued += len,
            }
        }
    }

    /// fio's choice of direction under a rate: the direction the mix picked, unless it is
    /// ahead of its schedule and the other one (when the job does both) is not; when both
    /// are ahead, the one due first. Returns the direction and when its IO is due (None:
    /// unlimited, so now).
    pub fn choose(&self, picked: Dir, mixed: bool, now: u64) -> (Dir, Option<u64>) {
        let due = self.due(picked);
        if due.is_none_or(|t| t <= now) || !mixed {
            return (picked, due);
        }
        let other = match picked {
            Dir::Read => Dir::Write,
            Dir::Write => Dir::Read,
        };
        match (due, self.due(other)) {
            (_, None) => (other, None),
            (_, Some(o)) if o <= now => (other, Some(o)),
            (Some(p), Some(o)) if o < p => (other, Some(o)),
            _ => (picked, due),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_schedules_have_no_drift() {
        let p = Pacer::new(1000, [Some(3 * 4096), None], [4096, 4096], false, 1).unwrap();
        let mut p = p;
        assert_eq!(p.due(Dir::Read), Some(1000));
        assert_eq!(p.due(Dir::Write), None);
        for _ in 0..3 {
            p.issued(Dir::Read, 4096);
        }
        assert_eq!(p.due(Dir::Read), Some(1000 + 1_000_000_000));
        for _ in 0..2_999_997 {
            p.issued(Dir::Read, 4096);
        }
        assert_eq!(p.due(Dir::Read), Some(1000 + 1_000_000_000_000_000));
        assert!(Pacer::new(0, [None, None], [4096, 4096], false, 1).is_none());
    }

    #[test]
    fn rate_in_bytes_counts_larger_ios_more() {
        // 1 MiB/s with 64k IOs: 16 IOs per second.
        let mut p = Pacer::new(0, [Some(1 << 20), None], [4096, 4096], false, 1).unwrap();
        for _ in 0..16 {
            p.issued(Dir::Read, 65536);
        }
        assert_eq!(p.due(Dir::Read), Some(1_000_000_000));
    }

    #[test]
    fn poisson_gaps_are_exponential_with_the_right_mean() {
        let mut p = Pacer::new(0, [Some(1000 * 4096), None], [4096, 4096], true, 9).unwrap();
        let mut gaps = Vec::new();
        let mut last = p.due(Dir::Read).unwrap();
        for _ in 0..100_000 {
            p.issued(Dir::Read, 4096);
            let t = p.due(Dir::Read).unwrap();
            gaps.push((t - last) as f64);
            last = t;
        }
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
        // 1000 IOPS: mean gap 1 ms, and an exponential's standard deviation equals its mean.
        assert!((mean - 1e6).abs() < 1e4, "mean gap {mean}");
        assert!((var.sqrt() - 1e6).abs() < 2e4, "stddev {}", var.sqrt());
        let short = gaps.iter().filter(|&&g| g < 1e6).count() as f64 / n;
        assert!((short - (1.0 - (-1.0f64).exp())).abs() < 0.01, "{short}");
    }

    #[test]
    fn the_direction_behind_its_schedule_goes_first() {
        // Reads limited to 1/s, writes unlimited: once reads are ahead, writes go.
        let mut p = Pacer::new(0, [Some(4096), None], [4096, 4096], false, 1).unwrap();
        assert_eq!(p.choose(Dir::Read, true, 0), (Dir::Read, Some(0)));
        p.issued(Dir::Read, 4096);
        assert_eq!(p.choose(Dir::Read, true, 10), (Dir::Write, None));
        // A read-only job waits for its schedule.
        assert_eq!(
            p.choose(Dir::Read, false, 10),
            (Dir::Read, Some(1_000_000_000))
        );
        // Both limited and both ahead: the one due first.
        let mut p = Pacer::new(0, [Some(4096), Some(2 * 4096)], [4096, 4096], false, 1).unwrap();
        p.issued(Dir::Read, 4096);
        p.issued(Dir::Write, 4096);
        assert_eq!(
            p.choose(Dir::Read, true, 1),
            (Dir::Write, Some(500_000_000))
        );
    }
}
