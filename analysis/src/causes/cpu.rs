//! `cpu`: a host whose CPU is starved (some task waited for one much of the time, by the
//! kernel's pressure stall information, or the storage daemon's CPU quota held it off the
//! CPU, by its cgroup's throttled time). Everything that host does for the IO waits with
//! it: on the analysed host its device path and its side of every replica's round trip; on
//! a replica's host that replica's round trip. A starved receiver also acknowledges late,
//! so the sender's retransmit timers fire with nothing lost.

use super::score::{SPECIFIC, association, candidate, findings, judge_signals, magnitude, score};
use crate::breakdown::PartKind;
use crate::context::Context;
use crate::model::Host;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::signals::SignalKind;

/// Device time on a target that its host's contended CPU accounts for.
pub(super) struct CpuWait {
    /// Why, for the evidence.
    pub(super) why: String,
    /// The share of the latency (rise) the device time holds, as `slow_device` would
    /// claim (`slow_device::cpu_wait` finds it).
    pub(super) share: Option<f64>,
}

/// A host whose CPU the analysis watched: the analysed one, or a replica's.
pub(super) struct CpuTarget<'a> {
    pub(super) host: &'a Host,
    replica: Option<String>,
}

pub(super) fn cpu_targets<'a>(cx: &Context<'a>) -> Vec<CpuTarget<'a>> {
    let mut out = vec![CpuTarget {
        host: cx.subject,
        replica: None,
    }];
    for p in cx.parts.replicas() {
        if let Some(h) = cx.run.host_with_address(&p.key)
            && h.name != cx.subject.name
        {
            out.push(CpuTarget {
                host: h,
                replica: Some(p.key.clone()),
            });
        }
    }
    out.retain(|t| !signals(cx, t.host).is_empty());
    out
}

fn signals(cx: &Context, host: &Host) -> Vec<usize> {
    cx.signals
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            matches!(s.kind, SignalKind::CpuStalled | SignalKind::CpuThrottled)
                && s.host == host.name
        })
        .map(|(i, _)| i)
        .collect()
}

/// `waits`: device time on this host that its contended CPU accounts for (`cpu_wait`).
pub(super) fn cpu(cx: &Context, target: &CpuTarget, waits: &[&CpuWait]) -> Candidate {
    // A replica host's CPU holds that replica's round trip. The analysed host's CPU serves
    // every part it measures, none of them its own: it is judged by its signal alone, so
    // it cannot outscore a cause with evidence of its own on the strength of a share.
    let share = target
        .replica
        .as_deref()
        .and_then(|p| cx.share(PartKind::Replica, Some(p)));
    let mut c = candidate(
        Cause::Cpu,
        prose::cpu_location(&target.host.name, target.replica.as_deref()),
        share,
    );
    c.replica = target.replica.clone();
    let sigs = signals(cx, target.host);
    // A CPU with room to spare is no candidate, whatever share its host holds; nor, over a
    // whole run, is the analysed host's: with no part of its own and no rise, nothing ties
    // a busy CPU to the latency (it still accounts for retransmits, `cpu_explains`).
    if !starved(cx, &sigs) || (target.replica.is_none() && !cx.raised()) {
        c.share = None;
        return c;
    }
    if cx.raised() {
        let picks: Vec<(usize, f64)> = sigs.iter().map(|&i| (i, SPECIFIC)).collect();
        let (assoc, risen) = association(cx, &picks);
        c.association = assoc;
        // The CPU's own stall rose with the latency, or device time rose that is the CPU's.
        c.requirement_met = !risen.is_empty() || !waits.is_empty();
        c.findings = findings(cx, &risen, 1);
        c.findings.extend(waits.iter().map(|w| w.why.clone()));
        // The device time that is CPU wait gives the CPU a share; on the analysed host,
        // whose CPU rose on its own, a sliver of device time must not turn "judged by its
        // signal" into "holds almost none of the rise" (an OSD starved of CPU: its op
        // latency rose 15-fold, its disk's time by 0.1 ms).
        let own = target.replica.is_none() && !risen.is_empty();
        if let Some(w) = waits.iter().filter_map(|w| w.share).reduce(f64::max)
            && (!own || w >= cx.t.min_rise_share)
        {
            c.share = Some(c.share.unwrap_or(0.0).max(w));
        }
    } else {
        let anomalies: Vec<(usize, f64)> = sigs
            .iter()
            .filter_map(|&i| Some((i, magnitude(cx.scores[i].run?, cx.t.cpu_stalled_run))))
            .collect();
        judge_signals(cx, &mut c, &anomalies);
    }
    c.score = score(cx, &c);
    c
}

/// Whether a CPU signal reaches the starvation level to be named: in the raised intervals,
/// or (higher, as nothing else ties it to the latency) over the whole run.
fn starved(cx: &Context, sigs: &[usize]) -> bool {
    let t = cx.t;
    reaches(
        cx,
        sigs,
        if cx.raised() {
            t.cpu_stalled
        } else {
            t.cpu_stalled_run
        },
    )
}

/// The highest level of the CPU signals `sigs`: in the raised intervals, or over the whole
/// run.
fn level(cx: &Context, sigs: &[usize]) -> Option<f64> {
    sigs.iter()
        .filter_map(|&i| {
            let sc = &cx.scores[i];
            if cx.raised() { sc.raised } else { sc.run }
        })
        .reduce(f64::max)
}

/// Whether a CPU signal's level is at least `threshold`.
fn reaches(cx: &Context, sigs: &[usize], threshold: f64) -> bool {
    level(cx, sigs).is_some_and(|v| v >= threshold)
}

/// How much of the time some task waited for `host`'s CPU (in the raised intervals, or over
/// the whole run), when that reaches `cpu_stalled`: a few milliseconds per IO of its device
/// time can then be waiting for a CPU.
pub(super) fn contended(cx: &Context, host: &Host) -> Option<f64> {
    level(cx, &signals(cx, host)).filter(|&v| v >= cx.t.cpu_stalled)
}

/// Whether the CPU of the analysed host, or of the host of `peer`, was contended enough to
/// account for late round trips and a few retransmits toward that peer: some task waited
/// for it `cpu_stalled` of the time (in the raised intervals, or over the whole run). A
/// weaker claim than naming the CPU, so the lower threshold holds for both.
pub(super) fn cpu_explains(cx: &Context, peer: Option<&str>) -> bool {
    cpu_targets(cx)
        .iter()
        .filter(|t| t.replica.is_none() || t.replica.as_deref() == peer)
        .any(|t| reaches(cx, &signals(cx, t.host), cx.t.cpu_stalled))
}
