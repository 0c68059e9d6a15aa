//! Candidate causes and their scores.
//!
//! Each candidate acts on one part of the latency (the path to a replica, a device) and is
//! scored from two kinds of evidence: the share of the latency (rise) in that part, and
//! its own signals (rank correlation in raised intervals, anomaly strength for a whole run).
//! A candidate whose defining condition is not met keeps only a fraction of its score.

use serde::{Deserialize, Serialize};

use crate::breakdown::{PartKind, PartShare, Parts, local_devices};
use crate::model::{Direction, Host, Run};
use crate::mtu;
use crate::series::{all, at, mean_over};
use crate::signals::{DropClass, Signal, SignalKind, SignalScore, drop_class, path_hosts};
use crate::text::{describe_raised, describe_run, pct, secs};
use crate::thresholds::Thresholds;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    NetworkCongestion,
    DeviceSaturation,
    SlowDevice,
    MtuMismatch,
    /// Healthy: no raised intervals and no anomalous signal.
    None,
    /// Latency rose but no measured part or signal explains it.
    Unexplained,
    /// Too few intervals to analyse.
    InsufficientData,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::NetworkCongestion => "network_congestion",
            Cause::DeviceSaturation => "device_saturation",
            Cause::SlowDevice => "slow_device",
            Cause::MtuMismatch => "mtu_mismatch",
            Cause::None => "none",
            Cause::Unexplained => "unexplained",
            Cause::InsufficientData => "insufficient_data",
        }
    }

    /// A named root cause (not a healthy, unexplained or empty result).
    pub fn is_root_cause(self) -> bool {
        matches!(
            self,
            Cause::NetworkCongestion
                | Cause::DeviceSaturation
                | Cause::SlowDevice
                | Cause::MtuMismatch
        )
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One candidate cause at one place, with its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub cause: Cause,
    /// Where it acts: "path to replica 198.18.0.2", "device loop3 on h1".
    pub location: String,
    /// 0..=1.
    pub score: f64,
    /// Share of the latency rise (raised) or of the latency (whole run) in that place.
    pub share: Option<f64>,
    /// Raised: best weighted rank correlation of its signals; whole run: anomaly strength.
    pub association: Option<f64>,
    /// The cause's defining condition (docs/analysis.md) holds.
    pub requirement_met: bool,
    /// Sentences with the numbers behind it.
    pub findings: Vec<String>,
}

/// Judging raised intervals against the rest, or a whole run that is slow throughout.
#[derive(Clone, Copy, Debug)]
pub enum Mode<'a> {
    Raised {
        raised: &'a [usize],
        others: &'a [usize],
    },
    Whole,
}

pub struct Context<'a> {
    pub run: &'a Run,
    pub subject: &'a Host,
    pub direction: Direction,
    pub t: &'a Thresholds,
    pub parts: &'a Parts,
    pub shares: &'a [PartShare],
    pub signals: &'a [Signal],
    pub scores: &'a [SignalScore],
    pub mode: Mode<'a>,
}

/// Signal weights: a cause's own signals count fully, shared ones (retransmits, RTT) less.
const SPECIFIC: f64 = 1.0;
const SHARED: f64 = 0.7;
/// A signal that did not rise in the raised intervals counts half.
const NOT_RISEN: f64 = 0.5;
/// Evidence of one kind only (share or signals) counts this much.
const SINGLE_EVIDENCE: f64 = 0.8;

/// Every candidate, best first.
pub fn rank(cx: &Context) -> Vec<Candidate> {
    let mut out = Vec::new();
    for peer in peers(cx) {
        let mtu = mtu_mismatch(cx, peer.as_deref());
        // Retransmits that an MTU mismatch explains are not evidence of congestion.
        out.push(network_congestion(cx, peer.as_deref(), mtu.requirement_met));
        out.push(mtu);
    }
    for target in device_targets(cx) {
        out.push(device_saturation(cx, &target));
        out.push(slow_device(cx, &target));
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.cause.cmp(&b.cause)));
    out
}

