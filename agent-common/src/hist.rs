//! Log-linear histogram buckets, shared by the probes (which pick a slot per observation) and
//! the agent (which turns slots into Prometheus `le` bounds).
//!
//! The base sequence of bounds is 1, 2, 3, 4, then four per power of two: 5, 6, 7, 8, 10, 12,
//! 14, 16, 20, 24, 28, 32, … Adjacent bounds are at most 25% apart (5/4), so a percentile read
//! from the histogram is never off by more than that, where log2 buckets can be off by 2x.
//! Every power of two is a bound: the coarse export keeps only those.
//!
//! A value lands in the first bucket whose bound is greater than or equal to it, which is
//! Prometheus' `le` semantics. Each scale keeps a last, overflow slot for values above its
//! largest bound (it only shows in `+Inf`).

/// Index of the smallest base bound `>= u` (`u = 0` and `u = 1` both give 0).
#[inline(always)]
pub fn base_index(u: u64) -> u32 {
    if u <= 4 {
        return u.saturating_sub(1) as u32;
    }
    // Smallest bound > x, with x = u - 1 >= 4: the log-linear bucket above x's own.
    let x = u - 1;
    let msb = 63 - x.leading_zeros();
    let mantissa = ((x >> (msb - 2)) & 3) as u32;
    4 * msb + mantissa - 4
}

/// The base bound at `index`: 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, …
pub const fn base_bound(index: u32) -> u64 {
    if index < 4 {
        return index as u64 + 1;
    }
    let i = index - 3;
    (4 + (i % 4) as u64) << (i / 4)
}

/// Latency scale: bounds are 250 ns times the base bounds from 4 on, so 1 µs, 1.25 µs, 1.5 µs,
/// 1.75 µs, 2 µs, … up to 2^24 µs (16.78 s). Powers of two in µs are the coarse bounds.
pub const LAT_UNIT_NS: u64 = 250;
/// Finite latency buckets (1 µs … 16.78 s).
pub const LAT_FINITE: usize = 97;
/// Latency slots: the finite buckets and the overflow slot.
pub const LAT_SLOTS: usize = LAT_FINITE + 1;

/// IO size scale: 128 bytes times the base bounds from 4 on, so 512 B, 640 B, … up to 1 GiB.
/// Powers of two are the coarse bounds.
pub const SIZE_UNIT: u64 = 128;
pub const SIZE_FINITE: usize = 85;
pub const SIZE_SLOTS: usize = SIZE_FINITE + 1;

/// Depth scale: 0, then the base bounds 1, 2, 3, 4, 5, … up to 65536.
pub const DEPTH_FINITE: usize = 61;
pub const DEPTH_SLOTS: usize = DEPTH_FINITE + 1;

/// Slot on a scale of `unit` times the base bounds from 4 on; `finite` buckets, then overflow.
#[inline(always)]
fn scaled_slot(v: u64, unit: u64, finite: usize) -> usize {
    // ceil(v / unit) <= bound  <=>  v <= unit * bound, for integer bounds.
    let u = v.div_ceil(unit);
    let i = base_index(u).saturating_sub(3) as usize;
    if i < finite { i } else { finite }
}

/// `ceil(v / 250)`. A division costs tens of cycles in a probe; below 2^32 - 249 (4.29 s in
/// ns) a multiply and shifts give the same quotient: floor(n / 125) = (n * m) >> 38 for every
/// n < 2^31 with m = ceil(2^38 / 125), as m * 125 - 2^38 = 56 <= 2^7 (Granlund–Montgomery).
#[inline(always)]
pub fn ceil_div_250(v: u64) -> u64 {
    const M: u64 = 2_199_023_256;
    if v < (1 << 32) - 249 {
        (((v + 249) >> 1) * M) >> 38
    } else {
        v.div_ceil(250)
    }
}

/// Slot of a latency in nanoseconds.
#[inline(always)]
pub fn latency_slot(ns: u64) -> usize {
    const _: () = assert!(LAT_UNIT_NS == 250);
    let i = base_index(ceil_div_250(ns)).saturating_sub(3) as usize;
    if i < LAT_FINITE { i } else { LAT_FINITE }
}

/// Upper bound of a finite latency slot, in nanoseconds.
pub const fn latency_bound_ns(slot: usize) -> u64 {
    LAT_UNIT_NS * base_bound(slot as u32 + 3)
}

/// Slot of an IO size in bytes.
#[inline(always)]
pub fn size_slot(bytes: u64) -> usize {
    scaled_slot(bytes, SIZE_UNIT, SIZE_FINITE)
}

/// Upper bound of a finite IO size slot, in bytes.
pub const fn size_bound(slot: usize) -> u64 {
    SIZE_UNIT * base_bound(slot as u32 + 3)
}

/// Slot of an in-flight depth.
#[inline(always)]
pub fn depth_slot(depth: u64) -> usize {
    if depth == 0 {
        return 0;
    }
    let i = base_index(depth) as usize + 1;
    if i < DEPTH_FINITE { i } else { DEPTH_FINITE }
}

