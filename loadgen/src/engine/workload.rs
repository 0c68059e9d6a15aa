//! What the next IO is: its direction (by `rwmixread`), its block (sequential or uniformly
//! random over the job's region), and when it is due (`--rate_iops`).

use crate::stats::Dir;

/// xorshift64*: fast, and reproducible from a seed (fio's `randrepeat`).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

pub struct Workload {
    pub blocks: u64,
    pub random: bool,
    pub read_pct: u8,
    next_seq: [u64; 2],
    rng: Rng,
}

impl Workload {
    pub fn new(blocks: u64, random: bool, read_pct: u8, seed: u64) -> Workload {
        Workload {
            blocks,
            random,
            read_pct,
            next_seq: [0, 0],
            rng: Rng::new(seed),
        }
    }

    #[inline]
    pub fn dir(&mut self) -> Dir {
        match self.read_pct {
            100 => Dir::Read,
            0 => Dir::Write,
            p => {
                if self.rng.below(100) < p as u64 {
                    Dir::Read
                } else {
                    Dir::Write
                }
            }
        }
    }

    /// The next block for `dir`; `busy` rejects blocks that already have an IO in flight
    /// (used with --verify). None when no free block was found after a few tries.
    #[inline]
    pub fn block(&mut self, dir: Dir, busy: impl Fn(u64) -> bool) -> Option<u64> {
        for _ in 0..8 {
            let b = if self.random {
                self.rng.below(self.blocks)
            } else {
                let s = &mut self.next_seq[dir as usize];
                let b = *s;
                *s = (*s + 1) % self.blocks;
                b
            };
            if !busy(b) {
                return Some(b);
            }
        }
        None
    }
}

/// Fixed schedule of intended start times: IO `i` is due at `start + i / rate`.
pub struct Pacer {
    start: u64,
    rate: u64,
}

impl Pacer {
    pub fn new(start: u64, rate: u64) -> Pacer {
        Pacer { start, rate }
    }
    #[inline]
    pub fn due(&self, i: u64) -> u64 {
        self.start + (i as u128 * 1_000_000_000 / self.rate as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_and_offsets() {
        let mut w = Workload::new(1000, true, 70, 1);
        let reads = (0..100_000).filter(|_| w.dir() == Dir::Read).count();
        assert!((69_000..71_000).contains(&reads), "{reads}");
        let mut seen = vec![false; 1000];
        for _ in 0..100_000 {
            let b = w.block(Dir::Read, |_| false).unwrap();
            seen[b as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let mut s = Workload::new(3, false, 100, 1);
        let v: Vec<u64> = (0..5)
            .map(|_| s.block(Dir::Read, |_| false).unwrap())
            .collect();
        assert_eq!(v, vec![0, 1, 2, 0, 1]);
        assert_eq!(s.block(Dir::Read, |_| true), None);
    }

    #[test]
    fn pacing_has_no_drift() {
        let p = Pacer::new(1000, 3);
        assert_eq!(p.due(0), 1000);
        assert_eq!(p.due(3), 1000 + 1_000_000_000);
        assert_eq!(p.due(3_000_000), 1000 + 1_000_000_000_000_000);
    }
}
