//! Log-linear latency histograms in nanoseconds: exact below 256 ns, then 128 buckets per
//! power of two, so any value is known to within 1/256 (0.4 %) of itself from 100 ns to
//! 68 s. Histograms of the same layout merge by adding counts, which is how loadgen combines
//! jobs, intervals and hosts: percentiles come from the merged counts, never from averaging
//! percentiles.

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two, as a power of two.
pub const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values at or above 2^MAX_EXP ns (68.7 s) land in the last bucket and count as saturated.
pub const MAX_EXP: u32 = 36;
pub const BUCKETS: usize = ((MAX_EXP - SUB_BITS + 1) as usize) << SUB_BITS;

/// The percentiles fio prints by default (its `percentile` map keys), plus 99.99.
pub const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Sparse", try_from = "Sparse")]
pub struct Histogram {
    counts: Box<[u64]>,
    count: u64,
    sum: u128,
    sum_sq: f64,
    min: u64,
    max: u64,
    saturated: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

#[inline]
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e >= MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = e - SUB_BITS;
    (((shift + 1) as usize) << SUB_BITS) + ((v >> shift) - SUB) as usize
}

/// Lowest value of a bucket and its width.
pub fn bucket_range(i: usize) -> (u64, u64) {
    let block = i >> SUB_BITS;
    if block == 0 {
        return (i as u64, 1);
    }
    let shift = (block - 1) as u32;
    let mantissa = (i as u64 & (SUB - 1)) + SUB;
    (mantissa << shift, 1 << shift)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            count: 0,
            sum: 0,
            sum_sq: 0.0,
            min: u64::MAX,
            max: 0,
            saturated: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = bucket_of(v);
        self.counts[i] += 1;
        self.count += 1;
        self.sum += v as u128;
        let f = v as f64;
        self.sum_sq += f * f;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if i == BUCKETS - 1 && v >= 1 << MAX_EXP {
            self.saturated += 1;
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.saturated += other.saturated;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn min(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min }
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn saturated(&self) -> u64 {
        self.saturated
    }
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    pub fn stddev(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let m = self.mean();
        ((self.sum_sq / n - m * m).max(0.0) * n / (n - 1.0)).sqrt()
    }

    /// The value at percentile `p` (0 < p ≤ 100): the middle of the bucket holding the
    /// ⌈p·n/100⌉-th smallest value, clamped to the exact min and max. 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        if p >= 100.0 {
            return self.max;
        }
        let rank = ((p / 100.0 * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket_range(i);
                return (lo + width / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// How many recorded values are at most `v` (exact at bucket edges; a bucket that
    /// straddles `v` counts as above it).
    pub fn count_at_most(&self, v: u64) -> u64 {
        let last = bucket_of(v);
        let (lo, w) = bucket_range(last);
        let whole = if lo + w - 1 <= v { last + 1 } else { last };
        self.counts[..whole.min(BUCKETS)].iter().sum()
    }

    /// The non-empty buckets as (lowest value, width, count), in order.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (lo, w) = bucket_range(i);
                (lo, w, c)
            })
    }

    /// The usual summary: count, mean, p50 … p99.99, max.
    pub fn summary(&self) -> Summary {
        Summary {
            n: self.count,
            min: self.min(),
            mean: self.mean(),
            p50: self.percentile(50.0),
            p90: self.percentile(90.0),
            p95: self.percentile(95.0),
            p99: self.percentile(99.0),
            p99_9: self.percentile(99.9),
            p99_99: self.percentile(99.99),
            max: self.max,
        }
    }
}

/// fio's histogram layout (`FIO_IO_U_PLAT_BITS` 6, 29 groups): exact below 128 ns, then 64
/// buckets per power of two, the last bucket taking everything from about 17 s. json+ `bins`
/// and histogram logs use it, so that fio's tools read them.
pub mod fio {
    pub const BITS: u32 = 6;
    pub const VAL: u64 = 1 << BITS;
    /// Buckets in fio's layout.
    pub const NR: usize = 29 * VAL as usize;

    /// fio's bucket of a value.
    pub fn idx(v: u64) -> usize {
        let msb = 63 - v.max(1).leading_zeros();
        if msb <= BITS {
            return v as usize;
        }
        let err = msb - BITS;
        let base = ((err + 1) as usize) << BITS;
        let off = ((v >> err) & (VAL - 1)) as usize;
        (base + off).min(NR - 1)
    }

