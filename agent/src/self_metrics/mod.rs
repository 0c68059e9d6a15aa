//! What the agent costs and how full its maps are: per-probe run count and run time (the
//! kernel's BPF program statistics, and `stats_sample`'s short windows with them on), map
//! fill (`map_fill`, a reader of its own), the standard process metrics (`process`), and
//! scrape duration.

pub mod map_fill;
pub mod process;
pub mod stats_sample;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{debug, info};

use crate::collectors::probes as all_probes;
use crate::model::{HistogramValue, MetricFamily};
use crate::probes::Probes;
use metric_names::labels::{LOCKDOWN, PROBE, RELEASE, REVISION, VERSION};

/// Upper bounds of the scrape duration histogram, in seconds.
const SCRAPE_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

pub struct SelfMetrics {
    /// Keeps the kernel's run-time statistics on while the agent runs (closing it turns them
    /// off again, unless someone else also asked for them).
    stats_fd: Option<OwnedFd>,
    start_time: f64,
    scrapes: Mutex<HistogramValue>,
    /// The kernel's release and lockdown mode, read at start.
    kernel: (String, crate::kernel::Lockdown),
    /// The probes' cost per run, sampled now and then when statistics are not kept on.
    sampler: Option<stats_sample::Sampler>,
}

impl SelfMetrics {
    /// When the agent started (Unix seconds): when its counters and histograms began.
    pub fn start_time(&self) -> f64 {
        self.start_time
    }

    /// Call right after the probes are loaded, before collectors take maps out of the object.
    /// With `run_statistics` the kernel's BPF run-time statistics stay on while the agent
    /// runs; otherwise they are sampled as `config.sample_statistics_*` say.
    pub fn new(probes: &Probes, config: &crate::config::ProbesConfig) -> SelfMetrics {
        let run_statistics = config.run_statistics;
        let sampler = (probes.ebpf.is_some()
            && !run_statistics
            && config.sample_statistics_every_seconds > 0)
            .then(|| {
                stats_sample::Sampler::start(
                    program_fds(probes),
                    Duration::from_secs(config.sample_statistics_every_seconds),
                    Duration::from_secs(config.sample_statistics_seconds),
                )
            });
        let stats_fd = if probes.ebpf.is_some() && run_statistics {
            match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    info!(
                        reason = %e,
                        "BPF run-time statistics not enabled by the agent (needs CAP_SYS_ADMIN, \
                         or sysctl kernel.bpf_stats_enabled=1)"
                    );
                    None
                }
            }
        } else {
            None
        };
        SelfMetrics {
            stats_fd,
            start_time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            scrapes: Mutex::new(HistogramValue {
                buckets: SCRAPE_BUCKETS.iter().map(|&le| (le, 0)).collect(),
                count: 0,
                sum: 0.0,
            }),
            kernel: (crate::kernel::release(), crate::kernel::lockdown()),
            sampler,
        }
    }

    /// Records how long one scrape of /metrics took (collect and render).
    pub fn observe_scrape(&self, d: Duration) {
        let s = d.as_secs_f64();
        let mut h = self.scrapes.lock().expect("scrape histogram");
        for (le, n) in &mut h.buckets {
            if s <= *le {
                *n += 1;
            }
        }
        h.count += 1;
        h.sum += s;
    }

    pub fn collect(&self, probes: &Probes, out: &mut Vec<MetricFamily>) {
        self.probe_stats(probes, out);
        if let Some(s) = &self.sampler {
            s.collect(out);
        }
        process(out, self.start_time);
        let mut f = MetricFamily::of(&metric_names::agent::SCRAPE_DURATION_SECONDS);
        f.histogram(&[], self.scrapes.lock().expect("scrape histogram").clone());
        out.push(f);
        let mut k = MetricFamily::of(&metric_names::agent::KERNEL_INFO);
        k.scalar(
            &[
                (RELEASE, &self.kernel.0),
                (LOCKDOWN, self.kernel.1.as_str()),
            ],
            1.0,
        );
        out.push(k);
    }

    fn probe_stats(&self, probes: &Probes, out: &mut Vec<MetricFamily>) {
        let mut runs = MetricFamily::of(&metric_names::agent::PROBE_RUNS_TOTAL);
        let mut time = MetricFamily::of(&metric_names::agent::PROBE_RUN_SECONDS_TOTAL);
        let mut misses = MetricFamily::of(&metric_names::agent::PROBE_MISSES_TOTAL);
        let mut on = MetricFamily::of(&metric_names::agent::BPF_STATS_ENABLED);
        let sampling = self.sampler.as_ref().is_some_and(|s| s.active());
        let enabled = self.stats_fd.is_some() || sampling || bpf_stats_sysctl();
        on.scalar(&[], if enabled { 1.0 } else { 0.0 });
        if let Some(ebpf) = &probes.ebpf {
            for spec in all_probes().filter(|p| probes.is_up(p.name)) {
                let Some(program) = ebpf.program(spec.program) else {
                    continue;
                };
                // One read of the kernel's program info gives all three.
                let info = program
                    .fd()
                    .map_err(anyhow::Error::from)
                    .and_then(|fd| crate::kernel::prog_info::prog_info(fd.as_fd()));
                match info {
                    Ok(info) => {
                        let l = [(PROBE, spec.name)];
                        runs.scalar(&l, info.run_cnt as f64);
                        time.scalar(&l, info.run_time_ns as f64 / 1e9);
                        // Counted by the kernel whether or not statistics are on.
                        misses.scalar(&l, info.recursion_misses as f64);
                    }
                    Err(e) => debug!(probe = spec.name, error = %e, "reading program info failed"),
                }
            }
        }
        out.extend([on, runs, time, misses]);
    }
}

/// A copy of the program fd of each probe that is up, for the statistics sampler.
fn program_fds(probes: &Probes) -> Vec<(&'static str, OwnedFd)> {
    let Some(ebpf) = &probes.ebpf else {
        return Vec::new();
    };
    all_probes()
        .filter(|p| probes.is_up(p.name))
        .filter_map(|spec| {
            let fd = ebpf.program(spec.program)?.fd().ok()?;
            Some((spec.name, fd.as_fd().try_clone_to_owned().ok()?))
        })
        .collect()
}

/// Whether BPF run-time statistics are on through the sysctl (the agent's own request does
/// not show there).
fn bpf_stats_sysctl() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// The standard process metrics, start time and version of this process.
fn process(out: &mut Vec<MetricFamily>, start_time: f64) {
    out.extend(process::families());
    let mut start = MetricFamily::of(&metric_names::agent::START_TIME_SECONDS);
    start.scalar(&[], start_time);
    let mut build = MetricFamily::of(&metric_names::agent::BUILD_INFO);
    build.scalar(
        &[
            (VERSION, env!("CARGO_PKG_VERSION")),
            (REVISION, env!("STORNET_REVISION")),
        ],
        1.0,
    );
    out.extend([start, build]);
}
