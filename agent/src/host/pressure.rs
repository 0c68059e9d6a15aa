//! Pressure stall information (`/proc/pressure/{cpu,io,memory}`): how long tasks waited for
//! a resource. A host whose CPU is starved acknowledges late, and its peers' retransmit
//! timers fire with nothing lost; the analysis tells that apart from congestion with this.
//! With `pressure.cgroup` the agent reads one cgroup's pressure instead (a storage daemon's
//! slice or pod): a CPU limit that throttles the daemon shows there, not in the host's.
//! The cgroup's `cpu.stat` then says how long the limit itself held the daemon off the CPU:
//! zero until the quota bites, where the daemon's pressure on a busy host is never zero.

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
    /// The cgroup directory whose `cpu.stat` counts its quota's throttling.
    cpu_stat: Option<PathBuf>,
}

impl Pressure {
    pub fn at(dir: &Path) -> Pressure {
        Pressure {
            dir: Some(dir.to_path_buf()),
            ..Pressure::default()
        }
    }

    /// The pressure of cgroup v2 directory `dir`.
    pub fn of_cgroup(dir: &Path) -> Pressure {
        Pressure {
            dir: Some(dir.to_path_buf()),
            cgroup: true,
            cpu_stat: Some(dir.to_path_buf()),
        }
    }

    /// Reads the throttled time from `dir`'s `cpu.stat` (the group of the v1 cpu hierarchy
    /// that holds the quota, where the v2 group has no cpu controller).
    pub fn throttled_from(mut self, dir: &Path) -> Pressure {
        self.cpu_stat = Some(dir.to_path_buf());
        self
    }

    /// The collector `[pressure]` asks for: the host's pressure or `cgroup`'s, and the
    /// throttled time of `cpu_cgroup`, else of `cgroup`.
    pub fn configured(cgroup: Option<&Path>, cpu_cgroup: Option<&Path>) -> Pressure {
        let p = cgroup.map_or_else(Pressure::default, Pressure::of_cgroup);
        match cpu_cgroup {
            Some(dir) => p.throttled_from(dir),
            None => p,
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

/// Why `dir` cannot serve as `pressure.cpu_cgroup`, if it cannot.
pub fn check_cpu_cgroup(dir: &Path) -> Result<(), String> {
    if !dir.is_absolute() {
        return Err(format!("{} is not an absolute path", dir.display()));
    }
    let file = dir.join("cpu.stat");
    match std::fs::read_to_string(&file) {
        Ok(text) if throttled_seconds(&text).is_some() => Ok(()),
        Ok(_) => Err(format!(
            "{} holds no throttled_usec or throttled_time: the cgroup has no cpu controller",
            file.display()
        )),
        Err(e) => Err(format!(
            "cannot read {} ({e}): not a cgroup with the cpu controller",
            file.display()
        )),
    }
}

/// The throttled time of a `cpu.stat`, in seconds: `throttled_usec` (cgroup v2) or
/// `throttled_time` (nanoseconds, the v1 cpu hierarchy).
pub fn throttled_seconds(text: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        let scale = match key {
            "throttled_usec" => 1e6,
            "throttled_time" => 1e9,
            _ => return None,
        };
        Some(value.trim().parse::<u64>().ok()? as f64 / scale)
    })
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
        // A group without the cpu controller (a v2 group on a host whose cpu controller is
        // on the v1 hierarchy) has no throttled time: nothing to export.
        if let Some(dir) = &self.cpu_stat
            && let Ok(text) = std::fs::read_to_string(dir.join("cpu.stat"))
            && let Some(s) = throttled_seconds(&text)
        {
            let mut f = MetricFamily::of(&metric_names::host::CPU_THROTTLED_SECONDS_TOTAL);
            f.scalar(&[], s);
            out.push(f);
        }
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
        let text = rendered(&Pressure::at(&dir));
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
        let text = rendered(&Pressure::of_cgroup(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            text.contains("{resource=\"cpu\",kind=\"some\"} 3.576488\n"),
            "{text}"
        );
    }

    #[test]
    fn throttled_time_of_either_hierarchy_in_seconds() {
        let v2 = "usage_usec 907\nnr_periods 12\nnr_throttled 3\nthrottled_usec 2500000\n";
        assert_eq!(throttled_seconds(v2), Some(2.5));
        let v1 = "nr_periods 40\nnr_throttled 38\nthrottled_time 22412345678\n";
        assert_eq!(throttled_seconds(v1), Some(22.412345678));
        assert_eq!(throttled_seconds("usage_usec 907\nuser_usec 5\n"), None);
        assert_eq!(throttled_seconds("throttled_usec x\n"), None);

        let dir = temp_dir().join("cpu-group");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(check_cpu_cgroup(&dir).unwrap_err().contains("cpu.stat"));
        assert!(
            check_cpu_cgroup(Path::new("cpu/osd"))
                .unwrap_err()
                .contains("absolute")
        );
        std::fs::write(dir.join("cpu.stat"), "usage_usec 907\n").unwrap();
        assert!(
            check_cpu_cgroup(&dir)
                .unwrap_err()
                .contains("no cpu controller")
        );
        std::fs::write(dir.join("cpu.stat"), v1).unwrap();
        assert_eq!(check_cpu_cgroup(&dir), Ok(()));
        let text = rendered(&Pressure::at(&dir).throttled_from(&dir));
        assert!(
            text.contains("\nstornet_cpu_throttled_seconds_total 22.412345678\n"),
            "{text}"
        );
        // A v2 group without the cpu controller: pressure, no throttled time.
        std::fs::write(dir.join("cpu.stat"), "usage_usec 907\n").unwrap();
        std::fs::write(dir.join("cpu.pressure"), "some total=1\n").unwrap();
        let text = rendered(&Pressure::of_cgroup(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!text.contains("stornet_cpu_throttled"), "{text}");
        assert!(text.contains("kind=\"some\"} 0.000001\n"), "{text}");
    }

    fn rendered(p: &Pressure) -> String {
        let mut out = Vec::new();
        p.collect(&mut out).unwrap();
        crate::exposition::text::render(&out).unwrap()
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
