//! A classic histogram as a Prometheus native histogram: its buckets moved to the nearest
//! boundaries of a base-2 schema. The agent's coarse buckets (1 µs · 2^k, 512 B · 2^k) land
//! one to one on schema 0; the fine ones (four per power of two) on schema 3, where each
//! keeps a native bucket of its own. A bound moves by at most half a native bucket, under
//! 5% for the coarse seconds (1 µs is 1.05 · 2^-20).

use crate::model::HistogramValue;

/// The schemas Prometheus knows: each power of two split into 2^schema buckets.
const SCHEMAS: std::ops::RangeInclusive<i32> = -4..=8;

/// A native histogram: the zero bucket and the positive buckets as spans and deltas, as the
/// protobuf exposition carries them.
#[derive(Clone, Debug, PartialEq)]
pub struct Native {
    pub schema: i32,
    /// The zero bucket holds the classic first bucket: every value up to this.
    pub zero_threshold: f64,
    pub zero_count: u64,
    /// (offset, length): the first offset is the index of the first bucket, later ones the
    /// gap after the previous span.
    pub spans: Vec<(i32, u32)>,
    /// Each bucket's count minus the previous one's (the first: minus zero).
    pub deltas: Vec<i64>,
}

/// Native bucket `i` of schema `s` is (2^((i-1)/2^s), 2^(i/2^s)]; a bound's index is that of
/// the nearest boundary.
fn index(bound: f64, schema: i32) -> i64 {
    (bound.log2() * 2f64.powi(schema)).round() as i64
}

fn boundary(index: i64, schema: i32) -> f64 {
    (index as f64 / 2f64.powi(schema)).exp2()
}

/// The coarsest schema that keeps every classic bucket apart; none for histograms with fewer
/// than two bounds or a bound that is not positive and finite.
pub fn schema(bounds: &[f64]) -> Option<i32> {
    if bounds.len() < 2 || bounds.iter().any(|b| !(b.is_finite() && *b > 0.0)) {
        return None;
    }
    SCHEMAS
        .into_iter()
        .find(|&s| bounds.windows(2).all(|w| index(w[0], s) < index(w[1], s)))
}

/// The native form of `h`: the first classic bucket becomes the zero bucket, each later one
/// the native bucket nearest it, and what lies above the last bound the native bucket above.
pub fn from_classic(h: &HistogramValue) -> Option<Native> {
    let bounds: Vec<f64> = h.buckets.iter().map(|b| b.0).collect();
    let schema = schema(&bounds)?;
    let first = index(bounds[0], schema);
    let mut counts: Vec<(i64, u64)> = Vec::with_capacity(h.buckets.len());
    let mut below = h.buckets[0].1;
    for &(le, cumulative) in &h.buckets[1..] {
        counts.push((index(le, schema), cumulative.saturating_sub(below)));
        below = below.max(cumulative);
    }
    let last = index(bounds[bounds.len() - 1], schema);
    counts.push((last + 1, h.count.saturating_sub(below)));

    let mut native = Native {
        schema,
        zero_threshold: boundary(first, schema),
        zero_count: h.buckets[0].1,
        spans: Vec::new(),
        deltas: Vec::new(),
    };
    let (mut next, mut previous) = (None::<i64>, 0u64);
    for (i, n) in counts.into_iter().filter(|&(_, n)| n > 0) {
        match next {
            Some(expected) if expected == i => native.spans.last_mut().expect("a span").1 += 1,
            _ => {
                let offset = next.map_or(i, |expected| i - expected);
                native.spans.push((offset as i32, 1));
            }
        }
        native.deltas.push(n as i64 - previous as i64);
        (next, previous) = (Some(i + 1), n);
    }
    Some(native)
}