impl Context<'_> {
    fn intervals(&self) -> Vec<usize> {
        match self.mode {
            Mode::Raised { raised, .. } => raised.to_vec(),
            Mode::Whole => all(self.run.len()),
        }
    }

    fn share(&self, kind: PartKind, key: Option<&str>) -> Option<f64> {
        self.shares
            .iter()
            .find(|s| s.part == kind && key.is_none_or(|k| s.key == k))
            .map(|s| s.share)
    }

    fn raised(&self) -> bool {
        matches!(self.mode, Mode::Raised { .. })
    }

    /// Seconds covered by the intervals where a series has data.
    fn seconds_with_data(&self, i: usize) -> f64 {
        let s = &self.signals[i].series;
        (0..s.len()).filter(|&k| at(s, k).is_some()).count() as f64 * self.run.interval_seconds
    }

    /// IOs of the analysed direction over the run, when IOPS were recorded.
    fn ios(&self) -> Option<f64> {
        let lat = self.subject.latency(self.direction)?;
        let sum: f64 = (0..self.run.len()).filter_map(|i| at(&lat.iops, i)).sum();
        (sum > 0.0).then_some(sum * self.run.interval_seconds)
    }
}

/// Combines the share of latency with the signal evidence; unmet requirement scales down.
fn combine(share: Option<f64>, assoc: Option<f64>, met: bool, t: &Thresholds) -> f64 {
    let s = match (share, assoc) {
        (Some(s), Some(a)) => 0.5 * s + 0.5 * a,
        (Some(x), None) | (None, Some(x)) => SINGLE_EVIDENCE * x,
        (None, None) => 0.0,
    };
    (if met { s } else { t.unconfirmed_factor * s }).clamp(0.0, 1.0)
}

/// 0 below the threshold, 0.5 at it, 1 at a hundred times it (log scale).
fn magnitude(value: f64, threshold: f64) -> f64 {
    if !(value >= threshold && threshold > 0.0) {
        return 0.0;
    }
    (0.5 + 0.25 * (value / threshold).log10()).min(1.0)
}

/// Best weighted correlation among signals, and the risen ones in order of strength.
fn association(cx: &Context, picks: &[(usize, f64)]) -> (Option<f64>, Vec<usize>) {
    let mut best: Option<f64> = None;
    let mut risen: Vec<(usize, f64)> = Vec::new();
    for &(i, w) in picks {
        let sc = &cx.scores[i];
        let Some(rho) = sc.rho else { continue };
        let v = w * rho.max(0.0) * if sc.rose { 1.0 } else { NOT_RISEN };
        best = Some(best.map_or(v, |b: f64| b.max(v)));
        if sc.rose {
            risen.push((i, v));
        }
    }
    risen.sort_by(|a, b| b.1.total_cmp(&a.1));
    (best, risen.into_iter().map(|r| r.0).collect())
}

/// Sentences for the given signals (strongest first), one per kind, in the order of
/// [`SignalKind`] (a `qdisc_*` drop reason counts as the qdisc's drops).
fn findings(cx: &Context, ordered: &[usize], max: usize) -> Vec<String> {
    let kind = |i: usize| {
        let s = &cx.signals[i];
        if s.kind == SignalKind::SkbDrops && s.key.starts_with("qdisc_") {
            SignalKind::QdiscDrops
        } else {
            s.kind
        }
    };
    let mut ordered = ordered.to_vec();
    ordered.sort_by_key(|&i| kind(i));
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for i in ordered {
        if out.len() < max && !seen.contains(&kind(i)) {
            seen.push(kind(i));
            out.push(if cx.raised() {
                describe_raised(cx, i)
            } else {
                describe_run(cx, i)
            });
        }
    }
    out
}

// ---- network ----

/// Replica peers (from the breakdown) and TCP peers; one host-wide entry when there are
/// network signals but no peer.
fn peers(cx: &Context) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = cx.parts.replicas().map(|p| Some(p.key.clone())).collect();
    for addr in cx.subject.peers.keys() {
        if !out.iter().any(|p| p.as_deref() == Some(addr)) {
            out.push(Some(addr.clone()));
        }
    }
    if out.is_empty()
        && cx
            .signals
            .iter()
            .any(|s| s.kind.is_interface_level() || s.kind == SignalKind::SkbDrops)
    {
        out.push(None);
    }
    out
}

