//! Turns a snapshot of the block maps into metric families: device names and labels (with
//! the cap folding into `other`), coarse or fine histogram bounds, sysfs queue limits.

use std::collections::BTreeMap;

use agent_common::block::{
    CgroupStats, DevOp, ERRNO_STATUS, OP_NAMES, OpStats, STAMP_BIO, STAMP_KERNEL, STAMP_PROBE,
    UNREC_NAMES,
};
use agent_common::hist::{
    DEPTH_FINITE, LAT_FINITE, SIZE_FINITE, depth_bound, latency_bound_ns, size_bound,
};

use super::maps::{BlockSnapshot, add_stats};
use crate::host::devices::{DeviceFilter, DeviceLabels, OTHER};
use crate::model::{HistogramValue, MetricFamily};
use metric_names::labels::{CGROUP, DEVICE, ERROR, LIMIT, OP, REASON, SOURCE};
use metric_names::{Metric, block};

/// How devices are named, filtered and capped, and how fine the histograms are.
pub struct View<'a> {
    pub fine: bool,
    /// Whether the probes count the depth at each dispatch (`inflight_at_issue`).
    pub depth: bool,
    pub filter: &'a DeviceFilter,
    pub labels: &'a DeviceLabels,
    /// The kernel name of a `dev_t`, None if the device is gone.
    pub name: &'a dyn Fn(u32) -> Option<String>,
    /// Queue limits of a device by name, as (`limit` label, value).
    pub limits: &'a dyn Fn(&str) -> Vec<(&'static str, u64)>,
}

/// The kernel's `blk_status_t` values by name (`BLK_STS_*` without the prefix, lower case).
/// They are macros, absent from BTF, and have kept their values since they were introduced.
const STATUS_NAMES: [&str; 20] = [
    "ok",
    "notsupp",
    "timeout",
    "nospc",
    "transport",
    "target",
    "resv_conflict",
    "medium",
    "protection",
    "resource",
    "ioerr",
    "dm_requeue",
    "again",
    "dev_resource",
    "zone_open_resource",
    "zone_active_resource",
    "offline",
    "duration_limit",
    "status_18",
    "inval",
];

/// The errno each `blk_status_t` becomes (`blk_status_to_errno`), for kernels whose
/// `block_rq_complete` passes the errno (before 5.17): mapped back to the same names.
const ERRNO_STATUS_NAMES: [(u32, &str); 17] = [
    (95, "notsupp"),
    (110, "timeout"),
    (28, "nospc"),
    (67, "transport"),
    (121, "target"),
    (52, "resv_conflict"),
    (61, "medium"),
    (84, "protection"),
    (12, "resource"),
    (5, "ioerr"),
    (78, "dm_requeue"),
    (11, "again"),
    (16, "dev_resource"),
    (109, "zone_open_resource"),
    (75, "zone_active_resource"),
    (19, "offline"),
    (22, "inval"),
];

/// The `error` label of a recorded status: a `blk_status_t`, or (with `ERRNO_STATUS`) an
/// errno from an older kernel.
pub fn status_name(status: u32) -> String {
    if status & ERRNO_STATUS != 0 {
        let errno = status & !ERRNO_STATUS;
        return ERRNO_STATUS_NAMES
            .iter()
            .find(|(e, _)| *e == errno)
            .map(|(_, n)| n.to_string())
            .unwrap_or_else(|| format!("errno_{errno}"));
    }
    STATUS_NAMES
        .get(status as usize)
        .map(|s| s.to_string())
        .unwrap_or_else(|| format!("status_{status}"))
}