/// The native buckets back as (upper bound, count), for tests and checks.
pub fn buckets(n: &Native) -> Vec<(f64, u64)> {
    let (mut out, mut at, mut count) = (Vec::new(), 0i64, 0i64);
    let mut deltas = n.deltas.iter();
    for (k, &(offset, length)) in n.spans.iter().enumerate() {
        at = if k == 0 {
            offset as i64
        } else {
            at + offset as i64
        };
        for _ in 0..length {
            count += deltas.next().copied().unwrap_or(0);
            out.push((boundary(at, n.schema), count as u64));
            at += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic(bounds: &[f64], per_bucket: &[u64], above: u64) -> HistogramValue {
        let mut cumulative = 0;
        let buckets = bounds
            .iter()
            .zip(per_bucket)
            .map(|(&le, &n)| {
                cumulative += n;
                (le, cumulative)
            })
            .collect();
        HistogramValue {
            buckets,
            count: cumulative + above,
            sum: 0.0,
        }
    }

    #[test]
    fn coarse_seconds_are_schema_0_one_native_bucket_each() {
        // 1 µs · 2^k for k = 0..=24, as `histogram = "coarse"` exports them.
        let bounds: Vec<f64> = (0..25).map(|k| 1e-6 * f64::from(1u32 << k)).collect();
        let mut per = vec![0u64; 25];
        (per[0], per[3], per[4], per[7]) = (5, 2, 9, 1);
        let n = from_classic(&classic(&bounds, &per, 4)).unwrap();
        assert_eq!(n.schema, 0);
        assert_eq!(n.zero_threshold, 2f64.powi(-20));
        assert_eq!(n.zero_count, 5);
        // 8 µs is nearest 2^-17, 16 µs 2^-16, 128 µs 2^-13; above 16.78 s: 2^5.
        assert_eq!(n.spans, vec![(-17, 2), (2, 1), (17, 1)]);
        assert_eq!(n.deltas, vec![2, 7, -8, 3]);
        assert_eq!(
            buckets(&n),
            vec![
                (2f64.powi(-17), 2),
                (2f64.powi(-16), 9),
                (2f64.powi(-13), 1),
                (32.0, 4)
            ]
        );
        for ((native, _), k) in buckets(&n).iter().zip([3, 4, 7]) {
            let ratio = bounds[k] / native;
            assert!((1.0..1.05).contains(&ratio), "{ratio}");
        }
    }

    #[test]
    fn sizes_in_bytes_are_exact_at_schema_0() {
        let bounds: Vec<f64> = (9..=30).map(|k| f64::from(1u32 << k)).collect();
        let mut per = vec![0u64; bounds.len()];
        per[3] = 7; // 4 KiB
        let n = from_classic(&classic(&bounds, &per, 0)).unwrap();
        assert_eq!((n.schema, n.zero_threshold, n.zero_count), (0, 512.0, 0));
        assert_eq!(buckets(&n), vec![(4096.0, 7)]);
    }

    #[test]
    fn fine_buckets_keep_one_native_bucket_each() {
        // Four log-linear buckets per power of two: 1, 1.25, 1.5, 1.75 µs · 2^k.
        let bounds: Vec<f64> = (0..24)
            .flat_map(|k| [1.0, 1.25, 1.5, 1.75].map(|m| m * 1e-6 * f64::from(1u32 << k)))
            .collect();
        assert_eq!(schema(&bounds), Some(3));
        let per: Vec<u64> = (0..bounds.len() as u64).collect();
        let h = classic(&bounds, &per, 0);
        let n = from_classic(&h).unwrap();
        let got = buckets(&n);
        assert_eq!(
            got.len(),
            bounds.len() - 1,
            "one native bucket per classic one"
        );
        for ((native, count), (&le, &want)) in got.iter().zip(bounds[1..].iter().zip(&per[1..])) {
            assert_eq!(*count, want);
            let ratio = le / native;
            assert!((0.95..1.05).contains(&ratio), "{le}: {native}");
        }
    }

    #[test]
    fn an_empty_histogram_has_no_buckets_and_odd_bounds_no_native_form() {
        let n = from_classic(&classic(&[1.0, 2.0, 4.0], &[0, 0, 0], 0)).unwrap();
        assert!(n.spans.is_empty() && n.deltas.is_empty());
        assert_eq!(schema(&[1.0]), None);
        assert_eq!(schema(&[0.0, 1.0]), None);
        assert_eq!(schema(&[-1.0, 1.0]), None);
        assert_eq!(schema(&[1.0, f64::INFINITY]), None);
        // Prometheus's default buckets fit schema 0 within half a bucket.
        assert_eq!(
            schema(&[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]),
            Some(0)
        );
    }
}
