//! The devices the device causes act on (the analysed host's, or a replica's), and how
//! their block layer behaved.

use super::network::network_file_system;
use super::score::SPECIFIC;
use crate::breakdown::{PartKind, local_devices};
use crate::context::{Context, Mode};
use crate::layers::layers_of;
use crate::model::{Device, Host};
use crate::prose;
use crate::series::at;
use crate::signals::SignalKind;
use crate::thresholds::Thresholds;

/// A set of devices on one host: the analysed host's local devices, or a replica's.
pub(super) struct Target<'a> {
    pub(super) host: &'a Host,
    /// The layers the IO's time goes to ([`delayed_layer`]): the devices the IO was sent
    /// to, or devices below them.
    pub(super) devices: Vec<String>,
    /// The devices the IO was sent to, where the time went to a layer below them.
    pub(super) above: Vec<String>,
    /// The replica this host serves, for devices behind a replica's round trip.
    pub(super) replica: Option<String>,
}

pub(super) fn device_targets<'a>(cx: &Context<'a>) -> Vec<Target<'a>> {
    let mut out = Vec::new();
    // A file on a network file system has no device of its own to be slow or full: the
    // local IO's time is its servers', which the network causes weigh.
    let local = cx.parts.get(PartKind::LocalDevice).is_some() || !cx.parts.devices.is_empty();
    if local && !network_file_system(cx) {
        let layers = cx.local_layers().to_vec();
        out.push(Target::layered(cx.subject, &cx.parts.devices, layers, None));
    }
    for p in cx.parts.replicas() {
        if let Some(h) = cx.run.host_with_address(&p.key)
            && h.name != cx.subject.name
        {
            let devices = local_devices(h, cx.direction);
            if !devices.is_empty() {
                let layers = layers_of(h, &devices, cx.direction.op(), &cx.intervals());
                out.push(Target::layered(h, &devices, layers, Some(p.key.clone())));
            }
        }
    }
    out
}

impl<'a> Target<'a> {
    /// The target of IO sent to `sent_to` on `host`, whose time goes to `devices`.
    fn layered(
        host: &'a Host,
        sent_to: &[String],
        devices: Vec<String>,
        replica: Option<String>,
    ) -> Target<'a> {
        let above = if devices.as_slice() == sent_to {
            Vec::new()
        } else {
            sent_to.to_vec()
        };
        Target {
            host,
            devices,
            above,
            replica,
        }
    }

    pub(super) fn location(&self) -> String {
        prose::device_location(
            &self.devices,
            &self.above,
            &self.host.name,
            self.replica.as_deref(),
        )
    }

    /// This target's signals of `kinds`, in that order, each weighted as specific to the cause.
    pub(super) fn specific(&self, cx: &Context, kinds: &[SignalKind]) -> Vec<(usize, f64)> {
        kinds
            .iter()
            .flat_map(|&k| self.signals(cx, k))
            .map(|i| (i, SPECIFIC))
            .collect()
    }

    pub(super) fn signals<'s>(
        &self,
        cx: &'s Context,
        kind: SignalKind,
    ) -> impl Iterator<Item = usize> + 's {
        let host = self.host.name.clone();
        let devices = self.devices.clone();
        let local = self.replica.is_none();
        cx.signals.iter().enumerate().filter_map(move |(i, s)| {
            let mine = s.host == host
                && s.kind == kind
                && (devices.contains(&s.key) || (kind == SignalKind::AboveBlock && local));
            mine.then_some(i)
        })
    }
}

/// How a target's block layer behaved: rises (raised) or means (whole run).
pub(super) struct DeviceView {
    pub(super) queue: Option<f64>,
    pub(super) service: Option<f64>,
    pub(super) above: Option<f64>,
    pub(super) at_limit: Option<Limit>,
}

pub(super) struct Limit {
    pub(super) intervals: usize,
    pub(super) of: usize,
    pub(super) inflight: f64,
    pub(super) limit: f64,
}

