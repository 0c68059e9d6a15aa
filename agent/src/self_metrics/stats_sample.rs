//! The probes' cost per run without leaving BPF run-time statistics on: every few minutes the
//! agent turns them on for a few seconds (a `BPF_ENABLE_STATS` file descriptor, held only
//! that long) and keeps what its programs cost over that window. Statistics add two clock
//! reads to every run of every BPF program on the host while they are on, so the default is
//! a 5 s sample every 10 minutes: under 1% of the time.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{debug, info};

use crate::model::MetricFamily;
use metric_names::labels::PROBE;

/// What each probe's program cost over one sampling window.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// When the window ended, in seconds since the Unix epoch.
    pub end: f64,
    pub seconds: f64,
    /// (probe, runs, run time in ns) over the window.
    pub probes: Vec<(&'static str, u64, u64)>,
}

/// The latest sample, filled by a background thread.
#[derive(Clone, Default)]
pub struct Sampler {
    last: Arc<Mutex<Option<Sample>>>,
    /// Whether a window is open (statistics on) now.
    active: Arc<AtomicBool>,
}

impl Sampler {
    /// Samples `programs` (probe name, program fd) for `length` every `every`, from a thread
    /// that lives as long as the process.
    pub fn start(
        programs: Vec<(&'static str, OwnedFd)>,
        every: Duration,
        length: Duration,
    ) -> Sampler {
        let sampler = Sampler::default();
        let (last, active) = (sampler.last.clone(), sampler.active.clone());
        let spawned = std::thread::Builder::new()
            .name("bpf-stats-sample".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    let result = sample(&programs, length, &active);
                    active.store(false, Ordering::Relaxed);
                    match result {
                        Ok(s) => *last.lock().expect("stats sample") = Some(s),
                        Err(e) => {
                            info!(
                                reason = %e,
                                "BPF run-time statistics cannot be sampled (needs CAP_SYS_ADMIN); \
                                 probe cost per run stays unknown"
                            );
                            return;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            debug!(error = %e, "no statistics sampling thread");
        }
        sampler
    }

    /// Whether the sampler holds BPF run-time statistics on right now.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// `stornet_agent_probe_sampled_*` from the latest sample, if any.
    pub fn collect(&self, out: &mut Vec<MetricFamily>) {
        let Some(s) = self.last.lock().expect("stats sample").clone() else {
            return;
        };
        let mut per_run = MetricFamily::of(&metric_names::agent::PROBE_SAMPLED_SECONDS_PER_RUN);
        let mut rate = MetricFamily::of(&metric_names::agent::PROBE_SAMPLED_RUNS_PER_SECOND);
        for (probe, runs, ns) in &s.probes {
            let l = [(PROBE, *probe)];
            if *runs > 0 {
                per_run.scalar(&l, *ns as f64 / 1e9 / *runs as f64);
            }
            rate.scalar(&l, *runs as f64 / s.seconds);
        }
        let mut end = MetricFamily::of(&metric_names::agent::PROBE_SAMPLE_END_TIME_SECONDS);
        end.scalar(&[], s.end);
        out.extend([per_run, rate, end]);
    }
}

/// One window: statistics on, run counts and times before and after, statistics off.
fn sample(
    programs: &[(&'static str, OwnedFd)],
    length: Duration,
    active: &AtomicBool,
) -> anyhow::Result<Sample> {
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)?;
    active.store(true, Ordering::Relaxed);
    let read = || -> Vec<Option<(u64, u64)>> {
        programs
            .iter()
            .map(|(_, fd)| {
                crate::kernel::prog_info::prog_info(fd.as_fd())
                    .ok()
                    .map(|i| (i.run_cnt, i.run_time_ns))
            })
            .collect()
    };
    let before = read();
    let t0 = std::time::Instant::now();
    std::thread::sleep(length);
    let after = read();
    let seconds = t0.elapsed().as_secs_f64();
    drop(stats);
    let probes = programs
        .iter()
        .zip(before.iter().zip(&after))
        .filter_map(|((name, _), (b, a))| {
            let (b, a) = ((*b)?, (*a)?);
            Some((*name, a.0.saturating_sub(b.0), a.1.saturating_sub(b.1)))
        })
        .collect();
    Ok(Sample {
        end: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64(),
        seconds,
        probes,
    })
}
