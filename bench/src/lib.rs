//! stornet's benchmarks, run by `cargo xtask bench <name>` (as root): each runs stornet and
//! its reference side by side in one run, alternating, and prints ratios. Timing lives here,
//! never in pass/fail tests.

mod agent_scrape;
mod block_overhead;
mod ceph;
mod confusion;
mod diagnosis;
mod diagnosis_ceph;
mod loadgen_vs_fio;
mod multi_host;
mod net_overhead;
mod replication;
mod soak;

use anyhow::Result;
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Bench {
    /// fio on a loop device: no tracing vs stornet-agent vs bpftrace biolatency.
    BlockOverhead,
    /// iperf3 between namespaces with and without the agent.
    NetOverhead,
    /// Scrape time and RSS with many devices and peers.
    AgentScrape,
    /// loadgen against fio on the same target and jobs.
    LoadgenVsFio,
    /// Local-only vs one vs two replicas over veth.
    Replication,
    /// The agent scraped every second for `--minutes` while peers and devices churn.
    Soak,
    /// Faults injected mid-run in the lab: confusion matrix and accuracy of the verdict.
    Diagnosis,
    /// The diagnosis bench on a lab Ceph cluster, judged from the OSDs' op latency.
    DiagnosisCeph,
    /// One coordinated 3-host run against three independent runs at once.
    MultiHost,
    /// rados bench on a lab Ceph cluster with and without the agents on its OSD hosts.
    Ceph,
}

/// Runs one benchmark; `minutes` is the soak's length, `cases` and `reps` the diagnosis
/// benches' selection and repetitions.
pub fn run(bench: Bench, minutes: u64, cases: Option<&str>, reps: usize) -> Result<()> {
    match bench {
        Bench::BlockOverhead => block_overhead::run(),
        Bench::NetOverhead => net_overhead::run(),
        Bench::AgentScrape => agent_scrape::run(),
        Bench::LoadgenVsFio => loadgen_vs_fio::run(),
        Bench::Replication => replication::run(),
        Bench::Soak => soak::run(minutes),
        Bench::Diagnosis => diagnosis::run(cases, reps),
        Bench::DiagnosisCeph => diagnosis_ceph::run(cases, reps),
        Bench::MultiHost => multi_host::run(),
        Bench::Ceph => ceph::run(),
    }
}

/// Median of a non-empty sample (mean of the middle two for even sizes).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The number at `path` in a JSON document (fio's or loadgen's output); NaN where absent.
pub fn json_num(v: &serde_json::Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
