//! The host's resources (`stornet_pressure_*`).

use crate::labels::{KIND, RESOURCE};
use crate::{Metric, counter};

pub const PRESSURE_STALLED_SECONDS_TOTAL: Metric = counter(
    "stornet_pressure_stalled_seconds_total",
    "Time some non-idle tasks (kind=some) or all of them (kind=full) were stalled waiting \
     for a resource (cpu, io, memory): the kernel's pressure stall information, /proc/pressure.",
)
.with_labels(&[RESOURCE, KIND]);

pub const ALL: &[Metric] = &[PRESSURE_STALLED_SECONDS_TOTAL];
