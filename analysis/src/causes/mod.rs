//! Candidate causes and their scores.
//!
//! Each candidate acts on one part of the latency (the path to a replica, a device) and is
//! scored from two kinds of evidence: the share of the latency (rise) in that part, and
//! its own signals (rank correlation in raised intervals, anomaly strength for a whole run).
//! A candidate whose defining condition is not met keeps only a fraction of its score.
//!
//! The scoring framework is in [`score`]; each cause is judged in its own module.

mod cpu;
mod device;
mod device_saturation;
mod mtu_mismatch;
mod network;
mod network_congestion;
mod network_saturation;
mod packet_loss;
mod score;
mod slow_device;
mod spurious;

use crate::context::Context;
use crate::prose;
use crate::report::Candidate;
use crate::signals::SignalKind;
use cpu::{CpuWait, cpu, cpu_explains, cpu_targets};
use device::device_targets;
use device_saturation::device_saturation;
use mtu_mismatch::mtu_mismatch;
use network::{peers, served_device};
use network_congestion::network_congestion;
use network_saturation::network_saturation;
use packet_loss::packet_loss;
use slow_device::{cpu_wait, slow_device};
use spurious::mostly_spurious;

/// Whether the retransmits toward `peer` speak against its path: they rose with the
/// latency (or, over a whole run, are anomalous) and the receiver did not find most of
/// them needless. A few resent segments that a busy host's late acknowledgements cause
/// do not make a replica suspect.
pub fn retransmits_speak(cx: &Context, peer: &str) -> bool {
    let Some(i) = cx.signals.iter().position(|s| {
        s.kind == SignalKind::Retransmits
            && s.host == cx.subject.name
            && s.peer.as_deref() == Some(peer)
    }) else {
        return false;
    };
    let telling = if cx.raised() {
        cx.scores[i].rose
    } else {
        score::counter_anomaly(cx, i) > 0.0
    };
    telling && !mostly_spurious(cx, Some(peer))
}

/// Every candidate, best first.
pub fn rank(cx: &Context) -> Vec<Candidate> {
    let mut out = Vec::new();
    // Devices served over a path that a network cause explains.
    let mut served_over_bad_paths: Vec<(String, String)> = Vec::new();
    for peer in peers(cx) {
        let mtu = mtu_mismatch(cx, peer.as_deref());
        let loss = packet_loss(cx, peer.as_deref(), mtu.requirement_met);
        // Retransmits that an MTU mismatch, counted loss or a starved CPU explains, or that
        // the receiver found needless, are not evidence of congestion.
        let explained = mtu.requirement_met
            || loss.requirement_met
            || cpu_explains(cx, peer.as_deref())
            || mostly_spurious(cx, peer.as_deref());
        let saturated = network_saturation(cx, peer.as_deref(), false).requirement_met;
        let congestion = network_congestion(cx, peer.as_deref(), explained, saturated);
        // A path that drops, or whose MTUs differ, is judged by those causes: saturation
        // is what a path at its rate does without them.
        let lossy = congestion.requirement_met || mtu.requirement_met || loss.requirement_met;
        let saturation = network_saturation(cx, peer.as_deref(), lossy);
        if let (Some(p), Some(d), true) = (
            &peer,
            served_device(cx, peer.as_deref()),
            lossy || saturation.requirement_met,
        ) {
            served_over_bad_paths.push((d, p.clone()));
        }
        out.push(congestion);
        out.push(saturation);
        out.push(mtu);
        out.push(loss);
    }
    // Device time a contended CPU accounts for is the CPU's, not the device's: found once
    // per device, given to both.
    let devices: Vec<_> = device_targets(cx)
        .into_iter()
        .map(|d| {
            let wait = cpu_wait(cx, &d);
            (d, wait)
        })
        .collect();
    for target in cpu_targets(cx) {
        let waits: Vec<&CpuWait> = devices
            .iter()
            .filter(|(d, _)| d.host.name == target.host.name)
            .filter_map(|(_, w)| w.as_ref())
            .collect();
        out.push(cpu(cx, &target, &waits));
    }
    for (target, wait) in &devices {
        let mut found = [
            device_saturation(cx, target),
            slow_device(cx, target, wait.as_ref()),
        ];
        // A remote device's time is its path's when a network cause explains that path:
        // the device is not shown to be slow or saturated itself.
        for (device, peer) in &served_over_bad_paths {
            if target.replica.is_none() && target.devices.contains(device) {
                for c in found.iter_mut().filter(|c| c.requirement_met) {
                    c.requirement_met = false;
                    c.findings.push(prose::served_over(device, peer));
                    c.score = score::score(cx, c);
                }
            }
        }
        out.extend(found);
    }
    // Whatever rose there, a place that holds almost none of the rise is not where the
    // latency went.
    for c in &mut out {
        if cx.raised() && c.requirement_met && c.share.is_some_and(|s| s < cx.t.min_rise_share) {
            c.requirement_met = false;
            c.score = score::score(cx, c);
        }
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.cause.cmp(&b.cause)));
    out
}
