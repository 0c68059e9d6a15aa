//! What the next IO is: its direction (by `rwmixread`), its size (`bs`, `bsrange`,
//! `bssplit`, per direction), and its place (sequential, or random over the job's region),
//! and when it is due (`pacing`).

use super::distribution::Spread;
pub use super::rng::Rng;
use crate::options::FileService;
use crate::options::distribution::Distribution;
use crate::options::sizes::SizeDist;
use crate::results::stats::Dir;

/// Draws IO sizes of one direction.
#[derive(Clone, Debug)]
pub enum SizeGen {
    Fixed(u64),
    /// Multiples of `step` from `step` to `step * count`.
    Range {
        step: u64,
        count: u64,
    },
    /// Sizes with cumulative shares in percent (the last is 100).
    Split(Vec<(u64, u32)>),
}

impl SizeGen {
    pub fn new(d: &SizeDist) -> SizeGen {
        match d {
            SizeDist::Fixed(b) => SizeGen::Fixed(*b),
            SizeDist::Range { min, max } => SizeGen::Range {
                step: *min,
                count: max / min,
            },
            SizeDist::Split(v) => {
                let mut acc = 0;
                SizeGen::Split(
                    v.iter()
                        .map(|&(b, p)| {
                            acc += p;
                            (b, acc)
                        })
                        .collect(),
                )
            }
        }
    }

    #[inline]
    fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            SizeGen::Fixed(b) => *b,
            SizeGen::Range { step, count } => step * (1 + rng.below(*count)),
            SizeGen::Split(v) => {
                let r = rng.below(100) as u32;
                v.iter()
                    .find(|&&(_, acc)| r < acc)
                    .or(v.last())
                    .map_or(0, |x| x.0)
            }
        }
    }
}

/// fio's offset modifiers: `rw=…:N` (`seq_add` bytes after each sequential IO; a new random
/// offset every `seq_nr` random IOs, the ones between following on or, `identical`, at the
/// same offset), `blockalign` (random offsets are multiples of it, per direction), and
/// `file_service_type` (which of the job's files the next IO goes to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffsetRule {
    pub seq_add: i64,
    pub seq_nr: u32,
    pub identical: bool,
    pub align: [Option<u64>; 2],
    pub files: FileService,
    /// fio's `random_generator=lfsr`: each unit once per pass.
    pub lfsr: bool,
    /// fio's `zonemode=strided` (sequential IO, one file).
    pub zones: Option<crate::options::zones::Zones>,
}

/// Every unit of `0..units` once per pass, in a scrambled order: a full-period linear
/// congruential sequence modulo the next power of two (multiplier ≡ 1 mod 4, odd
/// increment), skipping values past the end. What fio's LFSR guarantees: no offset twice
/// in a pass, no map of blocks kept.
#[derive(Clone, Copy, Debug)]
pub struct Permutation {
    units: u64,
    mask: u64,
    x: u64,
    inc: u64,
}

impl Permutation {
    pub fn new(units: u64, rng: &mut Rng) -> Permutation {
        let units = units.max(1);
        let mask = units.next_power_of_two() - 1;
        Permutation {
            units,
            mask,
            x: rng.next_u64() & mask,
            inc: (rng.next_u64() & mask) | 1,
        }
    }

    /// The next unit of the pass.
    #[inline]
    pub fn unit(&mut self) -> u64 {
        loop {
            self.x = self
                .x
                .wrapping_mul(0x5851_f42d_4c95_7f2d)
                .wrapping_add(self.inc)
                & self.mask;
            if self.x < self.units {
                return self.x;
            }
        }
    }
}

