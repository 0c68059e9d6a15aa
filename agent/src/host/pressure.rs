//! Pressure stall information (`/proc/pressure/{cpu,io,memory}`): how long tasks waited for
//! a resource. A host whose CPU is starved acknowledges late, and its peers' retransmit
//! timers fire with nothing lost; the analysis tells that apart from congestion with this.
//! With `pressure.cgroup` the agent reads one cgroup's pressure instead (a storage daemon's
//! slice or pod): a CPU limit that throttles the daemon shows there, not in the host's.

use std::path::{Path, PathBuf};

use crate::model::{Collector, MetricFamily};
use metric_names::labels::{KIND, RESOURCE};

const RESOURCES: [&str; 3] = ["cpu", "io", "memory"];

/// Reads `/proc/pressure` (or another directory laid out like it) or a cgroup v2 directory's
/// `<resource>.pressure` files at every scrape.
#[derive(Default)]
pub struct Pressure {
    dir: Option<PathBuf>,
    cgroup: bool,
}

impl Pressure {
    pub fn at(dir: &Path) -> Pressure {
        Pressure {
            dir: Some(dir.to_path_buf()),
            cgroup: false,
        }
    }

    /// The pressure of cgroup v2 directory `dir`.
    pub fn of_cgroup(dir: &Path) -> Pressure {
        Pressure {
            dir: Some(dir.to_path_buf()),
            cgroup: true,
        }
    }

    fn file(&self, resource: &str) -> PathBuf {
        let dir = self.dir.as_deref().unwrap_or(Path::new("/proc/pressure"));
        if self.cgroup {
            dir.join(format!("{resource}.pressure"))
        } else {
            dir.join(resource)
        }
    }
}

/// Why `dir` cannot serve as `pressure.cgroup`, if it cannot.
pub fn check_cgroup(dir: &Path) -> Result<(), String> {
    if !dir.is_absolute() {
        return Err(format!("{} is not an absolute path", dir.display()));
    }
    let file = Pressure::of_cgroup(dir).file("cpu");
    match std::fs::read_to_string(&file) {
        Ok(text) if !parse(&text).is_empty() => Ok(()),
        Ok(_) => Err(format!("{} holds no pressure totals", file.display())),
        Err(e) => Err(format!(
            "cannot read {} ({e}): not a cgroup v2 directory, or the kernel has no PSI",
            file.display()
        )),
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
    fn name(&self) -> &'static str {
        "pressure"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
        let mut f = MetricFamily::of(&metric_names::host::PRESSURE_STALLED_SECONDS_TOTAL);
        for r in RESOURCES {
            // A kernel without PSI (or booted with psi=0) has no such file, or refuses
            // to read it: nothing to export for it.
            let Ok(text) = std::fs::read_to_string(self.file(r)) else {
                continue;
            };
            for (kind, us) in parse(&text) {
                f.scalar(&[(RESOURCE, r), (KIND, kind)], us as f64 / 1e6);
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
        let text = crate::exposition::text::render(&out).unwrap();
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

    #[test]
    fn a_cgroup_directory_has_resource_dot_pressure_files() {
        let dir = temp_dir().join("cgroup");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(check_cgroup(&dir).unwrap_err().contains("cpu.pressure"));
        assert!(
            check_cgroup(Path::new("relative/slice"))
                .unwrap_err()
                .contains("absolute")
        );
        std::fs::write(dir.join("cpu.pressure"), "nothing here\n").unwrap();
        assert!(
            check_cgroup(&dir)
                .unwrap_err()
                .contains("no pressure totals")
        );
        std::fs::write(
            dir.join("cpu.pressure"),
            "some avg10=29.35 avg60=5.72 avg300=1.21 total=3576488\n",
        )
        .unwrap();
        assert_eq!(check_cgroup(&dir), Ok(()));
        let mut out = Vec::new();
        Pressure::of_cgroup(&dir).collect(&mut out).unwrap();
        let text = crate::exposition::text::render(&out).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            text.contains("{resource=\"cpu\",kind=\"some\"} 3.576488\n"),
            "{text}"
        );
    }

    fn temp_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "stornet-pressure-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
