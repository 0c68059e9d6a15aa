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
pub const fn base_index(u: u64) -> u32 {
    if u <= 4 {
        return u.saturating_sub(1) as u32;
    }
    // Smallest bound > x, with x = u - 1 >= 4: the log-linear bucket above x's own.
    let x = u - 1;
    let msb = 63 - x.leading_zeros();
    let mantissa = ((x >> (msb - 2)) & 3) as u32;
    4 * msb + mantissa - 4
}

/// Values `x` below this have their slot in [`SLOT_TABLE`].
pub const SLOT_TABLE_LEN: usize = 1 << 14;
const _: () = assert!(SLOT_TABLE_LEN.is_power_of_two());
/// How far a larger `x` is shifted to fall into the table: at least 4 remains, so the two
/// bits below its highest one, all that `base_index` keeps of the rest, survive the shift,
/// and the index moves down by four per bit shifted.
const SLOT_TABLE_SHIFT: u32 = 12;

/// The slot of `x = ceil(v / unit) - 1` on the scaled scales (latency, size) for every `x`
/// below [`SLOT_TABLE_LEN`]: `base_index(x + 1) - 3`, at least 0. The probes look a slot up
/// where computing it takes some 45 BPF instructions (the ISA counts no leading zeros); in
/// the eBPF object this is 16 KiB of read-only data.
pub static SLOT_TABLE: [u8; SLOT_TABLE_LEN] = {
    let mut t = [0u8; SLOT_TABLE_LEN];
    let mut x = 0;
    while x < SLOT_TABLE_LEN {
        t[x] = base_index(x as u64 + 1).saturating_sub(3) as u8;
        x += 1;
    }
    t
};

/// `SLOT_TABLE_LEN - 1`, read from memory (see `scaled_slot_of`).
static SLOT_MASK: usize = SLOT_TABLE_LEN - 1;

/// The slot of `x = ceil(v / unit) - 1` (0 for v = 0), of `finite` buckets and the overflow
/// slot: one or two table reads for `x` below 2^26 (a latency up to 16.8 s, a size up to
/// 8 GiB), computed beyond.
#[inline(always)]
fn scaled_slot_of(x: u64, finite: usize) -> usize {
    // Each index is also masked, with a mask the compiler cannot see through: it moves a
    // bound check onto the value an index was computed from (and drops a plain mask as
    // redundant), where the verifier cannot see it bound the index. The verifier knows the
    // mask: read-only data.
    // SAFETY: a plain read of an immutable static.
    let mask = unsafe { core::ptr::read_volatile(&raw const SLOT_MASK) };
    let i = if x < SLOT_TABLE_LEN as u64 {
        SLOT_TABLE[x as usize & mask] as usize
    } else if x >> SLOT_TABLE_SHIFT < SLOT_TABLE_LEN as u64 {
        SLOT_TABLE[(x >> SLOT_TABLE_SHIFT) as usize & mask] as usize + 4 * SLOT_TABLE_SHIFT as usize
    } else {
        base_index(x + 1).saturating_sub(3) as usize
    };
    if i < finite { i } else { finite }
}

