//! Spearman rank correlation (ties get their average rank), and the best lag.

use serde::{Deserialize, Serialize};

use crate::model::Series;
use crate::series::at;

/// Ranks starting at 1; tied values share the mean of the ranks they span.
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let mean_rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = mean_rank;
        }
        i = j + 1;
    }
    r
}

/// Pearson correlation; `None` when either side is constant or they differ in length.
pub fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if saa <= 0.0 || sbb <= 0.0 {
        return None;
    }
    Some((sab / (saa * sbb).sqrt()).clamp(-1.0, 1.0))
}

/// Spearman's rho: Pearson correlation of the ranks (correct with ties).
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    pearson(&ranks(a), &ranks(b))
}

/// A signal's association with latency at its best lag.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lagged {
    pub rho: f64,
    /// Intervals by which the signal leads latency (negative: it follows).
    pub lag: i32,
    pub points: usize,
}

/// Spearman over the intervals where both are present, pairing `latency[t]` with
/// `signal[t - lag]`. `None` below `min_points` pairs or when either side is constant.
pub fn at_lag(latency: &Series, signal: &Series, lag: i32, min_points: usize) -> Option<Lagged> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in 0..latency.len() {
        let Some(s) = t.checked_add_signed(-(lag as isize)) else {
            continue;
        };
        if let (Some(x), Some(y)) = (at(latency, t), at(signal, s)) {
            a.push(x);
            b.push(y);
        }
    }
    if a.len() < min_points.max(3) {
        return None;
    }
    Some(Lagged {
        rho: spearman(&a, &b)?,
        lag,
        points: a.len(),
    })
}

/// The lag within ±`max_lag` with the highest rho; on a tie the smaller shift wins.
pub fn best_lag(
    latency: &Series,
    signal: &Series,
    max_lag: usize,
    min_points: usize,
) -> Option<Lagged> {
    let m = max_lag as i32;
    let mut lags: Vec<i32> = (-m..=m).collect();
    lags.sort_by_key(|l| (l.abs(), -l));
    let mut best: Option<Lagged> = None;
    for lag in lags {
        if let Some(c) = at_lag(latency, signal, lag, min_points)
            && best.is_none_or(|b| c.rho > b.rho + 1e-9)
        {
            best = Some(c);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Series {
        v.iter().map(|x| Some(*x)).collect()
    }

    #[test]
    fn ties_share_their_average_rank() {
        assert_eq!(ranks(&[10.0, 20.0, 10.0, 30.0]), vec![1.5, 3.0, 1.5, 4.0]);
        assert_eq!(ranks(&[0.0, 0.0, 0.0]), vec![2.0, 2.0, 2.0]);
    }

    #[test]
    fn spearman_matches_a_hand_computed_value_with_ties() {
        // x ranks 1,2.5,2.5,4,5; y ranks 2,1,3,5,4.
        let x = [1.0, 2.0, 2.0, 3.0, 4.0];
        let y = [5.0, 1.0, 6.0, 9.0, 8.0];
        let rho = spearman(&x, &y).unwrap();
        // Pearson of the ranks, computed by hand: 7 / sqrt(9.5 * 10).
        assert!((rho - 7.0 / (9.5f64 * 10.0).sqrt()).abs() < 1e-12, "{rho}");
        // Any monotonic transform gives 1.
        let z: Vec<f64> = x.iter().map(|v: &f64| v.exp()).collect();
        assert!((spearman(&x, &z).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(spearman(&x, &[1.0; 5]), None);
    }

    #[test]
    fn best_lag_finds_a_signal_that_leads_by_two() {
        let lat: Vec<f64> = (0..30)
            .map(|i| {
                if (10..15).contains(&i) {
                    9.0
                } else {
                    1.0 + (i % 3) as f64 * 0.1
                }
            })
            .collect();
        // The signal's burst starts two intervals earlier.
        let sig: Vec<f64> = (0..30)
            .map(|i| if (8..13).contains(&i) { 50.0 } else { 0.0 })
            .collect();
        let b = best_lag(&s(&lat), &s(&sig), 2, 8).unwrap();
        assert_eq!(b.lag, 2);
        assert!(b.rho > 0.6, "{b:?}");
        let at0 = at_lag(&s(&lat), &s(&sig), 0, 8).unwrap();
        assert!(at0.rho < b.rho - 0.2, "{at0:?}");
    }

    #[test]
    fn too_few_pairs_or_gaps_give_none() {
        let lat = vec![Some(1.0), None, Some(3.0), Some(4.0)];
        let sig = vec![Some(1.0), Some(2.0), None, Some(4.0)];
        assert_eq!(best_lag(&lat, &sig, 2, 8), None);
        assert_eq!(best_lag(&vec![], &vec![], 2, 8), None);
    }
}