/// The replica's share; none at all when the application's breakdown has no part for
/// this peer (local-only IO), unknown without a breakdown.
fn net_share(cx: &Context, peer: Option<&str>) -> Option<f64> {
    let replica = peer.and_then(|p| cx.share(PartKind::Replica, Some(p)));
    let known = cx.parts.complete && !cx.shares.is_empty();
    replica.or(known.then_some(0.0))
}

fn net_location(cx: &Context, peer: Option<&str>) -> String {
    match peer {
        Some(p) if cx.parts.replicas().any(|r| r.key == p) => format!("path to replica {p}"),
        Some(p) => format!("path to peer {p}"),
        None => format!("network of {}", cx.subject.name),
    }
}

/// Network signals on the path to `peer`: TCP toward it, and drops, qdiscs and interfaces
/// of the hosts on the path (only the route's interface on the analysed host, when known).
fn net_signals(cx: &Context, peer: Option<&str>) -> Vec<usize> {
    let hosts: Vec<&str> = path_hosts(cx.run, cx.subject, cx.parts)
        .into_iter()
        .filter(|h| {
            h.name == cx.subject.name
                || h.switch
                || peer.is_some_and(|p| h.addresses.iter().any(|a| a == p))
        })
        .map(|h| h.name.as_str())
        .collect();
    let only = peer.and_then(|p| cx.subject.peers.get(p)?.interface.as_deref());
    cx.signals
        .iter()
        .enumerate()
        .filter(|(_, s)| match s.kind {
            SignalKind::Retransmits | SignalKind::Srtt => {
                peer.is_some() && s.peer.as_deref() == peer
            }
            k if k.is_interface_level() || k == SignalKind::SkbDrops => {
                hosts.contains(&s.host.as_str())
                    && !(s.host == cx.subject.name
                        && only.is_some()
                        && s.interface.as_deref() != only)
            }
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}

fn is_congestion(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(s.kind, QdiscDrops | QdiscBacklog | QdiscOverlimits)
        || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Congestion)
}

fn is_length(s: &Signal) -> bool {
    use SignalKind::*;
    matches!(
        s.kind,
        InterfaceRxDrops | InterfaceTxDrops | InterfaceRxErrors | InterfaceTxErrors
    ) || (s.kind == SkbDrops && drop_class(&s.key) == DropClass::Length)
}

/// The signals among `sigs` that speak for a cause, weighted: those only it explains
/// (`specific`) count fully, those other causes share (`shared`) count less.
fn weigh(
    cx: &Context,
    sigs: &[usize],
    specific: impl Fn(&Signal) -> bool,
    shared: impl Fn(&Signal) -> bool,
) -> Vec<(usize, f64)> {
    sigs.iter()
        .filter_map(|&i| {
            let s = &cx.signals[i];
            if specific(s) {
                Some((i, SPECIFIC))
            } else if shared(s) {
                Some((i, SHARED))
            } else {
                None
            }
        })
        .collect()
}

fn network_congestion(cx: &Context, peer: Option<&str>, mtu_explains: bool) -> Candidate {
    let sigs = net_signals(cx, peer);
    let picks = weigh(cx, &sigs, is_congestion, |s| {
        matches!(s.kind, SignalKind::Retransmits | SignalKind::Srtt)
    });
    let mut c = candidate(
        Cause::NetworkCongestion,
        net_location(cx, peer),
        net_share(cx, peer),
    );
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        c.requirement_met = risen
            .iter()
            .any(|&i| is_congestion(&cx.signals[i]) || !mtu_explains);
        c.association = assoc;
        c.findings = findings(cx, &risen, 4);
    } else {
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| is_congestion(&cx.signals[*i]) || !mtu_explains)
            .filter_map(|&(i, _)| Some((i, congestion_anomaly(cx, i)?)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.score = score(cx, &c);
    c
}

/// Whole-run anomaly strength of a congestion signal (retransmits, drops, backlog).
fn congestion_anomaly(cx: &Context, i: usize) -> Option<f64> {
    match cx.signals[i].kind {
        SignalKind::QdiscBacklog => Some(magnitude(cx.scores[i].run?, cx.t.backlog_bytes)),
        SignalKind::Retransmits | SignalKind::QdiscDrops | SignalKind::SkbDrops => {
            Some(counter_anomaly(cx, i))
        }
        _ => None,
    }
}

/// Anomaly strength of a counter over the whole run: enough events, at a high enough rate,
/// and (when IOPS are known) enough per IO; the strength grows with the rate per IO.
fn counter_anomaly(cx: &Context, i: usize) -> f64 {
    let t = cx.t;
    let total = cx.scores[i].run.unwrap_or(0.0);
    let secs = cx.seconds_with_data(i);
    if total < t.anomaly_min_events || secs <= 0.0 || total / secs < t.anomaly_events_per_second {
        return 0.0;
    }
    match cx.ios() {
        Some(ios) => magnitude(total / ios, t.events_per_io),
        None => magnitude(total / secs, t.anomaly_events_per_second),
    }
}

fn mtu_mismatch(cx: &Context, peer: Option<&str>) -> Candidate {
    let mismatch = mtu::mismatch(cx.run, cx.subject, peer, cx.t);
    let sigs = net_signals(cx, peer);
    let picks = weigh(cx, &sigs, is_length, |s| s.kind == SignalKind::Retransmits);
    let mut c = candidate(
        Cause::MtuMismatch,
        net_location(cx, peer),
        net_share(cx, peer),
    );
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        let length_rose = risen.iter().any(|&i| is_length(&cx.signals[i]));
        c.requirement_met = mismatch.is_some() && length_rose;
        c.association = assoc;
        c.findings = findings(cx, &risen, 3);
    } else {
        let anomalies: Vec<(usize, f64)> = picks
            .iter()
            .filter(|(i, _)| is_length(&cx.signals[*i]) && mismatch.is_some())
            .map(|&(i, _)| (i, counter_anomaly(cx, i)))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.findings.insert(
        0,
        mismatch.unwrap_or_else(|| "no MTU difference on the path".into()),
    );
    c.score = score(cx, &c);
    c
}

/// Whole-run judgement from anomalous signals (index, strength): the strongest is the
/// association.
fn judge_signals(cx: &Context, c: &mut Candidate, anomalies: &[(usize, f64)]) {
    let mut found: Vec<(usize, f64)> = anomalies.iter().copied().filter(|a| a.1 > 0.0).collect();
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    let strength = found.first().map_or(0.0, |a| a.1);
    let order: Vec<usize> = found.iter().map(|a| a.0).collect();
    let sentences = findings(cx, &order, 3);
    judge(cx, c, strength, sentences);
}

/// Whole-run judgement: an anomaly of this strength, in a part holding at least
/// `min_share` of the latency (when the breakdown is known).
fn judge(cx: &Context, c: &mut Candidate, strength: f64, findings: Vec<String>) {
    c.association = (strength > 0.0).then_some(strength);
    c.requirement_met = strength > 0.0 && c.share.is_none_or(|s| s >= cx.t.min_share);
    c.findings.extend(findings);
}

/// Raised intervals: evidence combined, unconfirmed candidates scaled down. Whole run:
/// only an anomaly makes a candidate.
fn score(cx: &Context, c: &Candidate) -> f64 {
    if cx.raised() || c.requirement_met {
        combine(c.share, c.association, c.requirement_met, cx.t)
    } else {
        0.0
    }
}

fn candidate(cause: Cause, location: String, share: Option<f64>) -> Candidate {
    Candidate {
        cause,
        location,
        score: 0.0,
        share,
        association: None,
        requirement_met: false,
        findings: Vec::new(),
    }
}

// ---- devices ----

/// A set of devices on one host: the analysed host's local devices, or a replica's.
struct Target<'a> {
    host: &'a Host,
    devices: Vec<String>,
    /// The replica this host serves, for devices behind a replica's round trip.
    replica: Option<String>,
}

fn device_targets<'a>(cx: &Context<'a>) -> Vec<Target<'a>> {
    let mut out = Vec::new();
    if cx.parts.get(PartKind::LocalDevice).is_some() || !cx.parts.devices.is_empty() {
        out.push(Target {
            host: cx.subject,
            devices: cx.parts.devices.clone(),
            replica: None,
        });
    }
    for p in cx.parts.replicas() {
        if let Some(h) = cx.run.host_with_address(&p.key)
            && h.name != cx.subject.name
        {
            let devices = local_devices(h, cx.direction);
            if !devices.is_empty() {
                out.push(Target {
                    host: h,
                    devices,
                    replica: Some(p.key.clone()),
                });
            }
        }
    }
    out
}

