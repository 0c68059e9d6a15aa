//! What a job writes, with fio's data options (`buffer_pattern`, `zero_buffers`,
//! `scramble_buffers`, `refill_buffers`, `buffer_compress_percentage`/`_chunk`,
//! `dedupe_percentage`). Everything random is generated once, before the workload: a write
//! costs at most a copy from a per-job pool and a few 8-byte stamps, never new random data.
//!
//! - Fixed (a pattern, zeros, or no refill): the slot buffers keep what they were filled with.
//! - Scramble (fio's default): every 512 bytes of a write get its offset and a counter, so no
//!   two writes are identical, as fio's `scramble_buffers`.
//! - Refill: each write gets a key; its data is a pool block chosen by the key, with the key
//!   stamped every 512 bytes of the random parts. A duplicate (`dedupe_percentage`) reuses the
//!   last unique key, so it is byte for byte the last unique block; the fill of a compressible
//!   chunk is never stamped, so a chunk compresses as asked. With `dedupe_mode=working_set`
//!   a duplicate takes the key of one of the first unique blocks instead (the working set);
//!   with `dedupe_global` the jobs share the pool and one working set, each job's keys
//!   numbered in a range of its own.

use crate::options::data::DataOptions;

use super::buffers::Buffers;
use super::rng::Rng;

/// Where stamps go: one every this many bytes.
const STAMP_EVERY: usize = 512;
/// Bytes of random blocks drawn before the workload (at least two blocks).
const POOL_BYTES: usize = 2 << 20;

enum Mode {
    Fixed,
    Scramble,
    Refill,
}

/// fio's dedupe working set: how many unique blocks each job sharing it contributes (one
/// entry without `dedupe_global`), and which entry is this job's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkingSet {
    pub blocks: Vec<u64>,
    pub me: usize,
}

/// A job's keys start at `me << KEY_SHIFT`, apart from every other job's.
const KEY_SHIFT: u32 = 40;

pub struct Content {
    mode: Mode,
    /// Refill: `pool_blocks` blocks of `block` bytes, laid out as the options ask.
    pool: Vec<u8>,
    block: usize,
    pool_blocks: u64,
    /// Offsets in a block where stamps go (inside its random parts).
    stamps: Vec<usize>,
    salt: u64,
    dedupe: u64,
    rng: Rng,
    next_key: u64,
    last_unique: Option<u64>,
    writes: u64,
    working_set: Option<WorkingSet>,
}

