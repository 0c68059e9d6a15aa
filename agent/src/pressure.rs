//! Pressure stall information (`/proc/pressure/{cpu,io,memory}`): how long tasks waited for
//! a resource. A host whose CPU is starved acknowledges late, and its peers' retransmit
//! timers fire with nothing lost; the analysis tells that apart from congestion with this.

use std::path::{Path, PathBuf};

use crate::model::{Collector, MetricFamily};

const RESOURCES: [&str; 3] = ["cpu", "io", "memory"];

/// Reads `/proc/pressure` (or another directory laid out like it) at every scrape.
#[derive(Default)]
pub struct Pressure {
    dir: Option<PathBuf>,
}

impl Pressure {
    pub fn at(dir: &Path) -> Pressure {
        Pressure {
            dir: Some(dir.to_path_buf()),
        }
    }
}

/// The `total=` of each line (`some avg10=0.00 avg60=0.00 avg300=0.00 total=123`):
/// (kind, microseconds).
pub fn parse(text: &str) -> Vec<(&str, u64)> {
    text.lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let kind = fields.next()?;
            let total = fields.find_map(|f| f.strip_prefix("total="))?;
            Some((kind, total.parse().ok()?))
        })
        .collect()
}

impl Collector for Pressure {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
        let dir = self.dir.as_deref().unwrap_or(Path::new("/proc/pressure"));
        let mut f = MetricFamily::of(&metric_names::host::PRESSURE_STALLED_SECONDS_TOTAL);
        for r in RESOURCES {
            // A kernel without PSI (or booted with psi=0) has no such file, or refuses
            // to read it: nothing to export for it.
            let Ok(text) = std::fs::read_to_string(dir.join(r)) else {
                continue;
            };
            for (kind, us) in parse(&text) {
                f.scalar(&[("resource", r), ("kind", kind)], us as f64 / 1e6);
            }
        }
        out.push(f);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_of_every_line_in_seconds() {
        let dir = temp_dir();
        std::fs::write(
            dir.join("cpu"),
            "some avg10=1.42 avg60=3.45 avg300=3.69 total=13504973046\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        std::fs::write(dir.join("io"), "some avg10=0.00 total=12\nfull total=x\n").unwrap();
        let mut out = Vec::new();
        Pressure::at(&dir).collect(&mut out).unwrap();
        let text = crate::exporter::render(&out).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            text.contains(
                "stornet_pressure_stalled_seconds_total{resource=\"cpu\",kind=\"some\"} 13504.973046\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("{resource=\"cpu\",kind=\"full\"} 0\n"),
            "{text}"
        );
        // A malformed line is left out, the rest kept; no file, no series.
        assert!(
            text.contains("{resource=\"io\",kind=\"some\"} 0.000012\n"),
            "{text}"
        );
        assert!(!text.contains("resource=\"memory\""), "{text}");
        assert_eq!(
            text.matches("stornet_pressure_stalled_seconds_total{")
                .count(),
            3
        );
    }

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("stornet-pressure-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
