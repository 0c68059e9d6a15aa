//! Mergeable latency histograms: percentiles of several intervals come from merged counts,
//! never from averaged percentiles.

use serde::{Deserialize, Serialize};

/// Counts per bucket. `counts[i]` holds values in `(bounds[i-1], bounds[i]]` (the first
/// bucket starts at 0); the last count holds values above the last bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketHistogram {
    /// Upper bounds in seconds, increasing.
    pub bounds_seconds: Vec<f64>,
    /// `bounds_seconds.len() + 1` counts, not cumulative.
    pub counts: Vec<u64>,
}

impl BucketHistogram {
    /// Builds one from Prometheus-style cumulative buckets `(le, count)` (without `+Inf`)
    /// and the total count.
    pub fn from_cumulative(buckets: &[(f64, u64)], total: u64) -> BucketHistogram {
        let mut counts = Vec::with_capacity(buckets.len() + 1);
        let mut prev = 0u64;
        for &(_, c) in buckets {
            counts.push(c.saturating_sub(prev));
            prev = prev.max(c);
        }
        counts.push(total.saturating_sub(prev));
        BucketHistogram {
            bounds_seconds: buckets.iter().map(|b| b.0).collect(),
            counts,
        }
    }

    pub fn is_well_formed(&self) -> bool {
        self.counts.len() == self.bounds_seconds.len() + 1
            && self
                .bounds_seconds
                .iter()
                .all(|b| b.is_finite() && *b >= 0.0)
            && self.bounds_seconds.windows(2).all(|w| w[1] > w[0])
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another histogram's counts; `false` (and no change) when the buckets differ.
    pub fn merge(&mut self, other: &BucketHistogram) -> bool {
        if self.bounds_seconds != other.bounds_seconds || self.counts.len() != other.counts.len() {
            return false;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        true
    }

    /// How many values lie above `seconds` for certain: those in buckets whose lower bound
    /// is at or above it (the bucket holding `seconds` is not counted).
    pub fn above(&self, seconds: f64) -> u64 {
        if !self.is_well_formed() {
            return 0;
        }
        self.counts
            .iter()
            .enumerate()
            .filter(|&(i, _)| i > 0 && self.bounds_seconds[i - 1] >= seconds)
            .map(|(_, c)| c)
            .sum()
    }

    /// The q-quantile (0..=1), interpolated linearly inside its bucket. Values above the
    /// last bound report the last bound (a lower limit). `None` when empty or malformed.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 || !self.is_well_formed() || !(0.0..=1.0).contains(&q) {
            return None;
        }
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 && (below + c) as f64 >= rank {
                let Some(&hi) = self.bounds_seconds.get(i) else {
                    return self.bounds_seconds.last().copied();
                };
                let lo = if i == 0 {
                    0.0
                } else {
                    self.bounds_seconds[i - 1]
                };
                let within = ((rank - below as f64) / c as f64).clamp(0.0, 1.0);
                return Some(lo + (hi - lo) * within);
            }
            below += c;
        }
        self.bounds_seconds.last().copied()
    }
}

/// Merges the histograms of the given intervals; `None` when none is present or their
/// buckets differ.
pub fn merged(
    histograms: &[Option<BucketHistogram>],
    intervals: &[usize],
) -> Option<BucketHistogram> {
    let mut out: Option<BucketHistogram> = None;
    for h in intervals
        .iter()
        .filter_map(|&i| histograms.get(i)?.as_ref())
    {
        match out.as_mut() {
            None => out = Some(h.clone()),
            Some(acc) => {
                if !acc.merge(h) {
                    return None;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(counts: &[u64]) -> BucketHistogram {
        BucketHistogram {
            bounds_seconds: vec![0.001, 0.002, 0.004, 0.008],
            counts: counts.to_vec(),
        }
    }

    #[test]
    fn quantile_interpolates_inside_the_bucket() {
        // 100 values: 50 in (0,1ms], 50 in (1ms,2ms].
        let x = h(&[50, 50, 0, 0, 0]);
        assert!((x.quantile(0.5).unwrap() - 0.001).abs() < 1e-12);
        assert!((x.quantile(0.75).unwrap() - 0.0015).abs() < 1e-12);
        assert!((x.quantile(0.99).unwrap() - 0.00198).abs() < 1e-12);
    }

    #[test]
    fn overflow_reports_the_last_bound_and_empty_is_none() {
        assert_eq!(h(&[0, 0, 0, 0, 3]).quantile(0.99), Some(0.008));
        assert_eq!(h(&[0; 5]).quantile(0.5), None);
        assert_eq!(h(&[1, 2]).quantile(0.5), None);
    }

    #[test]
    fn merging_two_intervals_is_not_averaging_their_percentiles() {
        // Interval A: 95 fast IOs and 5 above 8 ms; interval B: 100 fast ones. Of the 200
        // IOs, 2.5% took more than 8 ms, so the p99 of both is above 8 ms; the average of
        // the two p99s would claim 4.5 ms.
        let a = h(&[95, 0, 0, 0, 5]);
        let b = h(&[100, 0, 0, 0, 0]);
        let m = merged(&[Some(a.clone()), Some(b.clone())], &[0, 1]).unwrap();
        assert_eq!(m.total(), 200);
        assert_eq!(m.quantile(0.99), Some(0.008));
        let avg = (a.quantile(0.99).unwrap() + b.quantile(0.99).unwrap()) / 2.0;
        assert!(avg < 0.005);
        let mut other = BucketHistogram {
            bounds_seconds: vec![0.5],
            counts: vec![1, 1],
        };
        assert!(!other.merge(&a));
        assert_eq!(merged(&[Some(a), Some(other)], &[0, 1]), None);
    }

    #[test]
    fn from_cumulative_matches_prometheus_buckets() {
        let x = BucketHistogram::from_cumulative(&[(0.001, 1), (0.002, 3)], 4);
        assert_eq!(x.counts, vec![1, 2, 1]);
        assert!(x.is_well_formed());
    }
}