/// A 64-bit mix (splitmix64's finalizer): stamps look random, so they add no compressibility.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random(buf: &mut [u8], rng: &mut Rng) {
    for c in buf.chunks_mut(8) {
        let b = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// The pattern from the start of `buf`, or zeros.
fn fill(buf: &mut [u8], pattern: Option<&[u8]>) {
    match pattern {
        Some(p) => buf
            .iter_mut()
            .zip(p.iter().cycle())
            .for_each(|(b, &x)| *b = x),
        None => buf.fill(0),
    }
}

impl Content {
    /// `max_bs`: the largest IO; `min_write`: the smallest write (fio's chunk when
    /// `buffer_compress_chunk=0`, and its upper bound otherwise).
    /// `seed`: the job's; `shared`: the run's, for jobs that share a working set.
    pub fn new(
        o: &DataOptions,
        max_bs: usize,
        min_write: usize,
        seed: u64,
        working_set: Option<WorkingSet>,
        shared: u64,
    ) -> Content {
        let mode = if o.refills() {
            Mode::Refill
        } else if o.scrambles() {
            Mode::Scramble
        } else {
            Mode::Fixed
        };
        let block = max_bs.max(1);
        let mut c = Content {
            mode,
            pool: Vec::new(),
            block,
            pool_blocks: 0,
            stamps: Vec::new(),
            // Jobs sharing a working set lay out the same pool and stamp alike.
            salt: mix(match &working_set {
                Some(ws) if ws.blocks.len() > 1 => shared,
                _ => seed,
            } ^ 0x6461_7461_6c61_796f),
            dedupe: o.dedupe as u64,
            rng: Rng::new(seed ^ 0x6465_6475_7065_0001),
            next_key: working_set
                .as_ref()
                .map_or(0, |ws| (ws.me as u64) << KEY_SHIFT),
            last_unique: None,
            writes: 0,
            working_set,
        };
        if let Mode::Refill = c.mode {
            let n = (POOL_BYTES / block).max(2);
            let mut pool = vec![0u8; n * block];
            let mut rng = Rng::new(c.salt);
            for b in pool.chunks_exact_mut(block) {
                c.stamps = Self::lay(o, b, min_write, &mut rng);
            }
            c.pool = pool;
            c.pool_blocks = n as u64;
        }
        c
    }

    /// Fills `buf` as fio's buffers are filled; returns where the random parts allow stamps.
    fn lay(o: &DataOptions, buf: &mut [u8], min_write: usize, rng: &mut Rng) -> Vec<usize> {
        let pattern = o.pattern.as_deref();
        let mut stamps = Vec::new();
        if o.compress > 0 || o.dedupe > 0 {
            let chunk = match o.chunk as usize {
                0 => min_write,
                c => c.min(min_write),
            }
            .max(1);
            for (i, c) in buf.chunks_mut(chunk).enumerate() {
                let r = (chunk * (100 - o.compress as usize) / 100).min(c.len());
                random(&mut c[..r], rng);
                fill(&mut c[r..], pattern);
                stamps.extend(
                    (0..r.saturating_sub(7))
                        .step_by(STAMP_EVERY)
                        .map(|s| i * chunk + s),
                );
            }
        } else if pattern.is_some() || o.zero {
            fill(buf, pattern);
        } else {
            random(buf, rng);
            stamps.extend((0..buf.len().saturating_sub(7)).step_by(STAMP_EVERY));
        }
        stamps
    }

    /// Fills the job's slot buffers before the workload.
    pub fn prepare(&self, o: &DataOptions, bufs: &mut Buffers, count: usize, min_write: usize) {
        let mut rng = Rng::new(self.salt ^ 0x736c_6f74);
        for i in 0..count {
            Self::lay(o, bufs.get_mut(i), min_write, &mut rng);
        }
    }

    /// Makes `buf` (a write of its length at `offset`) what this write carries.
    #[inline]
    pub fn write(&mut self, buf: &mut [u8], offset: u64) {
        self.writes += 1;
        match self.mode {
            Mode::Fixed => {}
            Mode::Scramble => {
                let tag = mix(self.salt ^ self.writes);
                for (i, s) in buf.chunks_exact_mut(STAMP_EVERY).enumerate() {
                    let at = offset + (i * STAMP_EVERY) as u64;
                    s[..8].copy_from_slice(&at.to_le_bytes());
                    s[8..16].copy_from_slice(&tag.to_le_bytes());
                }
            }
            Mode::Refill => {
                let key = self.key();
                let from = (mix(key ^ self.salt) % self.pool_blocks) as usize * self.block;
                buf.copy_from_slice(&self.pool[from..from + buf.len()]);
                let base = self.salt ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let len = buf.len();
                for &at in self.stamps.iter().take_while(|&&at| at + 8 <= len) {
                    buf[at..at + 8].copy_from_slice(&mix(base ^ at as u64).to_le_bytes());
                }
            }
        }
    }

    /// Whether this write is a duplicate (chance `dedupe_percentage`), and of which key:
    /// fio's `repeat` takes the last unique one (the first write is always unique),
    /// `working_set` one of the working set's, drawn uniformly.
    fn key(&mut self) -> u64 {
        let dup = self.dedupe == 100 || (self.dedupe > 0 && self.rng.below(100) < self.dedupe);
        if dup {
            match &self.working_set {
                Some(ws) => {
                    let total: u64 = ws.blocks.iter().sum();
                    if total > 0 {
                        let mut i = self.rng.below(total);
                        for (job, &n) in ws.blocks.iter().enumerate() {
                            if i < n {
                                return ((job as u64) << KEY_SHIFT) + i + 1;
                            }
                            i -= n;
                        }
                    }
                }
                None => {
                    if let Some(last) = self.last_unique {
                        return last;
                    }
                }
            }
        }
        self.next_key += 1;
        self.last_unique = Some(self.next_key);
        self.next_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(sets: &[(&str, &str)]) -> DataOptions {
        let mut d = DataOptions::default();
        for (k, v) in sets {
            d.set(k, v).unwrap();
        }
        d
    }

    fn writes(o: &DataOptions, n: usize, bs: usize) -> Vec<Vec<u8>> {
        writes_of(Content::new(o, bs, bs, 7, None, 0), o, n, bs)
    }

    fn writes_of(mut c: Content, o: &DataOptions, n: usize, bs: usize) -> Vec<Vec<u8>> {
        let mut buf = vec![0u8; bs];
        let mut rng = Rng::new(1);
        Content::lay(o, &mut buf, bs, &mut rng);
        (0..n)
            .map(|i| {
                c.write(&mut buf, (i * bs) as u64);
                buf.clone()
            })
            .collect()
    }

    fn unique(blocks: &[Vec<u8>]) -> usize {
        blocks
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
    }

    #[test]
    fn each_mode_writes_what_fio_would() {
        // Default: scrambled, every write unique.
        let w = writes(&DataOptions::default(), 100, 4096);
        assert_eq!(unique(&w), 100);
        // No scramble: the same buffer every time.
        let w = writes(&opts(&[("scramble_buffers", "0")]), 100, 4096);
        assert_eq!(unique(&w), 1);
        // zero_buffers: zeros, unscrambled.
        let w = writes(&opts(&[("zero_buffers", "1")]), 10, 4096);
        assert!(w.iter().all(|b| b.iter().all(|&x| x == 0)));
        // A pattern with refill: the pattern, unchanged.
        let w = writes(
            &opts(&[("buffer_pattern", "\"abc\""), ("refill_buffers", "1")]),
            3,
            4096,
        );
        assert!(w.iter().all(|b| b[..6] == *b"abcabc" && b[4095] == b'a'));
        // refill: unique writes from the pool.
        let w = writes(&opts(&[("refill_buffers", "1")]), 2000, 4096);
        assert_eq!(unique(&w), 2000);
        // dedupe 100: all the same; 0 with compression: all different.
        let w = writes(&opts(&[("dedupe_percentage", "100")]), 50, 4096);
        assert_eq!(unique(&w), 1);
        let w = writes(&opts(&[("buffer_compress_percentage", "50")]), 50, 4096);
        assert_eq!(unique(&w), 50);
        for b in &w {
            for c in b.chunks(512) {
                assert!(c[256..].iter().all(|&x| x == 0));
            }
        }
    }

    #[test]
    fn duplicates_repeat_the_last_unique_block() {
        let w = writes(&opts(&[("dedupe_percentage", "50")]), 4000, 4096);
        let u = unique(&w);
        // Binomial: sd = sqrt(4000 / 4) ≈ 32; 5 sd.
        assert!((2000 - 160..=2000 + 160).contains(&u), "{u} unique of 4000");
        // A duplicate equals the write before it or an earlier one it repeats.
        for i in 1..w.len() {
            if w[..i].contains(&w[i]) {
                assert_eq!(w[i], w[i - 1], "write {i} repeats the last unique block");
            }
        }
    }

    #[test]
    fn working_set_duplicates_come_from_the_first_unique_blocks() {
        let o = opts(&[("dedupe_percentage", "50"), ("dedupe_mode", "working_set")]);
        let ws = |me| {
            Some(WorkingSet {
                blocks: vec![100, 100],
                me,
            })
        };
        let a = writes_of(Content::new(&o, 4096, 4096, 1, ws(0), 9), &o, 2000, 4096);
        let b = writes_of(Content::new(&o, 4096, 4096, 2, ws(1), 9), &o, 2000, 4096);
        let (ua, ub) = (unique(&a), unique(&b));
        // About 1000 unique writes each, plus the duplicates' working set blocks not yet
        // written by the job itself (the other job's 100).
        assert!((900..=1200).contains(&ua), "{ua}");
        assert!((900..=1200).contains(&ub), "{ub}");
        let both: Vec<Vec<u8>> = a.iter().chain(&b).cloned().collect();
        let shared = ua + ub - unique(&both);
        // Each job writes nearly all of the other's 100 working set blocks among its 1000
        // duplicates, and nothing else of the other's.
        assert!(
            (150..=200).contains(&shared),
            "{shared} blocks in both jobs"
        );
    }
}