    /// The value fio reports for a bucket: the middle of its range.
    pub fn value(i: usize) -> u64 {
        if i < (VAL << 1) as usize {
            return i as u64;
        }
        let err = (i >> BITS) as u32 - 1;
        let base = 1u64 << (err + BITS);
        let k = (i as u64) % VAL;
        base + ((k as f64 + 0.5) * (1u64 << err) as f64) as u64
    }
}

impl Histogram {
    /// The counts in fio's layout, as (fio bucket, count), in order. Exact: every bucket of
    /// this histogram lies inside one of fio's, which are twice as wide.
    pub fn fio_bins(&self) -> Vec<(usize, u64)> {
        let mut out: Vec<(usize, u64)> = Vec::new();
        for (lo, _, c) in self.buckets() {
            let i = fio::idx(lo);
            match out.last_mut() {
                Some(last) if last.0 == i => last.1 += c,
                _ => out.push((i, c)),
            }
        }
        out
    }
}

/// Percentiles of one histogram, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

/// The serialized form: only non-empty buckets, as `[index, count]` pairs.
#[derive(Serialize, Deserialize)]
struct Sparse {
    sub_bits: u32,
    max_exp: u32,
    count: u64,
    sum: u128,
    sum_sq: f64,
    min: u64,
    max: u64,
    saturated: u64,
    buckets: Vec<(u32, u64)>,
}

impl From<Histogram> for Sparse {
    fn from(h: Histogram) -> Sparse {
        Sparse {
            sub_bits: SUB_BITS,
            max_exp: MAX_EXP,
            count: h.count,
            sum: h.sum,
            sum_sq: h.sum_sq,
            min: h.min(),
            max: h.max,
            saturated: h.saturated,
            buckets: h
                .counts
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(i, &c)| (i as u32, c))
                .collect(),
        }
    }
}