impl Limit {
    pub(super) fn reached(&self, t: &Thresholds) -> bool {
        self.of > 0 && self.intervals as f64 >= t.at_limit_fraction * self.of as f64
    }

    pub(super) fn describe(&self, raised: bool) -> String {
        prose::at_queue_limit(self.inflight, self.limit, self.intervals, self.of, raised)
    }
}

pub(super) fn view(cx: &Context, target: &Target) -> DeviceView {
    let level = |kind| {
        target
            .signals(cx, kind)
            .filter_map(|i| {
                let sc = &cx.scores[i];
                match cx.mode {
                    Mode::Raised { .. } => Some(sc.raised? - sc.others?),
                    Mode::Whole => sc.run,
                }
            })
            .reduce(f64::max)
    };
    DeviceView {
        queue: level(SignalKind::QueueTime),
        service: level(SignalKind::ServiceTime),
        above: level(SignalKind::AboveBlock),
        at_limit: at_limit(cx, target),
    }
}

/// Intervals where in-flight requests reach `inflight_at_limit` of the queue limit.
fn at_limit(cx: &Context, target: &Target) -> Option<Limit> {
    let idx = cx.intervals();
    let mut l = Limit {
        intervals: 0,
        of: 0,
        inflight: 0.0,
        limit: 0.0,
    };
    for name in &target.devices {
        let Some(dev) = target.host.devices.get(name) else {
            continue;
        };
        for &i in &idx {
            let (Some(inflight), Some(limit)) = (at(&dev.inflight, i), at(&dev.queue_limit, i))
            else {
                continue;
            };
            if limit <= 0.0 {
                continue;
            }
            l.of += 1;
            let mean = mean_inflight(dev, i, cx.run.interval_seconds);
            if inflight >= cx.t.inflight_at_limit * limit
                || mean >= cx.t.mean_inflight_at_limit * limit
            {
                l.intervals += 1;
                l.inflight = l.inflight.max(inflight).max(mean.min(limit));
                l.limit = l.limit.max(limit);
            }
        }
    }
    (l.of > 0).then_some(l)
}

/// Requests in service on average over interval `i`: by Little's law, the completed IOs
/// times their mean service time, over the interval's length.
fn mean_inflight(dev: &Device, i: usize, interval_seconds: f64) -> f64 {
    let busy: f64 = dev
        .ops
        .values()
        .filter_map(|op| Some(at(&op.ios, i)? * at(&op.service_seconds, i)?))
        .sum();
    busy / interval_seconds
}

/// The share of latency (rise) a device candidate explains: its parts of the local device,
/// or for a replica's device the replica's share scaled by how much of the round trip (rise)
/// the device's own time accounts for.
pub(super) fn device_share(
    cx: &Context,
    target: &Target,
    parts: &[PartKind],
    device_seconds: Option<f64>,
) -> Option<f64> {
    if let Some(p) = &target.replica {
        let replica = cx
            .shares
            .iter()
            .find(|s| s.part == PartKind::Replica && s.key == *p)?;
        let amount = replica.seconds - replica.baseline_seconds.unwrap_or(0.0);
        let device = device_seconds?;
        return Some(if amount > 0.0 {
            replica.share * (device / amount).clamp(0.0, 1.0)
        } else {
            0.0
        });
    }
    let shares: Vec<f64> = parts.iter().filter_map(|k| cx.share(*k, None)).collect();
    if shares.is_empty() {
        None
    } else {
        Some(shares.iter().sum::<f64>().min(1.0))
    }
}

/// Whether any of the target's signals of these kinds rose in the raised intervals.
pub(super) fn target_rose(cx: &Context, target: &Target, kinds: &[SignalKind]) -> bool {
    kinds
        .iter()
        .any(|&k| target.signals(cx, k).any(|i| cx.scores[i].rose))
}
