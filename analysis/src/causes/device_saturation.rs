//! `device_saturation`: a device whose queue is full, or whose block-layer queue time
//! dominates.

use super::device::{Target, device_share, target_rose, view};
use super::score::{association, candidate, findings, judge, magnitude, score};
use crate::breakdown::PartKind;
use crate::context::Context;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::signals::SignalKind;

pub(super) fn device_saturation(cx: &Context, target: &Target) -> Candidate {
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
    c.replica = target.replica.clone();
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
            found.push(prose::queue_dominant(
                v.queue.unwrap_or(0.0),
                v.service.unwrap_or(0.0),
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
