//! The block path (`stornet_block_*`), per whole disk and op.

use crate::labels::{
    self, DEVICE, ERROR, KIND, LIMIT, OP, PARENT, PEER, REASON, SOURCE, TRANSPORT,
};
use crate::{Metric, counter, gauge, histogram};

pub const QUEUE_SECONDS: Metric = histogram(
    "stornet_block_queue_seconds",
    "Time from a request's start (created, or merged into) to its dispatch to the driver.",
)
.with_labels(&[DEVICE, OP]);
pub const SERVICE_SECONDS: Metric = histogram(
    "stornet_block_service_seconds",
    "Time from a request's dispatch to the driver to its completion (device service time).",
)
.with_labels(&[DEVICE, OP]);
pub const IO_SIZE_BYTES: Metric = histogram(
    "stornet_block_io_size_bytes",
    "Bytes of each completed request.",
)
.with_labels(&[DEVICE, OP]);
pub const REQUEUES_TOTAL: Metric = counter(
    "stornet_block_requeues_total",
    "Requests handed back to the block layer to be dispatched again.",
)
.with_labels(&[DEVICE, OP]);
pub const INFLIGHT: Metric = gauge(
    "stornet_block_inflight",
    "Requests dispatched to the driver and not yet completed.",
)
.with_labels(&[DEVICE]);
pub const INFLIGHT_AT_ISSUE: Metric = histogram(
    "stornet_block_inflight_at_issue",
    "Requests in flight on the device when each request was dispatched, itself included.",
)
.with_labels(&[DEVICE]);
pub const QUEUE_LIMIT: Metric = gauge(
    "stornet_block_queue_limit",
    "Queue limits from sysfs: nr_requests (per hardware queue) and device queue_depth.",
)
.with_labels(&[DEVICE, LIMIT]);
pub const ERRORS_TOTAL: Metric = counter(
    "stornet_block_errors_total",
    "Requests completed with an error, by the kernel's block status.",
)
.with_labels(&[DEVICE, OP, ERROR]);
pub const UNRECORDED_TOTAL: Metric = counter(
    "stornet_block_unrecorded_total",
    "Block events the probes could not record, by reason.",
)
.with_labels(&[REASON]);
pub const DISPATCH_STAMPS_TOTAL: Metric = counter(
    "stornet_block_dispatch_stamps_total",
    "Timed requests by where their dispatch stamp came from: the kernel's own, the issue \
     probe's (where the queue keeps no statistics, or when configured), or a bio of a \
     bio-based device (dm, md), timed from entering the device.",
)
.with_labels(&[SOURCE]);
pub const DEVICE_INFO: Metric = gauge(
    "stornet_block_device_info",
    "Block devices and what they sit on, from sysfs: one series per (device, parent), value 1; \
     parent is empty for a bottom device.",
)
.with_labels(&[DEVICE, PARENT, KIND, TRANSPORT, PEER]);
pub const CGROUP_IOS_TOTAL: Metric = counter(
    "stornet_block_cgroup_ios_total",
    "Requests completed, by the cgroup of the task that issued them (only with [cgroups] paths).",
)
.with_labels(&[DEVICE, OP, labels::CGROUP]);
pub const CGROUP_BYTES_TOTAL: Metric = counter(
    "stornet_block_cgroup_bytes_total",
    "Bytes of the requests completed, by the cgroup of the task that issued them.",
)
.with_labels(&[DEVICE, OP, labels::CGROUP]);
pub const CGROUP_QUEUE_SECONDS_TOTAL: Metric = counter(
    "stornet_block_cgroup_queue_seconds_total",
    "Queue time (start to dispatch) of the requests completed, summed, by issuing cgroup.",
)
.with_labels(&[DEVICE, OP, labels::CGROUP]);
pub const CGROUP_SERVICE_SECONDS_TOTAL: Metric = counter(
    "stornet_block_cgroup_service_seconds_total",
    "Service time (dispatch to completion) of the requests completed, summed, by issuing cgroup.",
)
.with_labels(&[DEVICE, OP, labels::CGROUP]);

/// The families of the request and bio probes (the per-cgroup ones need the issuer probe too,
/// the device info is read from sysfs).
pub const PROBED: &[Metric] = &[
    QUEUE_SECONDS,
    SERVICE_SECONDS,
    IO_SIZE_BYTES,
    REQUEUES_TOTAL,
    INFLIGHT,
    INFLIGHT_AT_ISSUE,
    QUEUE_LIMIT,
    ERRORS_TOTAL,
    UNRECORDED_TOTAL,
    DISPATCH_STAMPS_TOTAL,
];

/// The per-cgroup families.
pub const CGROUP: &[Metric] = &[
    CGROUP_IOS_TOTAL,
    CGROUP_BYTES_TOTAL,
    CGROUP_QUEUE_SECONDS_TOTAL,
    CGROUP_SERVICE_SECONDS_TOTAL,
];

pub const ALL: &[Metric] = &[
    QUEUE_SECONDS,
    SERVICE_SECONDS,
    IO_SIZE_BYTES,
    REQUEUES_TOTAL,
    INFLIGHT,
    INFLIGHT_AT_ISSUE,
    QUEUE_LIMIT,
    ERRORS_TOTAL,
    UNRECORDED_TOTAL,
    DISPATCH_STAMPS_TOTAL,
    DEVICE_INFO,
    CGROUP_IOS_TOTAL,
    CGROUP_BYTES_TOTAL,
    CGROUP_QUEUE_SECONDS_TOTAL,
    CGROUP_SERVICE_SECONDS_TOTAL,
];