pub struct Workload {
    /// Bytes of the region the job uses in each of its files.
    regions: Vec<u64>,
    pub random: bool,
    pub read_pct: u8,
    sizes: [SizeGen; 2],
    /// Offsets of random IOs are multiples of this (the direction's smallest size).
    align: [u64; 2],
    /// Per file and direction: where random IOs land, and the next sequential offset.
    spread: Vec<[Spread; 2]>,
    next_seq: Vec<[u64; 2]>,
    /// Per file and direction: where the last IO started (for `identical`).
    last_start: Vec<[u64; 2]>,
    rule: OffsetRule,
    /// With `lfsr`: per file and direction, the order of the units.
    perm: Vec<[Permutation; 2]>,
    /// IOs left until the next random offset (fio's `ddir_seq_nr` countdown).
    seq_left: u32,
    /// The file of the next IO, the IOs left on it (round robin, random) and the bytes
    /// issued on it (sequential).
    file: usize,
    file_left: u32,
    file_bytes: u64,
    /// With zones: where the current zone starts in the region, and the bytes of IO done
    /// in it (fio's `file_offset` and `zone_bytes`).
    zone_start: u64,
    zone_bytes: u64,
    rng: Rng,
}

impl Workload {
    pub fn new(
        regions: &[u64],
        random: bool,
        read_pct: u8,
        sizes: &[SizeDist; 2],
        dist: &Distribution,
        seed: u64,
    ) -> Workload {
        let mut rng = Rng::new(seed);
        let align = [sizes[0].min().max(1), sizes[1].min().max(1)];
        let spread = regions
            .iter()
            .map(|&r| [0, 1].map(|d| Spread::new(dist, r / align[d], align[d], &mut rng)))
            .collect();
        Workload {
            regions: regions.to_vec(),
            random,
            read_pct,
            sizes: [SizeGen::new(&sizes[0]), SizeGen::new(&sizes[1])],
            align,
            spread,
            next_seq: vec![[0, 0]; regions.len()],
            last_start: vec![[0, 0]; regions.len()],
            rule: OffsetRule::default(),
            perm: Vec::new(),
            seq_left: 1,
            file: 0,
            file_left: 1,
            file_bytes: 0,
            zone_start: 0,
            zone_bytes: 0,
            rng,
        }
    }

    /// The same workload with fio's offset modifiers (`rw=…:N`, `rw_sequencer`,
    /// `blockalign`).
    pub fn with_rule(mut self, rule: OffsetRule, dist: &Distribution) -> Workload {
        self.rule = rule;
        self.seq_left = rule.seq_nr.max(1);
        if let FileService::RoundRobin(n) = rule.files {
            self.file_left = n.max(1);
        }
        if rule.align.iter().any(Option::is_some) {
            for d in 0..2 {
                if let Some(a) = rule.align[d] {
                    self.align[d] = a;
                }
            }
            let align = self.align;
            let rng = &mut self.rng;
            self.spread = self
                .regions
                .iter()
                .map(|&r| [0, 1].map(|d| Spread::new(dist, r / align[d], align[d], rng)))
                .collect();
        }
        if rule.lfsr {
            let align = self.align;
            let rng = &mut self.rng;
            self.perm = self
                .regions
                .iter()
                .map(|&r| [0, 1].map(|d| Permutation::new(r / align[d], rng)))
                .collect();
        }
        self
    }

    /// The file of the next IO, as fio's `file_service_type`.
    fn next_file(&mut self) -> usize {
        let n = self.regions.len();
        if n == 1 {
            return 0;
        }
        match self.rule.files {
            FileService::RoundRobin(per) => {
                if self.file_left == 0 {
                    self.file = (self.file + 1) % n;
                    self.file_left = per.max(1);
                }
                self.file_left -= 1;
            }
            FileService::Random(per) => {
                if self.file_left == 0 || self.file_bytes == 0 {
                    self.file = self.rng.below(n as u64) as usize;
                    self.file_left = per.max(1);
                }
                self.file_left -= 1;
            }
            FileService::Sequential => {
                if self.file_bytes >= self.regions[self.file] {
                    self.file = (self.file + 1) % n;
                    self.file_bytes = 0;
                }
            }
        }
        self.file
    }

