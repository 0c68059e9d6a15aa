//! IO sizes and rates per direction, in fio's syntax. A value with commas gives reads,
//! writes (and trims, which loadgen does not issue) their own values: `bs=4k` is 4k for
//! every direction, `bs=4k,64k` reads of 4k and writes of 64k, `bs=,64k` leaves reads as they
//! are. The same holds for `bsrange`, `bssplit`, `rate` and `rate_iops`.

use serde::{Deserialize, Serialize};

use super::values::{parse_bytes, parse_count};

pub use record::workload::{SizeDist, label};

/// Splits a per-direction value into (reads, writes): one item applies to both, an empty
/// item leaves its direction unset. A third item (trims) is checked and ignored.
pub fn per_direction<T>(
    s: &str,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<[Option<T>; 2], String>
where
    T: Clone,
{
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!(
            "`{}` has {} comma-separated values; fio takes at most 3 (reads, writes, trims)",
            super::values::excerpt(s),
            parts.len()
        ));
    }
    let parse = |p: &str| -> Result<Option<T>, String> {
        if p.is_empty() {
            Ok(None)
        } else {
            item(p).map(Some)
        }
    };
    let read = parse(parts[0])?;
    if parts.len() == 1 {
        return Ok([read.clone(), read]);
    }
    let write = parse(parts[1])?;
    if let Some(t) = parts.get(2) {
        parse(t)?;
    }
    Ok([read, write])
}

fn block_size(s: &str) -> Result<u64, String> {
    let b = parse_bytes(s)?;
    if b == 0 {
        return Err("a block size must be greater than 0".into());
    }
    if b > u32::MAX as u64 / 2 {
        return Err(format!("`{s}`: a block size must be below 2g"));
    }
    Ok(b)
}

/// `bs=4k[,64k]`.
pub fn parse_bs(s: &str) -> Result<[Option<SizeDist>; 2], String> {
    per_direction(s, |x| block_size(x).map(SizeDist::Fixed))
}

/// `bsrange=4k-64k[,8k-16k]` (`:` also separates the ends, as in fio).
pub fn parse_bsrange(s: &str) -> Result<[Option<SizeDist>; 2], String> {
    per_direction(s, |x| {
        let (a, b) = x
            .split_once('-')
            .or_else(|| x.split_once(':'))
            .ok_or_else(|| format!("`{x}` is not a range (example: 4k-64k)"))?;
        let (min, max) = (block_size(a)?, block_size(b)?);
        if min > max {
            return Err(format!("`{x}`: the lower end is above the upper end"));
        }
        Ok(if min == max {
            SizeDist::Fixed(min)
        } else {
            SizeDist::Range {
                min,
                max: max - max % min,
            }
        })
    })
}

/// `bssplit=4k/70:64k/30[,…]`. A size without a share gets an equal part of what the others
/// leave, as in fio; the shares must then add up to 100.
pub fn parse_bssplit(s: &str) -> Result<[Option<SizeDist>; 2], String> {
    per_direction(s, |x| {
        let mut given = Vec::new();
        for entry in x.split(':') {
            let (b, p) = match entry.split_once('/') {
                Some((b, p)) => (b, p.trim()),
                None => (entry, ""),
            };
            let b = block_size(b.trim())?;
            let p = if p.is_empty() {
                None
            } else {
                match p.parse::<u32>() {
                    Ok(v) if v <= 100 => Some(v),
                    _ => return Err(format!("`{p}` in `{entry}` is not a percentage")),
                }
            };
            given.push((b, p));
        }
        let set: u32 = given.iter().filter_map(|x| x.1).sum();
        let missing = given.iter().filter(|x| x.1.is_none()).count() as u32;
        if set > 100 {
            return Err(format!(
                "`{}`: the shares add up to {set}%, more than 100%",
                super::values::excerpt(x)
            ));
        }
        let mut out: Vec<(u64, u32)> = Vec::new();
        let mut left = 100 - set;
        for (i, (b, p)) in given.iter().enumerate() {
            let share = match p {
                Some(v) => *v,
                None => {
                    // The last size without a share takes the remainder of the division.
                    let n = given[i..].iter().filter(|x| x.1.is_none()).count() as u32;
                    let v = left / n;
                    left -= v;
                    v
                }
            };
            if share > 0 {
                out.push((*b, share));
            }
        }
        let total: u32 = out.iter().map(|x| x.1).sum();
        if total != 100 || (missing == 0 && set != 100) {
            return Err(format!(
                "`{}`: the shares add up to {total}%, not 100%",
                super::values::excerpt(x)
            ));
        }
        Ok(if out.len() == 1 {
            SizeDist::Fixed(out[0].0)
        } else {
            SizeDist::Split(out)
        })
    })
}

