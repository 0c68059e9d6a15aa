//! stornet's judgement of a window of the lab's Ceph cluster, as an operator would ask for
//! it: `stornet analyze --prometheus … --app-latency ceph` against the lab's Prometheus, run
//! on the mon host (where Prometheus listens).

use anyhow::{Context, Result, ensure};

use super::CephLab;

impl CephLab {
    /// stornet's report on `start..end` (Unix seconds) in `step_s` steps, judged by the OSDs'
    /// op latency, in `format` (`text` or `json`).
    pub fn analyze(&self, start: f64, end: f64, step_s: u64, format: &str) -> Result<String> {
        let prom = self
            .prometheus
            .as_ref()
            .context("the lab runs no Prometheus")?;
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.mon_host().ns.name])
            .arg(crate::bins::path("stornet"))
            .args([
                "analyze",
                &format!("--prometheus=http://{}", prom.addr),
                &format!("--start={start}"),
                &format!("--end={end}"),
                &format!("--step={step_s}s"),
                "--app-latency=ceph",
                &format!("--format={format}"),
            ])
            .output()
            .context("running stornet analyze")?;
        ensure!(
            out.status.success(),
            "stornet analyze: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        String::from_utf8(out.stdout).context("stornet's report is not UTF-8")
    }
}