impl Target<'_> {
    fn location(&self) -> String {
        let devs = if self.devices.is_empty() {
            "local device".to_string()
        } else {
            format!("device {}", self.devices.join(", "))
        };
        match &self.replica {
            Some(p) => format!("{devs} on {} (replica {p})", self.host.name),
            None => format!("{devs} on {}", self.host.name),
        }
    }

    /// This target's signals of `kinds`, in that order, each weighted as specific to the cause.
    fn specific(&self, cx: &Context, kinds: &[SignalKind]) -> Vec<(usize, f64)> {
        kinds
            .iter()
            .flat_map(|&k| self.signals(cx, k))
            .map(|i| (i, SPECIFIC))
            .collect()
    }

    fn signals<'s>(&self, cx: &'s Context, kind: SignalKind) -> impl Iterator<Item = usize> + 's {
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
struct DeviceView {
    queue: Option<f64>,
    service: Option<f64>,
    above: Option<f64>,
    at_limit: Option<Limit>,
}

struct Limit {
    intervals: usize,
    of: usize,
    inflight: f64,
    limit: f64,
}

impl Limit {
    fn reached(&self, t: &Thresholds) -> bool {
        self.of > 0 && self.intervals as f64 >= t.at_limit_fraction * self.of as f64
    }

    fn describe(&self, raised: bool) -> String {
        let scope = if raised {
            "raised intervals"
        } else {
            "intervals"
        };
        format!(
            "in-flight at the queue limit ({:.0} of {:.0}) in {} of {} {scope}",
            self.inflight, self.limit, self.intervals, self.of
        )
    }
}

