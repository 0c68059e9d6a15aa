//! The standard `process_*` metrics (CPU, memory, open files, threads, start time) from the
//! prometheus crate's process collector, so dashboards made for any exporter show the agent.
//! The crate counts CPU time in whole seconds; an agent meant to cost a fraction of a CPU
//! needs the clock ticks, so `process_cpu_seconds_total` is read from procfs here, as Go's
//! client does.

use std::sync::OnceLock;

use prometheus::core::Collector as _;
use prometheus::process_collector::ProcessCollector;
use prometheus::proto::MetricType;

use crate::model::{MetricFamily, MetricKind};

/// The process collector's families in the agent's model (they are all counters and gauges).
pub fn families() -> Vec<MetricFamily> {
    static COLLECTOR: OnceLock<ProcessCollector> = OnceLock::new();
    let collector = COLLECTOR.get_or_init(ProcessCollector::for_self);
    collector
        .collect()
        .iter()
        .filter_map(|mf| {
            let kind = match mf.get_field_type() {
                MetricType::COUNTER => MetricKind::Counter,
                MetricType::GAUGE => MetricKind::Gauge,
                _ => return None,
            };
            let mut f = MetricFamily::new(mf.name(), mf.help(), kind);
            for m in mf.get_metric() {
                let v = match kind {
                    MetricKind::Counter if f.name == "process_cpu_seconds_total" => {
                        cpu_seconds().unwrap_or(m.get_counter().get_value())
                    }
                    MetricKind::Counter => m.get_counter().get_value(),
                    _ => m.get_gauge().get_value(),
                };
                f.scalar(&[], v);
            }
            Some(f)
        })
        .collect()
}

/// User and system CPU time of this process, in seconds at clock-tick resolution.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (utime, stime) = cpu_ticks(&stat)?;
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some((utime + stime) as f64 / tick.max(1) as f64)
}

/// utime and stime (fields 14 and 15) of a /proc/PID/stat line; the command name in
/// parentheses may hold spaces, so fields are counted after its closing parenthesis.
fn cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ")" come field 3 (state) onwards: utime is field 14 → index 11.
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_cpu_ticks_past_odd_command_names() {
        let stat = "1234 (tokio (rt) 1) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 4 0 100";
        assert_eq!(super::cpu_ticks(stat), Some((250, 31)));
        assert_eq!(super::cpu_ticks("garbage"), None);
    }

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
        // Burn CPU until getrusage(2) counts 0.3 s; the counter then matches it to the clock
        // tick, not to the whole second.
        let rusage = || {
            // SAFETY: getrusage with a valid pointer to a plain struct.
            let u = unsafe {
                let mut u: libc::rusage = std::mem::zeroed();
                assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
                u
            };
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            secs(u.ru_utime) + secs(u.ru_stime)
        };
        let mut x = 0u64;
        while rusage() < 0.3 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        let fams = super::families();
        let cpu = match &fams
            .iter()
            .find(|f| f.name == "process_cpu_seconds_total")
            .unwrap()
            .series[0]
            .value
        {
            crate::model::Value::Scalar(v) => *v,
            _ => unreachable!(),
        };
        let rusage = rusage();
        assert!(
            (rusage - cpu) > -0.02 && (rusage - cpu) < 0.05,
            "process_cpu_seconds_total {cpu} vs getrusage {rusage}"
        );
        assert_eq!(
            fams.iter()
                .find(|f| f.name == "process_cpu_seconds_total")
                .unwrap()
                .kind,
            crate::model::MetricKind::Counter
        );
    }
}
