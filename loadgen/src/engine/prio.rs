//! IO priorities as fio sets them: the job thread's (`prio`, `prioclass`: ioprio_set(2),
//! which an io_uring entry without its own priority inherits) and, per IO, the `ioprio` of
//! the io_uring entry for the share `cmdprio_percentage` or `cmdprio_bssplit` picks.

use anyhow::{Context, Result};

use super::rng::Rng;
use crate::options::prio::PrioOptions;

/// Linux's IO priority value: the class in the top 3 of 16 bits, the level below.
pub fn value(class: u8, level: u8) -> u16 {
    (class as u16) << 13 | level as u16
}

/// The realtime class, which fio's logs flag with 1 (without `log_prio`).
pub fn realtime(v: u16) -> bool {
    v >> 13 == 1
}

/// The job thread's priority (`prioclass` without a class is best effort, as fio's); None
/// when neither is given.
pub fn job_value(o: &PrioOptions) -> Option<u16> {
    (o.prio.is_some() || o.prioclass.is_some()).then(|| {
        value(
            o.prioclass.filter(|&c| c != 0).unwrap_or(2),
            o.prio.unwrap_or(0),
        )
    })
}

/// Sets the calling thread's IO priority.
pub fn set_thread(v: u16) -> Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: ioprio_set takes plain numbers; 0 is the calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            v as libc::c_long,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("ioprio_set");
    }
    Ok(())
}

/// Picks the IOs that carry a priority of their own.
pub struct CmdPrio {
    percentage: [u8; 2],
    prio: [u16; 2],
    /// Per direction: (IO size, share in %, priority).
    split: Option<[Vec<(u64, u8, u16)>; 2]>,
    rng: Rng,
}

impl CmdPrio {
    /// None when no IO gets a priority of its own.
    pub fn new(o: &PrioOptions, seed: u64) -> Option<CmdPrio> {
        if !o.per_io() {
            return None;
        }
        let prio = [0, 1].map(|d| value(o.class[d].unwrap_or(1), o.level[d].unwrap_or(0)));
        let split = o.bssplit.as_ref().map(|s| {
            [0, 1].map(|d| {
                s[d].iter()
                    .map(|e| {
                        let v = value(
                            e.class.unwrap_or(o.class[d].unwrap_or(1)),
                            e.level.unwrap_or(o.level[d].unwrap_or(0)),
                        );
                        (e.bs, e.pct, v)
                    })
                    .collect()
            })
        });
        Some(CmdPrio {
            percentage: o.percentage,
            prio,
            split,
            rng: Rng::new(seed ^ 0x1010_c0de_5eed_0001),
        })
    }

    /// The priority of the next IO of direction `dir` and `len` bytes, if it gets one.
    pub fn pick(&mut self, dir: usize, len: u64) -> Option<u16> {
        let draw = self.rng.below(100) as u32;
        match &self.split {
            None => (draw < self.percentage[dir] as u32).then_some(self.prio[dir]),
            Some(s) => {
                let mut upto = 0u32;
                for &(_, pct, v) in s[dir].iter().filter(|e| e.0 == len) {
                    upto += pct as u32;
                    if draw < upto {
                        return Some(v);
                    }
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(sets: &[(&str, &str)]) -> PrioOptions {
        let mut o = PrioOptions::default();
        for (k, v) in sets {
            assert!(o.set(k, v).unwrap());
        }
        o
    }

    #[test]
    fn the_chosen_share_of_ios_carries_the_priority() {
        let mut c = CmdPrio::new(&opts(&[("cmdprio_percentage", "20,0")]), 1).unwrap();
        let reads: Vec<Option<u16>> = (0..10_000).map(|_| c.pick(0, 4096)).collect();
        let high = reads.iter().filter(|p| **p == Some(0x2000)).count();
        assert!((1800..=2200).contains(&high), "{high} of 10000");
        assert!(reads.iter().all(|p| p.is_none() || *p == Some(0x2000)));
        assert!((0..1000).all(|_| c.pick(1, 4096).is_none()));

        let o = opts(&[
            ("cmdprio_bssplit", "64k/25/1/1:64k/75/3/2:1024k/0"),
            ("cmdprio_class", "2"),
        ]);
        let mut c = CmdPrio::new(&o, 2).unwrap();
        let mut n = [0; 3];
        for _ in 0..10_000 {
            match c.pick(0, 65536) {
                Some(0x2001) => n[0] += 1,
                Some(0x6002) => n[1] += 1,
                p => panic!("{p:?}"),
            }
            assert!(c.pick(0, 1 << 20).is_none());
            n[2] += c.pick(0, 4096).is_some() as usize;
        }
        assert!((2200..=2800).contains(&n[0]), "{n:?}");
        assert_eq!(n[2], 0);

        assert!(CmdPrio::new(&opts(&[("cmdprio_class", "1")]), 3).is_none());
        assert_eq!(job_value(&opts(&[("prioclass", "3")])), Some(0x6000));
        assert_eq!(job_value(&opts(&[("prio", "5")])), Some(0x4005));
        assert_eq!(job_value(&opts(&[])), None);
        assert!(realtime(0x2000) && !realtime(0x6000) && !realtime(0));
    }

    /// The kernel takes the idle class for this thread, and reports it back.
    #[test]
    fn a_thread_priority_is_set() {
        std::thread::spawn(|| {
            set_thread(value(3, 0)).unwrap();
            // SAFETY: ioprio_get takes plain numbers.
            let got = unsafe { libc::syscall(libc::SYS_ioprio_get, 1 as libc::c_long, 0) };
            assert_eq!(got, 0x6000);
        })
        .join()
        .unwrap();
    }
}