fn view(cx: &Context, target: &Target) -> DeviceView {
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
            if inflight >= cx.t.inflight_at_limit * limit {
                l.intervals += 1;
                l.inflight = l.inflight.max(inflight);
                l.limit = l.limit.max(limit);
            }
        }
    }
    (l.of > 0).then_some(l)
}

/// The share of latency (rise) a device candidate explains: its parts of the local device,
/// or for a replica's device the replica's share scaled by how much of the round trip (rise)
/// the device's own time accounts for.
fn device_share(
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
fn target_rose(cx: &Context, target: &Target, kinds: &[SignalKind]) -> bool {
    kinds
        .iter()
        .any(|&k| target.signals(cx, k).any(|i| cx.scores[i].rose))
}

fn device_saturation(cx: &Context, target: &Target) -> Candidate {
    let v = view(cx, target);
    let at = v.at_limit.as_ref().is_some_and(|l| l.reached(cx.t));
    let kinds: &[PartKind] = if at {
        &[PartKind::LocalDevice]
    } else {
        &[PartKind::Queue]
    };
    let device = if at {
        Some(v.queue.unwrap_or(0.0) + v.service.unwrap_or(0.0))
    } else {
        v.queue
    };
    let share = device_share(cx, target, kinds, device);
    let mut c = candidate(Cause::DeviceSaturation, target.location(), share);
    let queue_dominant = v
        .queue
        .is_some_and(|q| q > 0.0 && q >= v.service.unwrap_or(0.0) && q >= v.above.unwrap_or(0.0));
    let kinds: &[SignalKind] = if at {
        &[
            SignalKind::InflightRatio,
            SignalKind::QueueTime,
            SignalKind::AboveBlock,
        ]
    } else {
        &[SignalKind::InflightRatio, SignalKind::QueueTime]
    };
    let picks = target.specific(cx, kinds);
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        c.association = assoc;
        c.requirement_met =
            at || (queue_dominant && target_rose(cx, target, &[SignalKind::QueueTime]));
        c.findings = findings(cx, &risen, 2);
    } else {
        let strength = if at {
            let l = v
                .at_limit
                .as_ref()
                .map_or(0.0, |l| l.intervals as f64 / l.of as f64);
            0.5 + 0.5
                * ((l - cx.t.at_limit_fraction) / (1.0 - cx.t.at_limit_fraction)).clamp(0.0, 1.0)
        } else if queue_dominant {
            magnitude(v.queue.unwrap_or(0.0), cx.t.queue_seconds)
        } else {
            0.0
        };
        let mut found = Vec::new();
        if !at && strength > 0.0 {
            found.push(format!(
                "mean block-layer queue time {} against {} of service",
                secs(v.queue.unwrap_or(0.0)),
                secs(v.service.unwrap_or(0.0))
            ));
        }
        judge(cx, &mut c, strength, found);
    }
    if let Some(l) = v.at_limit.as_ref().filter(|_| at) {
        c.findings.insert(0, l.describe(cx.raised()));
    }
    c.score = score(cx, &c);
    c
}

