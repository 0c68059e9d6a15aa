//! What Ceph says about itself: the mgr's exporter (`/metrics` on the mon host) and an OSD's
//! own performance counters over its admin socket (`perf dump`, no mgr in between).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::CephLab;
use crate::metrics::{self, Sample};

impl CephLab {
    /// One scrape of the mgr's exporter, from inside the mon host's namespace.
    pub fn mgr_scrape(&self) -> Result<Vec<Sample>> {
        let addr = self.mgr_metrics_addr();
        let (code, body) = crate::netns::in_namespace(&self.mon_host().ns.path(), || {
            metrics::http_get(addr, "/metrics")
        })?;
        if code != 200 {
            bail!("the mgr's /metrics answered {code}: {body}");
        }
        metrics::parse(&body)
    }

    /// `perf dump` of OSD `id` over its admin socket.
    pub fn osd_perf(&self, id: u32) -> Result<Value> {
        let sock = self.dir.path.join(format!("sock/ceph-osd.{id}.asok"));
        let out = self.cli.run(
            Duration::from_secs(20),
            "ceph",
            &["--admin-daemon", &sock.to_string_lossy(), "perf", "dump"],
        )?;
        serde_json::from_str(&out).with_context(|| format!("perf dump of osd.{id}"))
    }
}

/// The value of the mgr's series `name` for daemon `daemon` (`osd.0`), summed over its other
/// labels; None when the mgr has no such series.
pub fn daemon_value(samples: &[Sample], name: &str, daemon: &str) -> Option<f64> {
    let found: Vec<f64> = samples
        .iter()
        .filter(|s| s.name == name && s.label("ceph_daemon") == Some(daemon))
        .map(|s| s.value)
        .collect();
    (!found.is_empty()).then(|| found.iter().sum())
}

/// The mean of a `_sum`/`_count` pair of daemon `daemon` between two scrapes (seconds for
/// Ceph's latencies); None when nothing was counted in between.
pub fn mean_between(before: &[Sample], after: &[Sample], base: &str, daemon: &str) -> Option<f64> {
    let get = |s: &[Sample], suffix: &str| daemon_value(s, &format!("{base}{suffix}"), daemon);
    let n = get(after, "_count")? - get(before, "_count")?;
    let sum = get(after, "_sum")? - get(before, "_sum")?;
    (n > 0.0).then(|| sum / n)
}

/// The mean of an `{avgcount, sum}` counter (`["bluestore", "commit_lat"]`) of a `perf
/// dump` between two dumps, seconds; None when nothing was counted in between.
pub fn perf_mean_between(before: &Value, after: &Value, path: [&str; 2]) -> Option<f64> {
    let get = |v: &Value, k: &str| v[path[0]][path[1]][k].as_f64();
    let n = get(after, "avgcount")? - get(before, "avgcount")?;
    let sum = get(after, "sum")? - get(before, "sum")?;
    (n > 0.0).then(|| sum / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_between_scrapes_and_dumps() {
        let a = metrics::parse(
            "ceph_osd_op_w_latency_sum{ceph_daemon=\"osd.0\"} 1.0\n\
             ceph_osd_op_w_latency_count{ceph_daemon=\"osd.0\"} 100\n",
        )
        .unwrap();
        let b = metrics::parse(
            "ceph_osd_op_w_latency_sum{ceph_daemon=\"osd.0\"} 3.0\n\
             ceph_osd_op_w_latency_count{ceph_daemon=\"osd.0\"} 200\n",
        )
        .unwrap();
        assert_eq!(
            mean_between(&a, &b, "ceph_osd_op_w_latency", "osd.0"),
            Some(0.02)
        );
        assert_eq!(mean_between(&a, &a, "ceph_osd_op_w_latency", "osd.0"), None);
        assert_eq!(mean_between(&a, &b, "ceph_osd_op_w_latency", "osd.1"), None);
        let d0: Value =
            serde_json::from_str(r#"{"bluestore":{"commit_lat":{"avgcount":10,"sum":0.5}}}"#)
                .unwrap();
        let d1: Value =
            serde_json::from_str(r#"{"bluestore":{"commit_lat":{"avgcount":20,"sum":6.5}}}"#)
                .unwrap();
        assert_eq!(
            perf_mean_between(&d0, &d1, ["bluestore", "commit_lat"]),
            Some(0.6)
        );
    }
}
