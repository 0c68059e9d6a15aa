//! The agent itself: its probes' state and cost, its maps, scrapes, process and kernel.

use crate::labels::{COLLECTOR, LOCKDOWN, MAP, PROBE, RELEASE, REVISION, VERSION};
use crate::{Metric, counter, gauge, histogram};

pub const PROBE_UP: Metric = gauge(
    "stornet_probe_up",
    "Whether a probe can run (1: loaded, and attached or attached when needed) or is down \
     (0); the log and / say why.",
)
.with_labels(&[PROBE]);
pub const PROBE_ATTACHED: Metric = gauge(
    "stornet_probe_attached",
    "Whether the probe's program is attached to its hook now (1) or not (0): a probe that \
     attaches when needed is 0 while nothing on the host needs it.",
)
.with_labels(&[PROBE]);
pub const KERNEL_INFO: Metric = gauge(
    "stornet_kernel_info",
    "Always 1; the running kernel's release and lockdown mode (none, integrity, \
     confidentiality; unknown without securityfs), which decide what the probes can do.",
)
.with_labels(&[RELEASE, LOCKDOWN]);
pub const SCRAPE_DURATION_SECONDS: Metric = histogram(
    "stornet_agent_scrape_duration_seconds",
    "Time to collect and render /metrics, of scrapes before this one.",
);
pub const SCRAPE_COLLECTOR_DURATION_SECONDS: Metric = gauge(
    "stornet_scrape_collector_duration_seconds",
    "Time the reader took for what this scrape shows (for a reader refreshed in the \
     background, its last read): which one makes /metrics slow.",
)
.with_labels(&[COLLECTOR]);
pub const SCRAPE_COLLECTOR_AGE_SECONDS: Metric = gauge(
    "stornet_scrape_collector_age_seconds",
    "How long before this scrape the reader began the read it shows, for the readers \
     refreshed in the background (network snapshots, block topology) rather than at each \
     scrape: normally under their refresh interval plus one read.",
)
.with_labels(&[COLLECTOR]);
pub const SCRAPE_COLLECTOR_SUCCESS: Metric = gauge(
    "stornet_scrape_collector_success",
    "Whether the reader succeeded in this scrape (1) or failed (0; the log says why): \
     its series are missing from this scrape.",
)
.with_labels(&[COLLECTOR]);
pub const PROBE_RUNS_TOTAL: Metric = counter(
    "stornet_agent_probe_runs_total",
    "Times the kernel ran the probe's eBPF program, counted while BPF statistics are on \
     (kept on with run_statistics, else only during the agent's sampling windows).",
)
.with_labels(&[PROBE]);
pub const PROBE_RUN_SECONDS_TOTAL: Metric = counter(
    "stornet_agent_probe_run_seconds_total",
    "CPU time the kernel spent in the probe's eBPF program (while BPF statistics are on).",
)
.with_labels(&[PROBE]);
pub const PROBE_MISSES_TOTAL: Metric = counter(
    "stornet_agent_probe_misses_total",
    "Events the kernel skipped the probe's eBPF program for, because the program was \
     already running on that CPU (e.g. an IO completing in an interrupt while the probe \
     handled another): what they would have counted is missing.",
)
.with_labels(&[PROBE]);
pub const BPF_STATS_ENABLED: Metric = gauge(
    "stornet_agent_bpf_stats_enabled",
    "1 when the kernel keeps BPF program statistics (run counts and times), else 0.",
);
pub const PROBE_SAMPLED_SECONDS_PER_RUN: Metric = gauge(
    "stornet_agent_probe_sampled_seconds_per_run",
    "Mean time the kernel spent in one run of the probe's eBPF program, over the last \
     window in which the agent turned BPF run-time statistics on to measure it.",
)
.with_labels(&[PROBE]);
pub const PROBE_SAMPLED_RUNS_PER_SECOND: Metric = gauge(
    "stornet_agent_probe_sampled_runs_per_second",
    "Runs of the probe's eBPF program per second over the last sampling window.",
)
.with_labels(&[PROBE]);
pub const PROBE_SAMPLE_END_TIME_SECONDS: Metric = gauge(
    "stornet_agent_probe_sample_end_time_seconds",
    "When the last sampling window of BPF run-time statistics ended (Unix time).",
);
pub const MAP_ENTRIES: Metric = gauge(
    "stornet_agent_map_entries",
    "Entries in the eBPF hash map now.",
)
.with_labels(&[MAP]);
pub const MAP_MAX_ENTRIES: Metric = gauge(
    "stornet_agent_map_max_entries",
    "Capacity of the eBPF hash map; a full map cannot record new keys.",
)
.with_labels(&[MAP]);
pub const START_TIME_SECONDS: Metric = gauge(
    "stornet_agent_start_time_seconds",
    "When the agent started, in seconds since the Unix epoch.",
);
pub const BUILD_INFO: Metric = gauge(
    "stornet_agent_build_info",
    "Always 1; the version and revision (git commit) labels say which agent this is.",
)
.with_labels(&[VERSION, REVISION]);

pub const ALL: &[Metric] = &[
    PROBE_UP,
    PROBE_ATTACHED,
    KERNEL_INFO,
    SCRAPE_DURATION_SECONDS,
    SCRAPE_COLLECTOR_DURATION_SECONDS,
    SCRAPE_COLLECTOR_AGE_SECONDS,
    SCRAPE_COLLECTOR_SUCCESS,
    PROBE_RUNS_TOTAL,
    PROBE_RUN_SECONDS_TOTAL,
    PROBE_MISSES_TOTAL,
    BPF_STATS_ENABLED,
    PROBE_SAMPLED_SECONDS_PER_RUN,
    PROBE_SAMPLED_RUNS_PER_SECOND,
    PROBE_SAMPLE_END_TIME_SECONDS,
    MAP_ENTRIES,
    MAP_MAX_ENTRIES,
    START_TIME_SECONDS,
    BUILD_INFO,
];