/// A rate limit of one direction, as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rate {
    /// `rate_iops`: IOs per second, turned into bytes per second with the direction's
    /// smallest IO size, as fio does.
    Iops(u64),
    /// `rate`: bytes per second.
    Bytes(u64),
}

impl Rate {
    /// Bytes per second for a direction whose smallest IO size is `min_bs`.
    pub fn bytes_per_s(self, min_bs: u64) -> u64 {
        match self {
            Rate::Iops(n) => n.saturating_mul(min_bs),
            Rate::Bytes(b) => b,
        }
    }
}

/// `rate_iops=R[,W]`: `Some(0)` is unlimited, `None` (an empty value) leaves the direction
/// as it is.
pub fn parse_rate_iops(s: &str) -> Result<[Option<u64>; 2], String> {
    per_direction(s, parse_count)
}

/// `rate=R[,W]` in bytes per second (`1m` is 1 MiB/s, as fio counts), like `rate_iops`.
pub fn parse_rate(s: &str) -> Result<[Option<u64>; 2], String> {
    per_direction(s, parse_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use SizeDist::*;

    #[test]
    fn commas_give_reads_and_writes_their_own_values() {
        assert_eq!(parse_bs("4k"), Ok([Some(Fixed(4096)), Some(Fixed(4096))]));
        assert_eq!(
            parse_bs("4k,64k"),
            Ok([Some(Fixed(4096)), Some(Fixed(65536))])
        );
        assert_eq!(parse_bs(",64k"), Ok([None, Some(Fixed(65536))]));
        assert_eq!(parse_bs("4k,"), Ok([Some(Fixed(4096)), None]));
        assert_eq!(
            parse_bs("4k,8k,16k"),
            Ok([Some(Fixed(4096)), Some(Fixed(8192))])
        );
        assert!(parse_bs("4k,8k,16k,32k").unwrap_err().contains("at most 3"));
        assert!(parse_bs("0").is_err());
        assert!(parse_bs("4k,x").is_err());
        assert_eq!(parse_rate_iops("500,200"), Ok([Some(500), Some(200)]));
        assert_eq!(parse_rate_iops(",200"), Ok([None, Some(200)]));
        assert_eq!(parse_rate_iops("0"), Ok([Some(0), Some(0)]));
        assert_eq!(parse_rate("1m"), Ok([Some(1 << 20), Some(1 << 20)]));
        assert_eq!(Rate::Iops(100).bytes_per_s(4096), 409_600);
    }

    #[test]
    fn ranges_and_splits() {
        assert_eq!(
            parse_bsrange("4k-64k"),
            Ok([
                Some(Range {
                    min: 4096,
                    max: 65536
                }),
                Some(Range {
                    min: 4096,
                    max: 65536
                })
            ])
        );
        assert_eq!(
            parse_bsrange("4k-10k").unwrap().map(|x| x.map(|d| d.max()))[0],
            Some(8192),
            "the upper end is rounded down to a multiple of the lower"
        );
        assert_eq!(parse_bsrange("4k:4k").unwrap()[0], Some(Fixed(4096)));
        assert!(parse_bsrange("64k-4k").is_err());
        assert!(parse_bsrange("4k").is_err());
        let s = parse_bssplit("4k/70:64k/30,8k").unwrap();
        assert_eq!(s[0], Some(Split(vec![(4096, 70), (65536, 30)])));
        assert_eq!(s[1], Some(Fixed(8192)));
        // Sizes without a share divide what is left.
        assert_eq!(
            parse_bssplit("4k/50:8k:16k").unwrap()[0],
            Some(Split(vec![(4096, 50), (8192, 25), (16384, 25)]))
        );
        assert_eq!(
            parse_bssplit("4k:8k:16k").unwrap()[0],
            Some(Split(vec![(4096, 33), (8192, 33), (16384, 34)]))
        );
        assert!(parse_bssplit("4k/70:8k/40").unwrap_err().contains("110%"));
        assert!(parse_bssplit("4k/50:8k/40").unwrap_err().contains("90%"));
        assert!(parse_bssplit("4k/x").is_err());
        assert_eq!(label(&[Fixed(4096), Fixed(4096)]), "4k");
        assert_eq!(label(&[Fixed(4096), Fixed(65536)]), "4k,64k");
        assert_eq!(Split(vec![(4096, 70), (65536, 30)]).label(), "4k/70:64k/30");
    }
}
