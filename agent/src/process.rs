//! The standard `process_*` metrics (CPU, memory, open files, threads, start time) from the
//! prometheus crate's process collector, so dashboards made for any exporter show the agent.

use std::sync::OnceLock;

use prometheus::core::Collector as _;
use prometheus::process_collector::ProcessCollector;
use prometheus::proto::MetricType;

use crate::model::{Family, Kind};

/// The process collector's families in the agent's model (they are all counters and gauges).
pub fn families() -> Vec<Family> {
    static COLLECTOR: OnceLock<ProcessCollector> = OnceLock::new();
    let collector = COLLECTOR.get_or_init(ProcessCollector::for_self);
    collector
        .collect()
        .iter()
        .filter_map(|mf| {
            let kind = match mf.get_field_type() {
                MetricType::COUNTER => Kind::Counter,
                MetricType::GAUGE => Kind::Gauge,
                _ => return None,
            };
            let mut f = Family::new(mf.name(), mf.help(), kind);
            for m in mf.get_metric() {
                let v = match kind {
                    Kind::Counter => m.get_counter().get_value(),
                    _ => m.get_gauge().get_value(),
                };
                f.scalar(&[], v);
            }
            Some(f)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Checked against the process as procfs shows it, read here without the crate.
    #[test]
    fn reports_this_process() {
        let fams = super::families();
        let get = |name: &str| match &fams.iter().find(|f| f.name == name).unwrap().series[0].value
        {
            crate::model::Value::Scalar(v) => *v,
            _ => panic!("{name} is not a scalar"),
        };
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |k: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let rss = get("process_resident_memory_bytes");
        let vm_rss = field("VmRSS:") * 1024.0;
        assert!(
            (rss - vm_rss).abs() < vm_rss * 0.5,
            "process_resident_memory_bytes {rss} vs VmRSS {vm_rss}"
        );
        let threads = get("process_threads");
        assert!(
            threads >= 1.0 && threads <= field("Threads:") + 64.0,
            "{threads}"
        );
        let fds = get("process_open_fds");
        let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as f64;
        assert!((fds - open).abs() <= 8.0, "{fds} vs {open}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = get("process_start_time_seconds");
        assert!(start <= now && start > now - 3600.0, "{start}");
        assert_eq!(
            fams.iter()
                .find(|f| f.name == "process_cpu_seconds_total")
                .unwrap()
                .kind,
            crate::model::Kind::Counter
        );
    }
}
