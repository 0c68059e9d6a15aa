//! Small helpers over per-interval series with missing entries.

use crate::model::Series;

/// The value of interval `i`; missing, non-finite and negative values read as `None`.
pub fn at(s: &Series, i: usize) -> Option<f64> {
    s.get(i)
        .copied()
        .flatten()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// Whether the series holds at least one usable value.
pub fn measured(s: &Series) -> bool {
    (0..s.len()).any(|i| at(s, i).is_some())
}

fn values<'a>(s: &'a Series, idx: &'a [usize]) -> impl Iterator<Item = f64> + 'a {
    idx.iter().filter_map(move |&i| at(s, i))
}

/// Mean of the present values at the given intervals.
pub fn mean_over(s: &Series, idx: &[usize]) -> Option<f64> {
    let (sum, n) = values(s, idx).fold((0.0, 0usize), |(a, n), v| (a + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Sum of the present values at the given intervals.
/// Median of the values at `idx`: a level that changed at the edge of the intervals (a
/// shaper's rate set within the first of them) does not pull it.
pub fn median_over(s: &Series, idx: &[usize]) -> Option<f64> {
    median(&mut idx.iter().filter_map(|&i| at(s, i)).collect::<Vec<f64>>())
}

pub fn sum_over(s: &Series, idx: &[usize]) -> Option<f64> {
    let mut it = values(s, idx).peekable();
    it.peek()?;
    Some(it.sum())
}

/// Largest present value at the given intervals.
pub fn max_over(s: &Series, idx: &[usize]) -> Option<f64> {
    values(s, idx).reduce(f64::max)
}

/// The last present value (for gauges that rarely change, such as an MTU).
pub fn last(s: &Series) -> Option<f64> {
    (0..s.len()).rev().find_map(|i| at(s, i))
}

/// Element-wise sum; an interval is present when any input is present there.
pub fn sum_series<'a>(inputs: impl IntoIterator<Item = &'a Series>, n: usize) -> Series {
    let inputs: Vec<&Series> = inputs.into_iter().collect();
    (0..n)
        .map(|i| {
            let vals: Vec<f64> = inputs.iter().filter_map(|s| at(s, i)).collect();
            (!vals.is_empty()).then(|| vals.iter().sum())
        })
        .collect()
}

/// Median of a non-empty slice (sorts it).
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// Median absolute deviation from `center`.
pub fn mad(v: &[f64], center: f64) -> Option<f64> {
    let mut d: Vec<f64> = v.iter().map(|x| (x - center).abs()).collect();
    median(&mut d)
}

/// All interval indices of a run of `n` intervals.
pub fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_negative_and_nan_are_skipped() {
        let s = vec![Some(1.0), None, Some(f64::NAN), Some(-3.0), Some(3.0)];
        assert_eq!(mean_over(&s, &all(5)), Some(2.0));
        assert_eq!(sum_over(&s, &all(5)), Some(4.0));
        assert_eq!(sum_over(&s, &[1, 2]), None);
        assert_eq!(last(&s), Some(3.0));
        assert_eq!(at(&s, 9), None);
    }

    #[test]
    fn median_and_mad() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        assert_eq!(mad(&[1.0, 2.0, 3.0, 100.0], 2.5), Some(1.0));
    }

    #[test]
    fn sum_of_series_keeps_gaps_where_all_are_missing() {
        let a = vec![Some(1.0), None, None];
        let b = vec![Some(2.0), Some(5.0), None];
        assert_eq!(sum_series([&a, &b], 3), vec![Some(3.0), Some(5.0), None]);
    }
}
