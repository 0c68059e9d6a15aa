//! fio's `random_distribution`: where random IOs land. `random` (uniform, the default),
//! `zipf:THETA[:BASE]`, `pareto:H[:BASE]`, `normal:DEV[:CENTER]`, `zoned:ACCESS/SIZE%:…`,
//! `zoned_abs:ACCESS/SIZE:…`.

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bytes};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    #[default]
    Random,
    /// Zipf with exponent `theta` (≠ 1); `base` in [0, 1] puts the most popular block there
    /// (None: a place drawn from the seed, as fio).
    Zipf { theta: f64, base: Option<f64> },
    /// Pareto with shape `h` in (0, 1).
    Pareto { h: f64, base: Option<f64> },
    /// Normal around `center` (fraction of the region) with a standard deviation of `dev`
    /// percent of the region.
    Normal { dev: f64, center: f64 },
    /// (share of accesses in percent, share of the region in percent), in region order.
    Zoned(Vec<(u32, u32)>),
    /// (share of accesses in percent, bytes), in region order.
    ZonedAbs(Vec<(u32, u64)>),
}

fn float(s: &str, what: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{}` is not a number ({what})", excerpt(s)))
}

fn base(s: Option<&str>) -> Result<Option<f64>, String> {
    match s {
        None => Ok(None),
        Some(b) => {
            let v = float(b, "the base, from 0 to 1")?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("base `{}` is not from 0 to 1", excerpt(b)));
            }
            Ok(Some(v))
        }
    }
}

/// Zones as (access %, size) with `size` parsed by `size`; the access shares add up to 100.
fn zones<T>(s: &str, size: impl Fn(&str) -> Result<T, String>) -> Result<Vec<(u32, T)>, String> {
    let mut out = Vec::new();
    for z in s.split(':') {
        let (a, b) = z
            .split_once('/')
            .ok_or_else(|| format!("zone `{}` is not ACCESS/SIZE", excerpt(z)))?;
        let a: u32 = a
            .trim()
            .parse()
            .ok()
            .filter(|&a| a <= 100)
            .ok_or_else(|| format!("`{}` is not a percentage of accesses", excerpt(a)))?;
        out.push((a, size(b.trim())?));
    }
    if out.len() > 256 {
        return Err(format!("{} zones; fio takes at most 256", out.len()));
    }
    let total: u32 = out.iter().map(|z| z.0).sum();
    if total != 100 {
        return Err(format!("the zones' accesses add up to {total}%, not 100%"));
    }
    Ok(out)
}

pub fn parse(v: &str) -> Result<Distribution, String> {
    if v.contains(',') {
        return Err(format!(
            "`{}`: one distribution for reads and writes alike (loadgen takes no per-direction values here)",
            excerpt(v)
        ));
    }
    // fio's own documentation also writes `zoned_abs=…`.
    let (kind, rest) = match v.split_once([':', '=']) {
        Some((k, r)) => (k.trim(), Some(r)),
        None => (v.trim(), None),
    };
    let args: Vec<&str> = rest.map(|r| r.split(':').collect()).unwrap_or_default();
    let need = |what: &str| -> Result<&str, String> {
        args.first()
            .copied()
            .ok_or_else(|| format!("`{kind}` needs a value ({kind}:{what})"))
    };
    Ok(match kind {
        "random" => Distribution::Random,
        "zipf" => {
            let theta = float(need("THETA")?, "zipf theta")?;
            if theta <= 0.0 || theta == 1.0 {
                return Err("zipf theta must be above 0 and not 1".into());
            }
            Distribution::Zipf {
                theta,
                base: base(args.get(1).copied())?,
            }
        }
        "pareto" => {
            let h = float(need("H")?, "pareto power")?;
            if h <= 0.0 || h >= 1.0 {
                return Err("pareto power must be between 0 and 1".into());
            }
            Distribution::Pareto {
                h,
                base: base(args.get(1).copied())?,
            }
        }
        "normal" | "gauss" => {
            let dev = float(need("DEV")?, "deviation in percent")?;
            if !(0.0..=100.0).contains(&dev) {
                return Err("normal deviation must be from 0 to 100".into());
            }
            Distribution::Normal {
                dev,
                center: base(args.get(1).copied())?.unwrap_or(0.5),
            }
        }
        "zoned" => {
            // As fio, a zone without a size (`20/`) takes what the others leave.
            let mut z = zones(rest.unwrap_or(""), |s| {
                if s.trim().is_empty() {
                    return Ok(u32::MAX);
                }
                s.trim_end_matches('%')
                    .parse::<u32>()
                    .ok()
                    .filter(|&p| p <= 100)
                    .ok_or_else(|| {
                        format!("`{}` is not a share of the region in percent", excerpt(s))
                    })
            })?;
            let open = z.iter().filter(|x| x.1 == u32::MAX).count();
            if open > 1 {
                return Err("only one zone may leave out its size".into());
            }
            let given: u32 = z.iter().map(|x| x.1).filter(|&p| p != u32::MAX).sum();
            for x in z.iter_mut().filter(|x| x.1 == u32::MAX) {
                x.1 = 100u32.saturating_sub(given);
            }
            let size: u32 = z.iter().map(|x| x.1).sum();
            if size != 100 {
                return Err(format!("the zones cover {size}% of the region, not 100%"));
            }
            Distribution::Zoned(z)
        }
        "zoned_abs" => Distribution::ZonedAbs(zones(rest.unwrap_or(""), parse_bytes)?),
        _ => {
            return Err(format!(
                "unknown distribution `{}` (use random, zipf, pareto, normal, zoned or zoned_abs)",
                excerpt(kind)
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_without_a_size_takes_the_rest_as_in_fio() {
        assert_eq!(
            parse("zoned:50/5:30/15:20/").unwrap(),
            Distribution::Zoned(vec![(50, 5), (30, 15), (20, 80)])
        );
        assert!(parse("zoned:50/:50/").is_err());
    }

    #[test]
    fn fio_spellings_parse() {
        assert_eq!(parse("random"), Ok(Distribution::Random));
        assert_eq!(
            parse("zipf:1.2"),
            Ok(Distribution::Zipf {
                theta: 1.2,
                base: None
            })
        );
        assert_eq!(
            parse("zipf:1.2:0.25"),
            Ok(Distribution::Zipf {
                theta: 1.2,
                base: Some(0.25)
            })
        );
        assert_eq!(
            parse("pareto:0.9"),
            Ok(Distribution::Pareto { h: 0.9, base: None })
        );
        assert_eq!(
            parse("normal:10"),
            Ok(Distribution::Normal {
                dev: 10.0,
                center: 0.5
            })
        );
        assert_eq!(
            parse("zoned:60/10:30/20:8/30:2/40"),
            Ok(Distribution::Zoned(vec![
                (60, 10),
                (30, 20),
                (8, 30),
                (2, 40)
            ]))
        );
        assert_eq!(
            parse("zoned_abs=60/20G:40/100G"),
            Ok(Distribution::ZonedAbs(vec![
                (60, 20 << 30),
                (40, 100 << 30)
            ]))
        );
        for bad in [
            "zipf",
            "zipf:1",
            "zipf:x",
            "pareto:1.5",
            "normal:200",
            "zoned:60/10:30/20",
            "zoned:60/50:40/60",
            "zoned:60/x",
            "bogus",
            "zipf:1.2,zipf:1.1",
            "zipf:1.2:3",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