/// Cumulative Prometheus buckets from slot counts (the last slot is the overflow), keeping
/// the slots `keep` selects.
fn histogram(
    slots: &[u64],
    bound: impl Fn(usize) -> f64,
    keep: impl Fn(usize) -> bool,
    sum: f64,
) -> HistogramValue {
    let finite = slots.len() - 1;
    let mut cumulative = 0;
    let mut buckets = Vec::new();
    for (i, n) in slots[..finite].iter().enumerate() {
        cumulative += n;
        if keep(i) {
            buckets.push((bound(i), cumulative));
        }
    }
    HistogramValue {
        buckets,
        count: cumulative + slots[finite],
        sum,
    }
}

/// Coarse latency and size bounds are the powers of two (every fourth bound).
fn every_fourth(fine: bool) -> impl Fn(usize) -> bool {
    move |i| fine || i % 4 == 0
}

/// Coarse depth bounds are 0 and the powers of two.
fn depth_kept(fine: bool) -> impl Fn(usize) -> bool {
    move |i| fine || depth_bound(i) == 0 || depth_bound(i).is_power_of_two()
}

/// A histogram of one op's stats: its metric, its slots and sum, and the bound of a slot and
/// the sum in the metric's unit. Coarse bounds are every fourth.
struct OpHistogram {
    metric: Metric,
    slots: fn(&OpStats) -> (&[u64], u64),
    unit: fn(u64) -> f64,
    bound: fn(usize) -> u64,
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn plain(n: u64) -> f64 {
    n as f64
}

/// The histograms per (device, op).
const OP_HISTOGRAMS: [OpHistogram; 3] = [
    OpHistogram {
        metric: block::QUEUE_SECONDS,
        slots: |s| (&s.queue, s.queue_ns),
        unit: seconds,
        bound: latency_bound_ns,
    },
    OpHistogram {
        metric: block::SERVICE_SECONDS,
        slots: |s| (&s.service, s.service_ns),
        unit: seconds,
        bound: latency_bound_ns,
    },
    OpHistogram {
        metric: block::IO_SIZE_BYTES,
        slots: |s| (&s.size, s.bytes),
        unit: plain,
        bound: size_bound,
    },
];

type OpCounter = (Metric, fn(&OpStats) -> u64);

/// The counters per (device, op).
const OP_COUNTERS: [OpCounter; 1] = [(block::REQUEUES_TOTAL, |s| s.requeues)];

impl OpHistogram {
    fn value(&self, s: &OpStats, fine: bool) -> HistogramValue {
        let (slots, sum) = (self.slots)(s);
        let (unit, bound) = (self.unit, self.bound);
        histogram(slots, |i| unit(bound(i)), every_fourth(fine), unit(sum))
    }
}

/// The depth at dispatch of a device (all its ops).
fn depth(s: &OpStats, fine: bool) -> HistogramValue {
    histogram(
        &s.depth,
        |i| depth_bound(i) as f64,
        depth_kept(fine),
        s.depth_sum as f64,
    )
}

#[derive(Default)]
struct Device {
    ops: BTreeMap<u32, OpStats>,
    inflight: i64,
    limits: Vec<(&'static str, u64)>,
}

/// A scrape's maps by `device` label (a device's own name, or `other` beyond the cap), and
/// its errors by (label, op, status).
type Grouped = (BTreeMap<String, Device>, BTreeMap<(String, u32, u32), u64>);

/// A device's `device` label and whether it is its own name (not `other` beyond the cap);
/// None for a device that is gone or filtered out.
fn device_label(view: &View, dev: u32) -> Option<(String, bool)> {
    let name = (view.name)(dev)?;
    if !view.filter.allows(&name) {
        return None;
    }
    Some(if view.labels.named(dev) {
        (name, true)
    } else {
        (OTHER.to_string(), false)
    })
}

fn group(snap: &BlockSnapshot, view: &View) -> Grouped {
    let mut devices: BTreeMap<String, Device> = BTreeMap::new();
    let mut errors: BTreeMap<(String, u32, u32), u64> = BTreeMap::new();
    let label_of = |dev: u32| device_label(view, dev);
    for (DevOp { dev, op }, s) in &snap.ops {
        let Some((label, named)) = label_of(*dev) else {
            continue;
        };
        let d = devices.entry(label.clone()).or_default();
        add_stats(d.ops.entry(*op).or_insert(OpStats::ZERO), s);
        if named && d.limits.is_empty() {
            d.limits = (view.limits)(&label);
        }
    }
    for (dev, n) in &snap.inflight {
        if let Some((label, _)) = label_of(*dev)
            && let Some(d) = devices.get_mut(&label)
        {
            d.inflight += n;
        }
    }
    for (k, n) in &snap.errors {
        if let Some((label, _)) = label_of(k.dev) {
            *errors.entry((label, k.op, k.status)).or_default() += n;
        }
    }
    (devices, errors)
}

/// `stornet_block_cgroup_*`: the per-cgroup counters by (device, op, cgroup).
pub fn cgroup_families(by: &super::cgroups::ByCgroup, view: &View) -> Vec<MetricFamily> {
    let mut grouped: BTreeMap<(String, u32, &str), CgroupStats> = BTreeMap::new();
    for ((dev, op, cgroup), s) in by {
        if let Some((label, _)) = device_label(view, *dev) {
            grouped
                .entry((label, *op, cgroup.as_str()))
                .or_default()
                .add(s);
        }
    }
    let mut ios = MetricFamily::of(&block::CGROUP_IOS_TOTAL);
    let mut bytes = MetricFamily::of(&block::CGROUP_BYTES_TOTAL);
    let mut queue = MetricFamily::of(&block::CGROUP_QUEUE_SECONDS_TOTAL);
    let mut service = MetricFamily::of(&block::CGROUP_SERVICE_SECONDS_TOTAL);
    for ((device, op, cgroup), s) in &grouped {
        let op = OP_NAMES.get(*op as usize).copied().unwrap_or("other");
        let labels = [(DEVICE, device.as_str()), (OP, op), (CGROUP, *cgroup)];
        ios.scalar(&labels, s.ios as f64);
        bytes.scalar(&labels, s.bytes as f64);
        queue.scalar(&labels, s.queue_ns as f64 / 1e9);
        service.scalar(&labels, s.service_ns as f64 / 1e9);
    }
    vec![ios, bytes, queue, service]
}

/// The block metric families of one scrape.
pub fn families(snap: &BlockSnapshot, view: &View) -> Vec<MetricFamily> {
    let (devices, errors) = group(snap, view);
    let op_name = |op: u32| OP_NAMES.get(op as usize).copied().unwrap_or("other");
    let mut per_op_hist = OP_HISTOGRAMS.map(|h| MetricFamily::of(&h.metric));
    let mut per_op_count = OP_COUNTERS.map(|(m, _)| MetricFamily::of(&m));
    let mut inflight = MetricFamily::of(&block::INFLIGHT);
    let mut at_issue = MetricFamily::of(&block::INFLIGHT_AT_ISSUE);
    let mut limits = MetricFamily::of(&block::QUEUE_LIMIT);
    for (label, d) in &devices {
        let mut all_ops = OpStats::ZERO;
        for (op, s) in &d.ops {
            let labels = [(DEVICE, label.as_str()), (OP, op_name(*op))];
            for (f, h) in per_op_hist.iter_mut().zip(&OP_HISTOGRAMS) {
                f.histogram(&labels, h.value(s, view.fine));
            }
            for (f, (_, get)) in per_op_count.iter_mut().zip(&OP_COUNTERS) {
                f.scalar(&labels, get(s) as f64);
            }
            add_stats(&mut all_ops, s);
        }
        let device = [(DEVICE, label.as_str())];
        inflight.scalar(&device, d.inflight.max(0) as f64);
        at_issue.histogram(&device, depth(&all_ops, view.fine));
        for (limit, n) in &d.limits {
            limits.scalar(&[(DEVICE, label.as_str()), (LIMIT, limit)], *n as f64);
        }
    }
    let mut errs = MetricFamily::of(&block::ERRORS_TOTAL);
    for ((label, op, status), n) in &errors {
        errs.scalar(
            &[
                (DEVICE, label.as_str()),
                (OP, op_name(*op)),
                (ERROR, &status_name(*status)),
            ],
            *n as f64,
        );
    }
    let mut unrecorded = MetricFamily::of(&block::UNRECORDED_TOTAL);
    for (reason, n) in UNREC_NAMES.iter().zip(snap.counters) {
        unrecorded.scalar(&[(REASON, reason)], n as f64);
    }
    let mut stamps = MetricFamily::of(&block::DISPATCH_STAMPS_TOTAL);
    for (source, i) in [
        ("kernel", STAMP_KERNEL),
        ("probe", STAMP_PROBE),
        ("bio", STAMP_BIO),
    ] {
        stamps.scalar(&[(SOURCE, source)], snap.counters[i as usize] as f64);
    }
    let mut all: Vec<MetricFamily> = per_op_hist.into_iter().chain(per_op_count).collect();
    all.push(inflight);
    if view.depth {
        all.push(at_issue);
    }
    all.extend([limits, errs, unrecorded, stamps]);
    all
}

/// Number of finite buckets exported per histogram: (latency, size, depth).
pub fn finite_buckets(fine: bool) -> (usize, usize, usize) {
    let count = |n: usize, keep: &dyn Fn(usize) -> bool| (0..n).filter(|&i| keep(i)).count();
    (
        count(LAT_FINITE, &every_fourth(fine)),
        count(SIZE_FINITE, &every_fourth(fine)),
        count(DEPTH_FINITE, &depth_kept(fine)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;
    use agent_common::block::{ErrorKey, OP_FLUSH, OP_READ, OP_WRITE};
    use agent_common::hist::{depth_slot, latency_slot, size_slot};

    fn stats(lat_ns: u64, bytes: u64, depth: u64) -> OpStats {
        let mut s = OpStats::ZERO;
        s.queue[latency_slot(lat_ns / 10)] += 1;
        s.queue_ns += lat_ns / 10;
        s.service[latency_slot(lat_ns)] += 1;
        s.service_ns += lat_ns;
        s.size[size_slot(bytes)] += 1;
        s.bytes += bytes;
        s.depth[depth_slot(depth)] += 1;
        s.depth_sum += depth;
        s
    }

    fn snapshot() -> BlockSnapshot {
        let mut snap = BlockSnapshot::default();
        for (dev, op) in [
            (1, OP_READ),
            (1, OP_WRITE),
            (1, OP_FLUSH),
            (2, OP_READ),
            (3, OP_READ),
        ] {
            snap.ops.insert(
                DevOp { dev, op },
                stats(100_000 * dev as u64, 4096, dev as u64),
            );
        }
        snap.inflight.insert(1, 3);
        snap.inflight.insert(2, 1);
        snap.inflight.insert(3, 2);
        snap.errors.insert(
            ErrorKey {
                dev: 2,
                op: OP_READ,
                status: 10,
                _pad: 0,
            },
            4,
        );
        snap
    }

    fn render(
        snap: &BlockSnapshot,
        fine: bool,
        max: usize,
        filter: DeviceFilter,
    ) -> Vec<MetricFamily> {
        render_with(snap, fine, max, filter, true)
    }

    fn render_with(
        snap: &BlockSnapshot,
        fine: bool,
        max: usize,
        filter: DeviceFilter,
        depth: bool,
    ) -> Vec<MetricFamily> {
        let labels = DeviceLabels::new(max);
        let name = |dev: u32| (dev != 9).then(|| format!("sd{}", (b'a' + dev as u8 - 1) as char));
        let limits = |n: &str| {
            if n == "sda" {
                vec![("nr_requests", 64), ("device_queue_depth", 31)]
            } else {
                vec![("nr_requests", 128)]
            }
        };
        let view = View {
            fine,
            depth,
            filter: &filter,
            labels: &labels,
            name: &name,
            limits: &limits,
        };
        families(snap, &view)
    }

    fn family<'a>(fs: &'a [MetricFamily], name: &str) -> &'a MetricFamily {
        fs.iter().find(|f| f.name == name).unwrap()
    }

    fn hist<'a>(f: &'a MetricFamily, device: &str, op: Option<&str>) -> &'a HistogramValue {
        let s = f
            .series
            .iter()
            .find(|s| {
                s.labels.iter().any(|(k, v)| k == "device" && v == device)
                    && op.is_none_or(|op| s.labels.iter().any(|(k, v)| k == "op" && v == op))
            })
            .unwrap();
        match &s.value {
            Value::Histogram(h) => h,
            Value::Scalar(_) => panic!("not a histogram"),
        }
    }

