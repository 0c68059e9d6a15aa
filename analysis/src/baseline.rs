//! The run's own latency baseline and the intervals raised above it.

use serde::{Deserialize, Serialize};

use crate::model::{Latency, Series};
use crate::series::{at, mad, median};
use crate::thresholds::Thresholds;

/// MAD times this estimates a standard deviation for normally distributed noise.
const MAD_TO_SIGMA: f64 = 1.4826;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Median p99 of the lower part of the run.
    pub p99_seconds: f64,
    /// Robust spread (scaled MAD) of the lower part.
    pub spread_seconds: f64,
    /// p99 above this is raised.
    pub threshold_seconds: f64,
    /// Intervals in the lower part.
    pub lower_intervals: usize,
}

/// The p99 of each interval: the recorded value, else the interval's histogram.
pub fn p99_series(lat: &Latency, n: usize) -> Series {
    (0..n)
        .map(|i| {
            at(&lat.p99_seconds, i).or_else(|| {
                lat.histograms
                    .get(i)?
                    .as_ref()?
                    .quantile(0.99)
                    .filter(|v| v.is_finite())
            })
        })
        .collect()
}

/// Baseline from the lower part of the run: the values not above the run's median by more
/// than three robust standard deviations. Raised intervals (up to half the run) fall
/// outside it, so they do not inflate the baseline.
pub fn baseline(p99: &Series, t: &Thresholds) -> Option<Baseline> {
    let mut all: Vec<f64> = (0..p99.len()).filter_map(|i| at(p99, i)).collect();
    let m = median(&mut all)?;
    let cut = m + 3.0 * MAD_TO_SIGMA * mad(&all, m)?;
    let mut lower: Vec<f64> = all.into_iter().filter(|v| *v <= cut).collect();
    let base = median(&mut lower)?;
    let spread = (MAD_TO_SIGMA * mad(&lower, base)?).max(0.01 * base);
    let threshold = base + (t.mad_factor * spread).max(t.min_relative_rise * base);
    Some(Baseline {
        p99_seconds: base,
        spread_seconds: spread,
        threshold_seconds: threshold,
        lower_intervals: lower.len(),
    })
}

/// Intervals whose p99 is above the threshold. Where the interval's histogram is known, at
/// least `min_slow_ios` of its IOs must lie above the threshold too: in an interval of a
/// hundred-odd IOs the p99 is its slowest one or two, and one straggler (a descheduled
/// thread) is not a rise.
pub fn raised(p99: &Series, b: &Baseline, lat: &Latency, t: &Thresholds) -> Vec<usize> {
    (0..p99.len())
        .filter(|&i| at(p99, i).is_some_and(|v| v > b.threshold_seconds))
        .filter(|&i| {
            lat.histograms
                .get(i)
                .and_then(Option::as_ref)
                .is_none_or(|h| h.above(b.threshold_seconds) >= t.min_slow_ios)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Series {
        v.iter().map(|x| Some(*x)).collect()
    }

    #[test]
    fn a_step_in_half_the_run_is_found_and_the_baseline_stays_low() {
        let mut v = vec![0.002; 16];
        v.extend([0.2; 14]);
        let t = Thresholds::default();
        let b = baseline(&s(&v), &t).unwrap();
        assert!((b.p99_seconds - 0.002).abs() < 1e-12);
        let none = Latency::default();
        assert_eq!(raised(&s(&v), &b, &none, &t), (16..30).collect::<Vec<_>>());
    }

    #[test]
    fn noise_without_a_rise_raises_nothing() {
        // ±35% around 2 ms, deterministic.
        let v: Vec<f64> = (0..60)
            .map(|i| 0.002 * (1.0 + 0.35 * ((i * 37 % 17) as f64 / 8.0 - 1.0)))
            .collect();
        let t = Thresholds::default();
        let b = baseline(&s(&v), &t).unwrap();
        assert!(raised(&s(&v), &b, &Latency::default(), &t).is_empty());
    }

    #[test]
    fn a_rise_smaller_than_the_minimum_is_not_raised() {
        let mut v = vec![0.002; 20];
        v.extend([0.0035; 10]); // +75%, far outside a zero-spread baseline
        let t = Thresholds::default();
        let b = baseline(&s(&v), &t).unwrap();
        assert!(raised(&s(&v), &b, &Latency::default(), &t).is_empty());
    }

    #[test]
    fn a_lone_straggler_is_not_a_rise() {
        use crate::histogram::BucketHistogram;
        // Ten intervals of 140 IOs around 1 ms; in two of them the p99 is pushed to 4.5 ms
        // by stragglers: two IOs in one (noise), twenty in the other (a rise).
        let bounds = vec![0.001, 0.002, 0.004, 0.008];
        let h = |slow: u64| {
            Some(BucketHistogram {
                bounds_seconds: bounds.clone(),
                counts: vec![140 - slow, 0, 0, slow, 0],
            })
        };
        let mut histograms = vec![h(0); 10];
        histograms[3] = h(2);
        histograms[7] = h(20);
        let lat = Latency {
            histograms,
            ..Latency::default()
        };
        let p99 = p99_series(&lat, 10);
        let t = Thresholds::default();
        let b = baseline(&p99, &t).unwrap();
        assert!(at(&p99, 3).unwrap() > b.threshold_seconds);
        assert_eq!(raised(&p99, &b, &lat, &t), vec![7]);
    }

    #[test]
    fn p99_comes_from_histograms_where_missing() {
        use crate::histogram::BucketHistogram;
        let lat = Latency {
            p99_seconds: vec![Some(0.003), None],
            histograms: vec![
                None,
                Some(BucketHistogram {
                    bounds_seconds: vec![0.001, 0.01],
                    counts: vec![0, 10, 0],
                }),
            ],
            ..Latency::default()
        };
        let p = p99_series(&lat, 2);
        assert_eq!(p[0], Some(0.003));
        assert!((p[1].unwrap() - 0.00991).abs() < 1e-9);
        assert_eq!(baseline(&vec![None, None], &Thresholds::default()), None);
    }
}