    /// The next sequential offset after an IO that ended at `end`, as fio's: `seq_add`
    /// bytes further (or back), wrapping to the start (or, going back, to the end); from
    /// the start again when the IO would not fit.
    fn seq_offset(&self, end: u64, len: u64, region: u64) -> u64 {
        let add = self.rule.seq_add;
        let mut pos = end;
        if end > 0 && add != 0 {
            let p = end as i128 + add as i128;
            pos = if p >= 0 && (p as u64) < region {
                p as u64
            } else if add > 0 {
                0
            } else {
                (region as i128 + add as i128).max(0) as u64
            };
        }
        if pos + len > region { 0 } else { pos }
    }

    /// fio's strided zones before a sequential IO: after `size` bytes of IO in a zone the
    /// next starts `range + skip` further (from the start again past the end of the
    /// region); within a zone, past its range the IO goes back to its start.
    fn zone_offset(&mut self, f: usize, d: usize, len: u64, region: u64) -> u64 {
        let Some(z) = self.rule.zones else {
            return self.seq_offset(self.next_seq[f][d], len, region);
        };
        if self.zone_bytes >= z.size {
            self.zone_bytes = 0;
            self.zone_start += z.range + z.skip;
            if self.zone_start >= region {
                self.zone_start = 0;
            }
            self.next_seq[f][d] = self.zone_start;
        }
        if self.next_seq[f][d] >= self.zone_start + z.range {
            self.next_seq[f][d] = self.zone_start;
        }
        self.zone_bytes += len;
        let pos = self.next_seq[f][d];
        if pos + len > region { 0 } else { pos }
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

    /// The next IO of `dir` as (file, offset in its region, length); `busy` rejects places
    /// that already have an IO in flight (used with --verify). None when no free place was
    /// found after a few tries.
    #[inline]
    pub fn next(
        &mut self,
        dir: Dir,
        busy: impl Fn(usize, u64) -> bool,
    ) -> Option<(usize, u64, u64)> {
        let d = dir as usize;
        let f = self.next_file();
        let region = self.regions[f];
        let len = self.sizes[d].next(&mut self.rng).min(region);
        self.file_bytes += len;
        for _ in 0..8 {
            // fio counts down `seq_nr` IOs: the last of them takes a new random offset.
            let fresh = self.random && {
                self.seq_left -= 1;
                let hit = self.seq_left == 0;
                if hit {
                    self.seq_left = self.rule.seq_nr.max(1);
                }
                hit
            };
            let off = if fresh {
                let a = self.align[d];
                let u = match self.perm.get_mut(f) {
                    Some(p) => p[d].unit(),
                    None => self.spread[f][d].next(&mut self.rng),
                };
                (u * a).min((region - len) / a * a)
            } else if self.random && self.rule.identical {
                let last = self.last_start[f][d];
                if last + len > region { 0 } else { last }
            } else {
                self.zone_offset(f, d, len, region)
            };
            self.next_seq[f][d] = off + len;
            self.last_start[f][d] = off;
            if !busy(f, off) {
                return Some((f, off, len));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(b: u64) -> [SizeDist; 2] {
        [SizeDist::Fixed(b), SizeDist::Fixed(b)]
    }

    #[test]
    fn mix_and_offsets() {
        let mut w = Workload::new(
            &[1000 * 4096],
            true,
            70,
            &fixed(4096),
            &Distribution::Random,
            1,
        );
        let reads = (0..100_000).filter(|_| w.dir() == Dir::Read).count();
        assert!((69_000..71_000).contains(&reads), "{reads}");
        let mut seen = vec![false; 1000];
        for _ in 0..100_000 {
            let (_, off, len) = w.next(Dir::Read, |_, _| false).unwrap();
            assert_eq!((off % 4096, len), (0, 4096));
            seen[(off / 4096) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        let mut s = Workload::new(
            &[3 * 4096],
            false,
            100,
            &fixed(4096),
            &Distribution::Random,
            1,
        );
        let v: Vec<u64> = (0..5)
            .map(|_| s.next(Dir::Read, |_, _| false).unwrap().1 / 4096)
            .collect();
        assert_eq!(v, vec![0, 1, 2, 0, 1]);
        assert_eq!(s.next(Dir::Read, |_, _| true), None);
    }

    #[test]
    fn each_direction_has_its_own_sizes() {
        let sizes = [SizeDist::Fixed(4096), SizeDist::Fixed(65536)];
        let mut w = Workload::new(&[1 << 20], true, 50, &sizes, &Distribution::Random, 7);
        for _ in 0..1000 {
            let (_, off, len) = w.next(Dir::Write, |_, _| false).unwrap();
            assert_eq!(len, 65536);
            assert_eq!(off % 65536, 0, "writes are aligned to their size");
            assert!(off + len <= 1 << 20);
            assert_eq!(w.next(Dir::Read, |_, _| false).unwrap().2, 4096);
        }
    }

    #[test]
    fn ranges_and_splits_draw_their_sizes() {
        let range = SizeDist::Range {
            min: 4096,
            max: 16384,
        };
        let mut w = Workload::new(
            &[1 << 20],
            true,
            100,
            &[range.clone(), range],
            &Distribution::Random,
            3,
        );
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..40_000 {
            let (_, off, len) = w.next(Dir::Read, |_, _| false).unwrap();
            assert!(off + len <= 1 << 20 && off % 4096 == 0);
            *counts.entry(len).or_insert(0u32) += 1;
        }
        assert_eq!(
            counts.keys().copied().collect::<Vec<_>>(),
            [4096, 8192, 12288, 16384]
        );
        assert!(
            counts.values().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        let split = SizeDist::Split(vec![(4096, 70), (65536, 30)]);
        let mut w = Workload::new(
            &[1 << 20],
            false,
            0,
            &[split.clone(), split],
            &Distribution::Random,
            3,
        );
        let big = (0..10_000)
            .filter(|_| w.next(Dir::Write, |_, _| false).unwrap().2 == 65536)
            .count();
        assert!((2_800..3_200).contains(&big), "{big}");
    }

    #[test]
    fn files_take_turns() {
        let mut w = Workload::new(
            &[8192, 4 * 8192],
            false,
            100,
            &fixed(4096),
            &Distribution::Random,
            1,
        );
        let v: Vec<(usize, u64)> = (0..6)
            .map(|_| {
                let (f, off, _) = w.next(Dir::Read, |_, _| false).unwrap();
                (f, off)
            })
            .collect();
        assert_eq!(v, [(0, 0), (1, 0), (0, 4096), (1, 4096), (0, 0), (1, 8192)]);
    }

    #[test]
    fn sequential_ios_of_mixed_sizes_stay_inside_the_region() {
        let split = SizeDist::Split(vec![(4096, 50), (12288, 50)]);
        let mut w = Workload::new(
            &[64 << 10],
            false,
            100,
            &[split.clone(), split],
            &Distribution::Random,
            5,
        );
        let mut last_end = 0;
        for _ in 0..1000 {
            let (_, off, len) = w.next(Dir::Read, |_, _| false).unwrap();
            assert!(off + len <= 64 << 10);
            assert!(off == last_end || off == 0, "{off} after {last_end}");
            last_end = off + len;
        }
    }

    fn offsets(w: &mut Workload, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| w.next(Dir::Write, |_, _| false).unwrap().1 / 1024)
            .collect()
    }

    fn with(random: bool, rule: OffsetRule) -> Workload {
        let d = Distribution::Random;
        Workload::new(&[64 << 10], random, 0, &fixed(4096), &d, 9).with_rule(rule, &d)
    }

    #[test]
    fn sequential_ios_skip_or_step_back_as_fio() {
        let skip = OffsetRule {
            seq_add: 4096,
            ..Default::default()
        };
        let v = offsets(&mut with(false, skip), 10);
        assert_eq!(v, [0, 8, 16, 24, 32, 40, 48, 56, 0, 8], "KiB");
        // fio's backwards-read.fio: `rw=read:-8k` with 4k IOs.
        let back = OffsetRule {
            seq_add: -8192,
            ..Default::default()
        };
        let v = offsets(&mut with(false, back), 18);
        let mut want = vec![0];
        want.extend((1..=14).rev().map(|k| k * 4));
        want.extend([0, 56, 52]);
        assert_eq!(v, want, "KiB");
    }

    #[test]
    fn random_ios_take_a_new_offset_every_n() {
        let rule = OffsetRule {
            seq_nr: 4,
            ..Default::default()
        };
        let v = offsets(&mut with(true, rule), 12);
        // As fio counts down: the 4th, 8th, 12th IO are random, the others follow on.
        assert_eq!(&v[..3], [0, 4, 8]);
        for k in [4, 5, 6, 8, 9, 10] {
            assert!(
                v[k] == v[k - 1] + 4 || v[k] == 0,
                "{v:?}: IO {k} follows on"
            );
        }
        let ident = OffsetRule {
            seq_nr: 3,
            identical: true,
            ..Default::default()
        };
        let v = offsets(&mut with(true, ident), 9);
        assert_eq!(&v[..2], [0, 0]);
        assert!(v[3] == v[2] && v[4] == v[2], "{v:?}");
        assert!(v[6] == v[5] && v[7] == v[5], "{v:?}");
    }

    #[test]
    fn blockalign_sets_the_grid_of_random_offsets() {
        let rule = OffsetRule {
            align: [None, Some(1024)],
            ..Default::default()
        };
        let mut w = with(true, rule);
        let mut unaligned = 0;
        for _ in 0..1000 {
            let (_, off, len) = w.next(Dir::Write, |_, _| false).unwrap();
            assert!(off % 1024 == 0 && off + len <= 64 << 10, "{off}");
            unaligned += usize::from(off % 4096 != 0);
        }
        assert!(unaligned > 500, "{unaligned} of 1000 off the 4k grid");
    }

    #[test]
    fn files_are_served_as_fios_file_service_type() {
        let d = Distribution::Random;
        let files = |service: FileService, n: usize| -> Vec<usize> {
            let rule = OffsetRule {
                files: service,
                ..Default::default()
            };
            let mut w =
                Workload::new(&[4 * 4096; 3], false, 0, &fixed(4096), &d, 5).with_rule(rule, &d);
            (0..n)
                .map(|_| w.next(Dir::Write, |_, _| false).unwrap().0)
                .collect()
        };
        assert_eq!(
            files(FileService::RoundRobin(2), 8),
            [0, 0, 1, 1, 2, 2, 0, 0]
        );
        // Sequential: a file's whole region (four IOs), then the next.
        assert_eq!(
            files(FileService::Sequential, 13),
            [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0]
        );
        let random = files(FileService::Random(3), 3000);
        for run in random.chunks(3) {
            assert!(run.iter().all(|&f| f == run[0]), "3 IOs per draw: {run:?}");
        }
        for f in 0..3 {
            let n = random.iter().filter(|&&x| x == f).count();
            assert!((800..1200).contains(&n), "file {f}: {n} of 3000");
        }
    }

    #[test]
    fn lfsr_visits_every_unit_once_per_pass() {
        let mut rng = Rng::new(3);
        for units in [1, 2, 3, 7, 16, 1000, 4099] {
            let mut p = Permutation::new(units, &mut rng);
            for _ in 0..2 {
                let mut seen = vec![false; units as usize];
                for _ in 0..units {
                    let u = p.unit() as usize;
                    assert!(!seen[u], "{units}: unit {u} twice in a pass");
                    seen[u] = true;
                }
            }
        }
        let rule = OffsetRule {
            lfsr: true,
            ..Default::default()
        };
        let mut w = with(true, rule);
        let mut v = offsets(&mut w, 16);
        v.sort();
        assert_eq!(v, (0..16).map(|k| k * 4).collect::<Vec<_>>(), "KiB");
    }
}