    /// Prometheus series of one family: a histogram has its buckets, `+Inf`, sum and count.
    fn series_count(f: &MetricFamily) -> usize {
        f.series
            .iter()
            .map(|s| match &s.value {
                Value::Histogram(h) => h.buckets.len() + 3,
                Value::Scalar(_) => 1,
            })
            .sum()
    }

    #[test]
    fn coarse_bounds_are_powers_of_two_and_counts_are_exact() {
        let fs = render(&snapshot(), false, 64, DeviceFilter::default());
        let h = hist(
            family(&fs, block::SERVICE_SECONDS.name),
            "sda",
            Some("read"),
        );
        assert_eq!(h.buckets.len(), 25);
        assert_eq!(h.buckets[0].0, 1e-6);
        assert_eq!(h.buckets[1].0, 2e-6);
        assert_eq!(h.buckets[24].0, 16.777216);
        assert_eq!(h.count, 1);
        assert_eq!(h.sum, 100e-6);
        // 100 µs lands at the 128 µs bound, not before.
        let at = |le: f64| h.buckets.iter().find(|b| b.0 == le).unwrap().1;
        assert_eq!(at(64e-6), 0);
        assert_eq!(at(128e-6), 1);
        let size = hist(family(&fs, block::IO_SIZE_BYTES.name), "sda", Some("read"));
        assert_eq!(size.buckets[0].0, 512.0);
        assert_eq!(size.buckets.iter().find(|b| b.0 == 4096.0).unwrap().1, 1);
        assert_eq!(size.buckets.iter().find(|b| b.0 == 2048.0).unwrap().1, 0);
        assert_eq!(size.sum, 4096.0);
        let depth = hist(family(&fs, block::INFLIGHT_AT_ISSUE.name), "sda", None);
        let bounds: Vec<f64> = depth.buckets.iter().map(|b| b.0).take(6).collect();
        assert_eq!(bounds, [0.0, 1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(depth.count, 3, "the depth histogram sums the device's ops");
    }

    #[test]
    fn the_depth_family_is_exported_only_when_tracked() {
        let fs = render_with(&snapshot(), false, 64, DeviceFilter::default(), false);
        assert!(fs.iter().all(|f| f.name != block::INFLIGHT_AT_ISSUE.name));
        // The in-flight gauge stays (the kernel's count when the probes do not keep one).
        assert!(fs.iter().any(|f| f.name == block::INFLIGHT.name));
    }

    #[test]
    fn fine_bounds_are_at_most_25_percent_apart() {
        let fs = render(&snapshot(), true, 64, DeviceFilter::default());
        let h = hist(family(&fs, block::QUEUE_SECONDS.name), "sdb", Some("read"));
        assert_eq!(h.buckets.len(), LAT_FINITE);
        for w in h.buckets.windows(2) {
            assert!(w[1].0 <= w[0].0 * 1.2500001, "{:?}", w);
        }
    }

    #[test]
    fn the_cap_folds_the_rest_into_other() {
        let fs = render(&snapshot(), false, 1, DeviceFilter::default());
        let inflight = family(&fs, block::INFLIGHT.name);
        let values: Vec<(String, f64)> = inflight
            .series
            .iter()
            .map(|s| {
                let Value::Scalar(v) = s.value else { panic!() };
                (s.labels[0].1.clone(), v)
            })
            .collect();
        assert_eq!(values, [("other".into(), 3.0), ("sda".into(), 3.0)]);
        let other = hist(
            family(&fs, block::SERVICE_SECONDS.name),
            "other",
            Some("read"),
        );
        assert_eq!(other.count, 2, "sdb and sdc reads merged");
        let limits = family(&fs, block::QUEUE_LIMIT.name);
        assert!(
            limits.series.iter().all(|s| s.labels[0].1 == "sda"),
            "other has no queue limit"
        );
        let errors = family(&fs, block::ERRORS_TOTAL.name);
        assert_eq!(errors.series.len(), 1);
        assert_eq!(
            errors.series[0].labels,
            [
                ("device".to_string(), "other".to_string()),
                ("op".to_string(), "read".to_string()),
                ("error".to_string(), "ioerr".to_string())
            ]
        );
    }

    #[test]
    fn excluded_and_vanished_devices_are_left_out() {
        let mut snap = snapshot();
        snap.ops.insert(
            DevOp {
                dev: 9,
                op: OP_READ,
            },
            stats(1000, 512, 1),
        );
        let filter = DeviceFilter {
            include: vec![],
            exclude: vec!["sdb".into()],
        };
        let fs = render(&snap, false, 64, filter);
        let devices: std::collections::BTreeSet<String> = family(&fs, block::INFLIGHT.name)
            .series
            .iter()
            .map(|s| s.labels[0].1.clone())
            .collect();
        assert_eq!(devices, ["sda".to_string(), "sdc".to_string()].into());
        assert!(family(&fs, block::ERRORS_TOTAL.name).series.is_empty());
    }

    /// The per-device series counts docs/metrics.md states.
    #[test]
    fn series_per_device_match_the_docs() {
        let mut snap = BlockSnapshot::default();
        snap.ops.insert(
            DevOp {
                dev: 1,
                op: OP_READ,
            },
            stats(1000, 512, 1),
        );
        let count = |fine: bool, ops: &[u32]| {
            let mut snap = snap.clone();
            for &op in ops {
                snap.ops.insert(DevOp { dev: 1, op }, stats(1000, 512, 1));
            }
            let fs = render(&snap, fine, 64, DeviceFilter::default());
            fs.iter()
                .filter(|f| {
                    f.name != block::UNRECORDED_TOTAL.name
                        && f.name != block::DISPATCH_STAMPS_TOTAL.name
                })
                .map(series_count)
                .sum::<usize>()
        };
        // sda has two queue limits; one op adds 3 histograms and the requeue counter.
        assert_eq!(finite_buckets(false), (25, 22, 18));
        assert_eq!(finite_buckets(true), (97, 85, 61));
        assert_eq!(count(false, &[]), 82 + 24);
        assert_eq!(count(false, &[OP_WRITE, OP_FLUSH]), 3 * 82 + 24);
        assert_eq!(count(true, &[]), 289 + 67);
        assert_eq!(count(true, &[OP_WRITE, OP_FLUSH]), 3 * 289 + 67);
    }

    #[test]
    fn status_names() {
        assert_eq!(status_name(10), "ioerr");
        assert_eq!(status_name(3), "nospc");
        assert_eq!(status_name(19), "inval");
        assert_eq!(status_name(77), "status_77");
        // Kernels before 5.17 pass errnos: the same names.
        assert_eq!(status_name(ERRNO_STATUS | 5), "ioerr");
        assert_eq!(status_name(ERRNO_STATUS | 28), "nospc");
        assert_eq!(status_name(ERRNO_STATUS | 999), "errno_999");
    }
}
