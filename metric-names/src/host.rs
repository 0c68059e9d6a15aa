//! The host's resources (`stornet_pressure_*`, `stornet_cpu_throttled_*`).

use crate::labels::{KIND, RESOURCE};
use crate::{Metric, counter};

pub const PRESSURE_STALLED_SECONDS_TOTAL: Metric = counter(
    "stornet_pressure_stalled_seconds_total",
    "Time some non-idle tasks (kind=some) or all of them (kind=full) were stalled waiting \
     for a resource (cpu, io, memory): the kernel's pressure stall information, /proc/pressure.",
)
.with_labels(&[RESOURCE, KIND]);

pub const CPU_THROTTLED_SECONDS_TOTAL: Metric = counter(
    "stornet_cpu_throttled_seconds_total",
    "Time the tasks of the cgroup in [pressure] could not run because its CPU quota was spent \
     (cpu.max, or cpu.cfs_quota_us on the v1 hierarchy), summed over the CPUs it was held off: \
     the throttled time of the cgroup's cpu.stat.",
);

pub const ALL: &[Metric] = &[PRESSURE_STALLED_SECONDS_TOTAL, CPU_THROTTLED_SECONDS_TOTAL];
