//! `slow_device`: a device slow to serve IOs (long service time, IO errors), or IOs held
//! above the block layer while the device has room.

use super::cpu::{CpuWait, contended};
use super::device::{DeviceView, Target, device_share, target_rose, view};
use super::score::{association, candidate, findings, judge, magnitude, score};
use crate::breakdown::PartKind;
use crate::context::Context;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::series::mean_over;
use crate::signals::SignalKind;

/// `cpu_wait`: the target's device time that its host's contended CPU accounts for
/// ([`cpu_wait`]).
pub(super) fn slow_device(cx: &Context, target: &Target, cpu_wait: Option<&CpuWait>) -> Candidate {
    let v = view(cx, target);
    let at = v.at_limit.as_ref().is_some_and(|l| l.reached(cx.t));
    let share = device_share(cx, target, slow_kinds(at), v.service).or_else(|| {
        // No block-layer split: the local device as a whole, unconfirmed.
        target
            .replica
            .is_none()
            .then(|| cx.share(PartKind::LocalDevice, None))
            .flatten()
    });
    let mut c = candidate(Cause::SlowDevice, target.location(), share);
    c.replica = target.replica.clone();
    let slow_part = slow_part(&v, at);
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
        if let (Some(wait), false) = (cpu_wait, errors) {
            // Not a candidate: the rise is no more than a contended CPU accounts for (the
            // `cpu` candidate of the host takes it).
            c.share = None;
            c.findings = vec![wait.why.clone()];
            return c;
        }
        c.association = assoc;
        c.requirement_met = (!at && not_queueing && slow_rose) || errors;
        c.findings = findings(cx, &risen, 2);
    } else {
        let (strength, found) = slow_anomaly(cx, target, &v, at, cpu_wait.is_some());
        judge(cx, &mut c, strength, found);
    }
    c.score = score(cx, &c);
    c
}

/// Whole-run: a long service time, time held above the block layer while the device queue
/// has room (throttling), or IO errors.
fn slow_anomaly(
    cx: &Context,
    target: &Target,
    v: &DeviceView,
    at: bool,
    cpu_wait: bool,
) -> (f64, Vec<String>) {
    let t = cx.t;
    let mut best = 0.0f64;
    let mut found = Vec::new();
    if at {
        return (0.0, found);
    }
    if let Some(s) = v.service {
        let m = magnitude(s, t.slow_service_seconds);
        if m > 0.0 {
            found.push(prose::slow_service(s, t.slow_service_seconds));
            best = best.max(m);
        }
    }
    let local = cx
        .parts
        .get(PartKind::LocalDevice)
        .and_then(|p| mean_over(&p.series, &cx.intervals()));
    if let (Some(a), Some(l), None) = (v.above, local, &target.replica)
        && !cpu_wait
        && l > 0.0
        && a / l >= t.above_block_fraction
    {
        let m = magnitude(a, t.above_block_seconds);
        if m > 0.0 {
            found.push(prose::held_above_block(a, l));
            best = best.max(m);
        }
    }
    for i in target.signals(cx, SignalKind::BlockErrors) {
        let errors = cx.scores[i].run.unwrap_or(0.0);
        let m = magnitude(errors, 1.0);
        if m > 0.0 {
            found.push(prose::describe_run(cx, i));
            best = best.max(m);
        }
    }
    (best, found)
}

/// When the slow part (its rise, or its whole-run mean) is time that waits for a CPU (above
/// the block layer, or a loop device's service time, which its worker thread spends), the
/// device's host had a contended CPU and the part is under `cpu_wait_seconds`: the device
/// is not shown to be slow, and the time is the CPU's.
pub(super) fn cpu_wait(cx: &Context, target: &Target) -> Option<CpuWait> {
    let stalled = contended(cx, target.host)?;
    let v = view(cx, target);
    let at = v.at_limit.as_ref().is_some_and(|l| l.reached(cx.t));
    let slow_part = slow_part(&v, at);
    let loop_device = target.devices.iter().all(|d| d.starts_with("loop"));
    let cpu_part = if at { 0.0 } else { v.above.unwrap_or(0.0) }.max(if loop_device {
        v.service.unwrap_or(0.0)
    } else {
        0.0
    });
    if slow_part <= 0.0 || cpu_part < slow_part || slow_part >= cx.t.cpu_wait_seconds {
        return None;
    }
    Some(CpuWait {
        why: prose::cpu_wait(
            &target.location(),
            slow_part,
            cx.raised(),
            &target.host.name,
            stalled,
        ),
        share: device_share(cx, target, slow_kinds(at), v.service),
    })
}

/// The parts a slow device holds: its service time, and (while its queue has room) time
/// held above the block layer.
fn slow_kinds(at: bool) -> &'static [PartKind] {
    if at {
        &[PartKind::Service]
    } else {
        &[PartKind::Service, PartKind::AboveBlock]
    }
}

/// The larger of service time and (while the queue has room) time above the block layer.
fn slow_part(v: &DeviceView, at: bool) -> f64 {
    v.service
        .unwrap_or(0.0)
        .max(if at { 0.0 } else { v.above.unwrap_or(0.0) })
}