/// Upper bound of a finite depth slot.
pub const fn depth_bound(slot: usize) -> u64 {
    if slot == 0 {
        0
    } else {
        base_bound(slot as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    /// Checks `slot` against its bounds for every value in `range`: the value is at most its
    /// slot's bound and above the previous slot's bound (or in the overflow slot).
    fn check_le(
        range: impl Iterator<Item = u64>,
        slot: fn(u64) -> usize,
        bound: fn(usize) -> u64,
        finite: usize,
    ) {
        for v in range {
            let s = slot(v);
            if s == finite {
                assert!(v > bound(finite - 1), "{v} overflowed");
                continue;
            }
            assert!(v <= bound(s), "{v} above bound {} of slot {s}", bound(s));
            if s > 0 {
                assert!(v > bound(s - 1), "{v} belongs below slot {s}");
            }
        }
    }

    #[test]
    fn base_bounds_are_log_linear() {
        let first: Vec<u64> = (0..16).map(base_bound).collect();
        assert_eq!(
            first,
            [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32]
        );
        for i in 4..200 {
            let (a, b) = (base_bound(i - 1), base_bound(i));
            assert!(b > a);
            assert!(b * 4 <= a * 5, "{a} -> {b} more than 25% apart");
        }
        for i in 0..200 {
            assert_eq!(
                base_index(base_bound(i)),
                i,
                "bound {i} is in its own bucket"
            );
            assert_eq!(base_index(base_bound(i) + 1), i + 1, "bound {i} + 1");
        }
        assert_eq!(base_index(0), 0);
    }

    #[test]
    fn multiply_shift_divides_by_125_exactly_below_2_pow_31() {
        const M: u64 = 2_199_023_256;
        let q = |n: u64| (n * M) >> 38;
        // Both sides are monotone, so agreeing at both ends of every run of equal quotients
        // (125k and 125k + 124) means agreeing everywhere.
        let mut n = 0;
        while n < 1 << 31 {
            assert_eq!(q(n), n / 125, "n = {n}");
            let last = (n + 124).min((1 << 31) - 1);
            assert_eq!(q(last), last / 125, "n = {last}");
            n += 125;
        }
    }

    #[test]
    fn ceil_div_250_edges() {
        for v in [0u64, 1, 249, 250, 251, 499, 500, 501, 1_000, 123_456_789] {
            assert_eq!(ceil_div_250(v), v.div_ceil(250), "{v}");
        }
        let edge = (1u64 << 32) - 249;
        for v in edge - 1000..edge + 1000 {
            assert_eq!(ceil_div_250(v), v.div_ceil(250), "{v}");
        }
        assert_eq!(ceil_div_250(u64::MAX), u64::MAX.div_ceil(250));
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x >> (x % 40);
            assert_eq!(ceil_div_250(v), v.div_ceil(250), "{v}");
        }
    }

    #[test]
    fn latency_edges() {
        assert_eq!(latency_bound_ns(0), 1_000);
        assert_eq!(latency_bound_ns(1), 1_250);
        assert_eq!(latency_bound_ns(4), 2_000);
        assert_eq!(latency_bound_ns(LAT_FINITE - 1), 16_777_216_000);
        assert_eq!(latency_slot(0), 0);
        assert_eq!(latency_slot(1_000), 0);
        assert_eq!(latency_slot(1_001), 1);
        assert_eq!(latency_slot(1_250), 1);
        assert_eq!(latency_slot(1_251), 2);
        assert_eq!(latency_slot(16_777_216_000), LAT_FINITE - 1);
        assert_eq!(latency_slot(16_777_216_001), LAT_FINITE);
        assert_eq!(latency_slot(u64::MAX), LAT_FINITE);
        for s in 0..LAT_FINITE {
            let b = latency_bound_ns(s);
            assert_eq!(latency_slot(b), s, "bound {b} ns");
            assert_eq!(latency_slot(b + 1), s + 1, "bound {b} ns + 1");
        }
        for s in 1..LAT_FINITE {
            let (a, b) = (latency_bound_ns(s - 1), latency_bound_ns(s));
            assert!(b * 4 <= a * 5, "{a} -> {b} ns more than 25% apart");
        }
        check_le(0..200_000, latency_slot, latency_bound_ns, LAT_FINITE);
    }

    #[test]
    fn latency_powers_of_two_in_microseconds_are_every_fourth_bound() {
        for k in 0..=24 {
            assert_eq!(latency_bound_ns(4 * k), 1_000 << k);
        }
    }

    #[test]
    fn size_edges() {
        assert_eq!(size_bound(0), 512);
        assert_eq!(size_bound(SIZE_FINITE - 1), 1 << 30);
        assert_eq!(size_slot(0), 0);
        assert_eq!(size_slot(512), 0);
        assert_eq!(size_slot(513), 1);
        assert_eq!(size_slot(4096), 12);
        assert_eq!(size_bound(12), 4096);
        assert_eq!(size_slot(4097), 13);
        assert_eq!(size_slot(1 << 30), SIZE_FINITE - 1);
        assert_eq!(size_slot((1 << 30) + 1), SIZE_FINITE);
        for s in 0..SIZE_FINITE {
            let b = size_bound(s);
            assert_eq!(size_slot(b), s);
            assert_eq!(size_slot(b + 1), s + 1);
        }
        check_le(0..300_000, size_slot, size_bound, SIZE_FINITE);
    }

    #[test]
    fn depth_edges() {
        let first: Vec<u64> = (0..10).map(depth_bound).collect();
        assert_eq!(first, [0, 1, 2, 3, 4, 5, 6, 7, 8, 10]);
        assert_eq!(depth_slot(0), 0);
        assert_eq!(depth_slot(1), 1);
        assert_eq!(depth_slot(16), 12);
        assert_eq!(depth_bound(12), 16);
        assert_eq!(depth_slot(17), 13);
        assert_eq!(depth_bound(DEPTH_FINITE - 1), 65_536);
        assert_eq!(depth_slot(65_536), DEPTH_FINITE - 1);
        assert_eq!(depth_slot(65_537), DEPTH_FINITE);
        check_le(0..100_000, depth_slot, depth_bound, DEPTH_FINITE);
    }
}