/// [`scaled_slot_of`] for `x` below 2^26, which the table covers in at most two reads: the
/// probes' common case, without the third branch.
#[inline(always)]
fn short_slot_of(x: u64, finite: usize) -> usize {
    // SAFETY: a plain read of an immutable static (see `scaled_slot_of` for the mask).
    let mask = unsafe { core::ptr::read_volatile(&raw const SLOT_MASK) };
    let i = if x < SLOT_TABLE_LEN as u64 {
        SLOT_TABLE[x as usize & mask] as usize
    } else {
        SLOT_TABLE[(x >> SLOT_TABLE_SHIFT) as usize & mask] as usize + 4 * SLOT_TABLE_SHIFT as usize
    };
    if i < finite { i } else { finite }
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

/// `ceil(2^38 / 125)`: see [`ceil_div_250_minus_1`].
const CEIL_DIV_250_K: u64 = 2_199_023_256;

/// `ceil(v / 250) - 1`, 0 for v = 0: `floor((v - 1) / 250)`. A division costs tens of
/// cycles in a probe; below 2^32 (4.29 s in ns) a shift, a multiply and a shift give the same
/// quotient: floor(n / 250) = floor((n >> 1) / 125), and floor(m / 125) = (m * k) >> 38 for
/// every m < 2^31 with k = ceil(2^38 / 125), as k * 125 - 2^38 = 56 <= 2^7
/// (Granlund–Montgomery).
#[inline(always)]
pub fn ceil_div_250_minus_1(v: u64) -> u64 {
    let n = v.saturating_sub(1);
    if n < 1 << 32 {
        ((n >> 1) * CEIL_DIV_250_K) >> 38
    } else {
        n / 250
    }
}

/// Slot of a latency in nanoseconds. Every latency from 1 ns to 2^32 ns (4.29 s) takes the
/// short path: a multiply and one or two table reads, with no clamp of the difference to
/// zero (0 ns and longer waits take the general path).
#[inline(always)]
pub fn latency_slot(ns: u64) -> usize {
    let n = ns.wrapping_sub(1);
    if n < 1 << 32 {
        return latency_slot_short(n);
    }
    scaled_slot_of(ceil_div_250_minus_1(ns), LAT_FINITE)
}

/// [`latency_slot`] of `n + 1` ns for `n` below 2^32 (1 ns to 4.29 s), the bound checked by
/// the caller: a multiply and one or two table reads.
#[inline(always)]
pub fn latency_slot_short(n: u64) -> usize {
    const _: () = assert!(LAT_UNIT_NS == 250);
    // floor(n / 250) < 2^25: within the table's two reads.
    short_slot_of(((n >> 1) * CEIL_DIV_250_K) >> 38, LAT_FINITE)
}

/// Upper bound of a finite latency slot, in nanoseconds.
pub const fn latency_bound_ns(slot: usize) -> u64 {
    LAT_UNIT_NS * base_bound(slot as u32 + 3)
}

/// Slot of an IO size in bytes: one or two table reads up to 4 GiB.
#[inline(always)]
pub fn size_slot(bytes: u64) -> usize {
    const _: () = assert!(SIZE_UNIT.is_power_of_two());
    let n = bytes.wrapping_sub(1);
    if n < 1 << 32 {
        // n / 128 < 2^25: within the table's two reads.
        return short_slot_of(n / SIZE_UNIT, SIZE_FINITE);
    }
    scaled_slot_of(bytes.saturating_sub(1) / SIZE_UNIT, SIZE_FINITE)
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

    /// The slots as `base_index` computes them, without the table or the multiply.
    fn latency_slot_computed(ns: u64) -> usize {
        (base_index(ns.div_ceil(250)).saturating_sub(3) as usize).min(LAT_FINITE)
    }

    fn size_slot_computed(bytes: u64) -> usize {
        (base_index(bytes.div_ceil(SIZE_UNIT)).saturating_sub(3) as usize).min(SIZE_FINITE)
    }

    #[test]
    fn the_table_gives_the_computed_slots() {
        let check = |v: u64| {
            assert_eq!(latency_slot(v), latency_slot_computed(v), "{v} ns");
            assert_eq!(size_slot(v), size_slot_computed(v), "{v} bytes");
        };
        for v in 0..(1u64 << 22) {
            check(v);
        }
        for k in 20..64 {
            let p = 1u64 << k;
            for d in [0, 1, 2, 125, 249, 250, 251, p >> 3, p >> 2, p >> 1] {
                check(p - d);
                check(p.saturating_add(d));
                check(p.saturating_add(p >> 2).saturating_add(d));
            }
        }
        for s in 0..LAT_FINITE {
            let b = latency_bound_ns(s);
            check(b);
            check(b + 1);
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x >> (x % 64));
        }
        check(u64::MAX);
    }

    #[test]
    fn ceil_div_250_minus_1_edges() {
        let want = |v: u64| v.div_ceil(250).saturating_sub(1);
        for v in [
            0u64,
            1,
            249,
            250,
            251,
            499,
            500,
            501,
            1_000,
            123_456_789,
            u64::MAX,
        ] {
            assert_eq!(ceil_div_250_minus_1(v), want(v), "{v}");
        }
        for v in (1u64 << 32) - 1000..(1u64 << 32) + 1000 {
            assert_eq!(ceil_div_250_minus_1(v), want(v), "{v}");
        }
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