fn slow_device(cx: &Context, target: &Target) -> Candidate {
    let v = view(cx, target);
    let at = v.at_limit.as_ref().is_some_and(|l| l.reached(cx.t));
    let kinds: &[PartKind] = if at {
        &[PartKind::Service]
    } else {
        &[PartKind::Service, PartKind::AboveBlock]
    };
    let share = device_share(cx, target, kinds, v.service).or_else(|| {
        // No block-layer split: the local device as a whole, unconfirmed.
        target
            .replica
            .is_none()
            .then(|| cx.share(PartKind::LocalDevice, None))
            .flatten()
    });
    let mut c = candidate(Cause::SlowDevice, target.location(), share);
    let slow_part = v
        .service
        .unwrap_or(0.0)
        .max(if at { 0.0 } else { v.above.unwrap_or(0.0) });
    let not_queueing = slow_part > 0.0 && slow_part > v.queue.unwrap_or(0.0);
    let kinds: &[SignalKind] = if at {
        &[SignalKind::ServiceTime, SignalKind::BlockErrors]
    } else {
        &[
            SignalKind::ServiceTime,
            SignalKind::BlockErrors,
            SignalKind::AboveBlock,
        ]
    };
    let picks = target.specific(cx, kinds);
    if cx.raised() {
        let (assoc, risen) = association(cx, &picks);
        let errors = risen
            .iter()
            .any(|&i| cx.signals[i].kind == SignalKind::BlockErrors);
        let slow_rose = target_rose(
            cx,
            target,
            &[SignalKind::ServiceTime, SignalKind::AboveBlock],
        );
        c.association = assoc;
        c.requirement_met = (!at && not_queueing && slow_rose) || errors;
        c.findings = findings(cx, &risen, 2);
    } else {
        let (strength, found) = slow_anomaly(cx, target, &v, at);
        judge(cx, &mut c, strength, found);
    }
    c.score = score(cx, &c);
    c
}

/// Whole-run: a long service time, time held above the block layer while the device queue
/// has room (throttling), or IO errors.
fn slow_anomaly(cx: &Context, target: &Target, v: &DeviceView, at: bool) -> (f64, Vec<String>) {
    let t = cx.t;
    let mut best = 0.0f64;
    let mut found = Vec::new();
    if at {
        return (0.0, found);
    }
    if let Some(s) = v.service {
        let m = magnitude(s, t.slow_service_seconds);
        if m > 0.0 {
            found.push(format!(
                "mean device service time {} (slow from {})",
                secs(s),
                secs(t.slow_service_seconds)
            ));
            best = best.max(m);
        }
    }
    let local = cx
        .parts
        .get(PartKind::LocalDevice)
        .and_then(|p| mean_over(&p.series, &cx.intervals()));
    if let (Some(a), Some(l), None) = (v.above, local, &target.replica)
        && l > 0.0
        && a / l >= t.above_block_fraction
    {
        let m = magnitude(a, t.above_block_seconds);
        if m > 0.0 {
            found.push(format!(
                "{} per IO held above the block layer ({} of the local device time) while the device queue had room: throttling (such as a cgroup IO limit) before the device",
                secs(a),
                pct(a / l)
            ));
            best = best.max(m);
        }
    }
    for i in target.signals(cx, SignalKind::BlockErrors) {
        let errors = cx.scores[i].run.unwrap_or(0.0);
        let m = magnitude(errors, 1.0);
        if m > 0.0 {
            found.push(describe_run(cx, i));
            best = best.max(m);
        }
    }
    (best, found)
}
