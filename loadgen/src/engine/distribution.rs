//! Where random IOs land (`random_distribution`): a unit (a multiple of the IO alignment)
//! of the region, drawn uniformly, by Zipf or Pareto popularity, around a center (normal),
//! or by zones. Zipf uses the method fio uses (Gray et al., "Quickly generating
//! billion-record synthetic databases"), with the zeta sum over at most 10 million ranks;
//! popular ranks are spread over the region by a fixed permutation, as fio spreads them by
//! a hash, unless a base places the most popular one.

use super::rng::Rng;
use crate::options::distribution::Distribution;

/// Ranks summed for Zipf's normalising constant, as fio caps it.
const ZIPF_MAX_GEN: u64 = 10_000_000;

enum Shape {
    Uniform,
    Zipf {
        theta: f64,
        zetan: f64,
        alpha: f64,
        eta: f64,
    },
    Pareto {
        pow: f64,
    },
    Normal {
        center: f64,
        dev: f64,
    },
    /// (cumulative share of accesses in percent, first unit, units).
    Zones(Vec<(u32, u64, u64)>),
}

pub struct Spread {
    kind: Shape,
    units: u64,
    /// Rank r lands on unit (r * mul + off) % units (mul coprime to units: a permutation).
    mul: u64,
    off: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Spread {
    /// Draws over `units` units of `unit_bytes` each.
    pub fn new(d: &Distribution, units: u64, unit_bytes: u64, rng: &mut Rng) -> Spread {
        let units = units.max(1);
        let scatter = |base: Option<f64>, rng: &mut Rng| -> (u64, u64) {
            match base {
                Some(b) => (1, (b * (units - 1) as f64) as u64),
                None => {
                    let mut mul = (0x9e37_79b9_7f4a_7c15u64 % units).max(1);
                    while gcd(mul, units) != 1 {
                        mul += 1;
                    }
                    (mul, rng.below(units))
                }
            }
        };
        let (kind, (mul, off)) = match d {
            Distribution::Random => (Shape::Uniform, (1, 0)),
            Distribution::Zipf { theta, base } => {
                let n = units as f64;
                let zetan: f64 = (1..=units.min(ZIPF_MAX_GEN))
                    .map(|i| (i as f64).powf(-theta))
                    .sum();
                let zeta2 = 1.0 + 0.5f64.powf(*theta);
                let kind = Shape::Zipf {
                    theta: *theta,
                    zetan,
                    alpha: 1.0 / (1.0 - theta),
                    eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
                };
                (kind, scatter(*base, rng))
            }
            Distribution::Pareto { h, base } => (
                Shape::Pareto {
                    pow: h.ln() / (1.0 - h).ln(),
                },
                scatter(*base, rng),
            ),
            Distribution::Normal { dev, center } => (
                Shape::Normal {
                    center: center * (units - 1) as f64,
                    dev: dev / 100.0 * units as f64,
                },
                (1, 0),
            ),
            Distribution::Zoned(z) => {
                let mut out = Vec::new();
                let (mut acc, mut at) = (0u32, 0u64);
                for &(access, size) in z {
                    let n = (units * size as u64 / 100)
                        .max(1)
                        .min(units - at.min(units - 1));
                    acc += access;
                    out.push((acc, at.min(units - 1), n));
                    at += n;
                }
                (Shape::Zones(out), (1, 0))
            }
            Distribution::ZonedAbs(z) => {
                let mut out = Vec::new();
                let (mut acc, mut at) = (0u32, 0u64);
                for &(access, bytes) in z {
                    let start = at.min(units - 1);
                    let n = (bytes / unit_bytes.max(1)).max(1).min(units - start);
                    acc += access;
                    out.push((acc, start, n));
                    at += n;
                }
                (Shape::Zones(out), (1, 0))
            }
        };
        Spread {
            kind,
            units,
            mul,
            off,
        }
    }

    /// The unit of the next IO, in [0, units).
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let n = self.units;
        let rank = match &self.kind {
            Shape::Uniform => return rng.below(n),
            Shape::Zipf {
                theta,
                zetan,
                alpha,
                eta,
            } => {
                let u = rng.unit();
                let z = u * zetan;
                let v = if z < 1.0 {
                    1
                } else if z < 1.0 + 0.5f64.powf(*theta) {
                    2
                } else {
                    1 + (n as f64 * (eta * u - eta + 1.0).powf(*alpha)) as u64
                };
                v.clamp(1, n) - 1
            }
            Shape::Pareto { pow } => {
                let v = ((n - 1) as f64 * rng.unit().powf(*pow)) as u64;
                (n - 1) - v.min(n - 1)
            }
            Shape::Normal { center, dev } => loop {
                // Box–Muller; draws outside the region are drawn again.
                let (a, b) = (rng.unit(), rng.unit());
                let g = (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos();
                let x = (center + g * dev).round();
                if x >= 0.0 && x < n as f64 {
                    return x as u64;
                }
            },
            Shape::Zones(z) => {
                let r = rng.below(100) as u32;
                let &(_, start, len) = z.iter().find(|x| r < x.0).unwrap_or(&z[z.len() - 1]);
                return start + rng.below(len);
            }
        };
        ((rank as u128 * self.mul as u128 + self.off as u128) % n as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(d: &Distribution, units: u64, draws: usize) -> Vec<u64> {
        let mut rng = Rng::new(42);
        let s = Spread::new(d, units, 4096, &mut rng);
        let mut h = vec![0u64; units as usize];
        for _ in 0..draws {
            h[s.next(&mut rng) as usize] += 1;
        }
        h
    }

    #[test]
    fn zipf_and_pareto_make_a_few_units_hot() {
        for d in [
            Distribution::Zipf {
                theta: 1.2,
                base: None,
            },
            Distribution::Pareto { h: 0.9, base: None },
        ] {
            let mut h = hits(&d, 1000, 100_000);
            h.sort_unstable_by(|a, b| b.cmp(a));
            let top: u64 = h[..10].iter().sum();
            // Uniform would give the top 1% of units about 1% of the IOs; fio's Pareto(0.9)
            // gives them u^(ln 0.9 / ln 0.1) >= 0.99: about 20%.
            assert!(top > 15_000, "{d:?}: top 10 of 1000 units got {top}");
        }
        // Zipf(1.2): the most popular unit gets 1/zeta(1.2) of the accesses.
        let h = hits(
            &Distribution::Zipf {
                theta: 1.2,
                base: Some(0.0),
            },
            1000,
            100_000,
        );
        let zeta: f64 = (1..=1000).map(|i| (i as f64).powf(-1.2)).sum();
        let want = 100_000.0 / zeta;
        assert!(
            (h[0] as f64 - want).abs() < want * 0.05,
            "unit 0: {} vs {want}",
            h[0]
        );
    }

    #[test]
    fn zones_get_their_share() {
        let d = Distribution::Zoned(vec![(60, 10), (30, 20), (8, 30), (2, 40)]);
        let h = hits(&d, 1000, 100_000);
        let sum = |a: usize, b: usize| h[a..b].iter().sum::<u64>() as f64 / 1000.0;
        assert!((sum(0, 100) - 60.0).abs() < 1.0);
        assert!((sum(100, 300) - 30.0).abs() < 1.0);
        assert!((sum(300, 600) - 8.0).abs() < 0.5);
        assert!((sum(600, 1000) - 2.0).abs() < 0.3);
        let d = Distribution::ZonedAbs(vec![(90, 4096 * 10), (10, 4096 * 990)]);
        let h = hits(&d, 1000, 100_000);
        assert!((h[..10].iter().sum::<u64>() as f64 / 1000.0 - 90.0).abs() < 1.0);
    }

    #[test]
    fn normal_centers_and_uniform_covers() {
        let h = hits(
            &Distribution::Normal {
                dev: 5.0,
                center: 0.5,
            },
            1000,
            100_000,
        );
        let near: u64 = h[450..550].iter().sum();
        // ±1 standard deviation (50 units) holds about 68 %.
        assert!((64_000..72_000).contains(&near), "{near}");
        let h = hits(&Distribution::Random, 100, 100_000);
        assert!(h.iter().all(|&c| (800..1200).contains(&c)));
    }

    #[test]
    fn the_scatter_is_a_permutation() {
        let mut rng = Rng::new(1);
        let s = Spread::new(
            &Distribution::Pareto { h: 0.5, base: None },
            4096,
            4096,
            &mut rng,
        );
        let mut seen = vec![false; 4096];
        for r in 0..4096u64 {
            let u = ((r as u128 * s.mul as u128 + s.off as u128) % 4096) as usize;
            assert!(!seen[u]);
            seen[u] = true;
        }
    }
}