impl TryFrom<Sparse> for Histogram {
    type Error = String;
    fn try_from(s: Sparse) -> Result<Histogram, String> {
        if s.sub_bits != SUB_BITS || s.max_exp != MAX_EXP {
            return Err(format!(
                "histogram layout {}/{} differs from this version's {SUB_BITS}/{MAX_EXP}",
                s.sub_bits, s.max_exp
            ));
        }
        let mut h = Histogram::new();
        for (i, c) in s.buckets {
            *h.counts
                .get_mut(i as usize)
                .ok_or_else(|| format!("histogram bucket {i} out of range"))? += c;
        }
        h.count = s.count;
        h.sum = s.sum;
        h.sum_sq = s.sum_sq;
        h.min = if s.count == 0 { u64::MAX } else { s.min };
        h.max = s.max;
        h.saturated = s.saturated;
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for test values.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn buckets_are_contiguous_and_cover_the_range() {
        for i in 1..BUCKETS {
            let (lo, w) = bucket_range(i - 1);
            assert_eq!(bucket_range(i).0, lo + w, "bucket {i}");
            assert_eq!(bucket_of(lo), i - 1);
            assert_eq!(bucket_of(lo + w - 1), i - 1);
        }
        assert_eq!(bucket_of(60_000_000_000), bucket_of(60_000_000_000));
        assert!(
            bucket_of(60_000_000_000) < BUCKETS - 1,
            "60 s is inside the range"
        );
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn relative_error_is_below_one_percent_from_100ns_to_60s() {
        let mut s = 0x9e3779b97f4a7c15u64;
        let (lo, hi) = (100f64.ln(), 60e9f64.ln());
        let mut worst = 0f64;
        for _ in 0..200_000 {
            let u = (xorshift(&mut s) >> 11) as f64 / (1u64 << 53) as f64;
            let v = (lo + u * (hi - lo)).exp() as u64;
            let mut h = Histogram::new();
            h.record(v);
            h.record(u64::MAX / 4); // keeps the min/max clamp from hiding the bucket error
            h.record(1);
            let got = h.percentile(50.0);
            let err = (got as f64 - v as f64).abs() / v as f64;
            worst = worst.max(err);
        }
        assert!(worst <= 0.01, "worst relative error {worst}");
        assert!(worst <= 1.0 / 256.0 + 1e-9, "worst relative error {worst}");
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = Histogram::new();
        for us in 1..=10_000u64 {
            h.record(us * 1000);
        }
        for (p, want) in [
            (50.0, 5_000_000.0),
            (99.0, 9_900_000.0),
            (99.9, 9_990_000.0),
        ] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.01, "p{p}: {got} vs {want}");
        }
        assert_eq!(h.percentile(100.0), 10_000_000);
        assert_eq!(h.min(), 1000);
        assert_eq!(h.count(), 10_000);
        assert!((h.mean() - 5_000_500.0).abs() < 1.0);
        let sd = h.stddev();
        assert!((sd - 2_886_895.7).abs() / 2_886_895.7 < 1e-3, "stddev {sd}");
        assert_eq!(Histogram::new().percentile(99.0), 0);
        let c = h.count_at_most(5_000_000);
        assert!((4_950..=5_000).contains(&c), "{c}");
        assert_eq!(h.count_at_most(999), 0);
        assert_eq!(h.count_at_most(u64::MAX), 10_000);
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let mut s = 42u64;
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for i in 0..50_000 {
            // Two jobs with very different latencies: 50 µs and 5 ms.
            let v = if i % 2 == 0 {
                50_000 + xorshift(&mut s) % 10_000
            } else {
                5_000_000 + xorshift(&mut s) % 1_000_000
            };
            if i % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            };
            all.record(v);
        }
        let mut m = a.clone();
        m.merge(&b);
        assert!(m.counts == all.counts, "bucket counts differ");
        assert_eq!(
            (m.count, m.sum, m.min, m.max),
            (all.count, all.sum, all.min, all.max)
        );
        assert!((m.sum_sq - all.sum_sq).abs() / all.sum_sq < 1e-9);
        for p in FIO_PERCENTILES {
            assert_eq!(m.percentile(p), all.percentile(p));
        }
        // Averaging the jobs' p50s would report ~2.5 ms, a latency no IO had.
        let avg = (a.percentile(50.0) + b.percentile(50.0)) / 2;
        let merged = m.percentile(50.0);
        assert!(
            !(100_000..=4_000_000).contains(&merged),
            "merged p50 {merged}"
        );
        assert!((1_000_000..4_000_000).contains(&avg));
    }

    #[test]
    fn fio_layout_nests_this_one() {
        assert_eq!(fio::idx(0), 0);
        assert_eq!(fio::idx(127), 127);
        assert_eq!(fio::idx(128), 128);
        assert_eq!(fio::idx(129), 128);
        assert_eq!(fio::value(128), 129);
        assert_eq!(
            fio::value(fio::NR - 1),
            17_112_760_320,
            "fio's largest value"
        );
        assert_eq!(fio::idx(u64::MAX), fio::NR - 1);
        // Every bucket of ours falls in one of fio's: its first and last value agree.
        for i in 0..BUCKETS - 1 {
            let (lo, w) = bucket_range(i);
            assert_eq!(fio::idx(lo), fio::idx(lo + w - 1), "bucket {i}");
        }
        // fio's value of a bucket lies inside it.
        for i in 0..fio::NR - 1 {
            assert_eq!(fio::idx(fio::value(i)), i, "fio bucket {i}");
        }
        let mut h = Histogram::new();
        for v in [5, 5, 200, 201, 1_000_000, 1_000_100, 90_000_000_000] {
            h.record(v);
        }
        let bins = h.fio_bins();
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), h.count());
        assert_eq!(bins[0], (5, 2));
        assert_eq!(
            bins[1],
            (fio::idx(200), 2),
            "200 and 201 share fio's bucket"
        );
        assert_eq!(bins.last().unwrap().0, fio::NR - 1);
    }

    #[test]
    fn serializes_sparsely_and_round_trips() {
        let mut h = Histogram::new();
        for v in [150, 1_000, 1_000, 2_500_000, 70_000_000_000] {
            h.record(v);
        }
        assert_eq!(h.saturated(), 1);
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.len() < 300, "{json}");
        let back: Histogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        let empty: Histogram =
            serde_json::from_str(&serde_json::to_string(&Histogram::new()).unwrap()).unwrap();
        assert_eq!(empty, Histogram::new());
        assert!(
            serde_json::from_str::<Histogram>(&json.replace("\"sub_bits\":7", "\"sub_bits\":5"))
                .is_err()
        );
    }
}
