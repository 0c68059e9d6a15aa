//! fio's IO priority options: `prio`/`prioclass` (the job's), and per IO `cmdprio_percentage`,
//! `cmdprio_class`, `cmdprio` and `cmdprio_bssplit` (io_uring and libaio in fio).

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bytes};

/// One `cmdprio_bssplit` entry: IOs of `bs` bytes, `pct` % of them with the priority (its
/// class and level, or `cmdprio_class`/`cmdprio`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioSplit {
    pub bs: u64,
    pub pct: u8,
    pub class: Option<u8>,
    pub level: Option<u8>,
}

/// The IO priority options of a job, per direction where fio takes `R,W`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioOptions {
    pub prio: Option<u8>,
    pub prioclass: Option<u8>,
    pub percentage: [u8; 2],
    pub class: [Option<u8>; 2],
    pub level: [Option<u8>; 2],
    pub bssplit: Option<[Vec<PrioSplit>; 2]>,
    pub log_prio: bool,
}

impl PrioOptions {
    /// Whether some IOs get a priority of their own.
    pub fn per_io(&self) -> bool {
        self.percentage.iter().any(|&p| p > 0) || self.bssplit.is_some()
    }

    /// Whether any IO runs in the real-time class (1), which the kernel serves before every
    /// best-effort IO of the machine.
    pub fn real_time(&self) -> bool {
        const RT: u8 = 1;
        self.prioclass == Some(RT)
            || self.class.contains(&Some(RT))
            || self
                .bssplit
                .iter()
                .flatten()
                .flatten()
                .any(|s| s.class == Some(RT))
    }

    /// Takes one of the options; false if `key` is none of them.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        match key {
            "prio" => self.prio = Some(number(v, 0, 7)?),
            "prioclass" => self.prioclass = Some(number(v, 0, 3)?),
            "cmdprio_percentage" => self.percentage = per_dir(v, |s| number(s, 0, 100))?,
            "cmdprio_class" => self.class = per_dir(v, |s| number(s, 1, 3).map(Some))?,
            "cmdprio" => self.level = per_dir(v, |s| number(s, 0, 7).map(Some))?,
            "cmdprio_bssplit" => self.bssplit = Some(per_dir(v, split)?),
            "log_prio" => self.log_prio = super::values::parse_bool(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn number(v: &str, lo: u8, hi: u8) -> Result<u8, String> {
    v.trim()
        .parse::<u8>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("`{}` must be from {lo} to {hi}", excerpt(v)))
}

/// `R,W` or one value for both, as fio's.
fn per_dir<T: Clone>(v: &str, one: impl Fn(&str) -> Result<T, String>) -> Result<[T; 2], String> {
    match v.split_once(',') {
        Some((r, w)) => Ok([one(r)?, one(w)?]),
        None => {
            let x = one(v)?;
            Ok([x.clone(), x])
        }
    }
}

/// `BS/PCT[/CLASS/LEVEL]:…` of one direction.
fn split(v: &str) -> Result<Vec<PrioSplit>, String> {
    let mut out = Vec::new();
    for e in v.split(':').filter(|e| !e.trim().is_empty()) {
        let f: Vec<&str> = e.split('/').collect();
        let (bs, pct, class, level) = match f.as_slice() {
            [b, p] => (b, p, None, None),
            [b, p, c, l] => (b, p, Some(number(c, 1, 3)?), Some(number(l, 0, 7)?)),
            _ => {
                return Err(format!(
                    "`{}`: each entry is BS/PCT or BS/PCT/CLASS/LEVEL",
                    excerpt(e)
                ));
            }
        };
        out.push(PrioSplit {
            bs: parse_bytes(bs)?,
            pct: number(pct, 0, 100)?,
            class,
            level,
        });
    }
    let mut sizes: Vec<u64> = out.iter().map(|s| s.bs).collect();
    sizes.dedup();
    for bs in sizes {
        let sum: u32 = out
            .iter()
            .filter(|s| s.bs == bs)
            .map(|s| s.pct as u32)
            .sum();
        if sum > 100 {
            return Err(format!(
                "`{}`: the shares of {bs} bytes add up to {sum} %",
                excerpt(v)
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fios_priority_values() {
        let mut p = PrioOptions::default();
        assert!(!p.per_io());
        p.set("cmdprio_percentage", "20").unwrap();
        assert_eq!(p.percentage, [20, 20]);
        p.set("cmdprio_class", "1,3").unwrap();
        assert_eq!(p.class, [Some(1), Some(3)]);
        p.set("cmdprio_bssplit", "64k/25/1/1:64k/75/3/2:1024k/0,1024k/0")
            .unwrap();
        let s = p.bssplit.as_ref().unwrap();
        assert_eq!(s[0].len(), 3);
        assert_eq!(
            s[0][1],
            PrioSplit {
                bs: 65536,
                pct: 75,
                class: Some(3),
                level: Some(2)
            }
        );
        assert_eq!(
            s[1],
            [PrioSplit {
                bs: 1 << 20,
                pct: 0,
                class: None,
                level: None
            }]
        );
        assert!(p.per_io());
        for (k, v) in [
            ("prio", "8"),
            ("prioclass", "4"),
            ("cmdprio_percentage", "101"),
            ("cmdprio_class", "0"),
            ("cmdprio_bssplit", "64k/60:64k/50"),
            ("cmdprio_bssplit", "64k/50/1"),
        ] {
            assert!(p.set(k, v).is_err(), "{k}={v}");
        }
        assert!(!p.set("bs", "4k").unwrap());
    }
}
