//! IO slots one direction's IOs hold while the other's wait for them. An application that
//! keeps a fixed number of IOs in flight for reads and writes together (fio's `iodepth`
//! with `rw=randrw`, at a fixed rate) makes a read wait for a slot whenever every slot holds
//! a write: the read is slow for the write's cause, and its own path shows nothing. That
//! direction then takes the holding direction's cause, with the wait as its evidence.

use crate::model::{Host, Latency, Series};
use crate::prose;
use crate::report::{Cause, DirectionResult};
use crate::series::{all, at, mean_over};
use crate::thresholds::Thresholds;

/// The holders' IOs take at least this many times as long from submission as the
/// waiting direction's own: theirs are what hold the slots.
const HOLD_FACTOR: f64 = 2.0;

/// Gives a direction judged `none` or unexplained whose IOs waited mostly for IO slots the
/// cause of the other direction, when that one's slow IOs held the slots.
pub fn charge_holders(h: &Host, directions: &mut [DirectionResult], t: &Thresholds) {
    let judged: Vec<(usize, Waited)> = directions
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d.cause, Cause::None | Cause::Unexplained))
        .filter_map(|(i, d)| {
            let l = h.latency(d.direction)?;
            Some((i, waited(l, &intervals(d, l), t)?))
        })
        .collect();
    for (i, w) in judged {
        let waiting = directions[i].direction;
        // The other direction with a root cause, and how long its IOs held their slots.
        let holder = directions.iter().find_map(|o| {
            if o.direction == waiting || !o.cause.is_root_cause() {
                return None;
            }
            let held = mean_over(&from_submission(h.latency(o.direction)?), &w.full)?;
            (held >= HOLD_FACTOR * w.own).then(|| (o.clone(), held))
        });
        let Some((holder, held)) = holder else {
            continue;
        };
        let d = &mut directions[i];
        d.cause = holder.cause;
        d.location = holder.location.clone();
        d.confidence = (holder.confidence * w.share).clamp(0.0, 1.0);
        d.confidence_explained = prose::slot_holders_confidence(
            holder.direction,
            holder.confidence,
            w.share,
            d.confidence,
        );
        // The last words (healthy, or a rise nothing explained) no longer hold; the
        // headline and the breakdown do.
        if d.evidence.len() > 1 {
            d.evidence.pop();
        }
        d.evidence.push(prose::slot_holders(
            waiting,
            holder.direction,
            w.wait,
            w.full.len(),
            w.of,
            held,
            w.own,
        ));
        d.evidence.push(prose::other_direction(
            holder.direction,
            holder.cause,
            holder.location.as_deref(),
            holder.confidence,
        ));
    }
}

/// How a direction's IOs waited for slots over its judged intervals.
struct Waited {
    /// Intervals with the slots busy (`slots_busy`) and a wait before submission.
    full: Vec<usize>,
    of: usize,
    /// Mean wait before submission, and mean time from submission, over `full`.
    wait: f64,
    own: f64,
    /// The wait's share of the latency there.
    share: f64,
}

fn waited(l: &Latency, idx: &[usize], t: &Thresholds) -> Option<Waited> {
    let submitted = from_submission(l);
    let full: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| at(&l.slots_in_use, i).is_some_and(|s| s >= t.slots_busy))
        .filter(
            |&i| matches!((at(&l.mean_seconds, i), at(&submitted, i)), (Some(m), Some(s)) if m > s),
        )
        .collect();
    // Most of the judged intervals, not a burst.
    if full.is_empty() || 2 * full.len() < idx.len() {
        return None;
    }
    let mean = mean_over(&l.mean_seconds, &full)?;
    let own = mean_over(&submitted, &full)?;
    let wait = mean - own;
    let share = wait / mean;
    (share >= t.min_share).then_some(Waited {
        of: idx.len(),
        full,
        wait,
        own,
        share,
    })
}

/// Time per IO from its submission: the longest of the parts that run side by side (the
/// local device and each replica's round trip).
fn from_submission(l: &Latency) -> Series {
    (0..l.mean_seconds.len())
        .map(|i| {
            l.replicas
                .values()
                .filter_map(|s| at(s, i))
                .chain(at(&l.local_device_seconds, i))
                .reduce(f64::max)
        })
        .collect()
}

/// The judged intervals of a direction: the raised ones, or the whole run.
fn intervals(d: &DirectionResult, l: &Latency) -> Vec<usize> {
    if d.raised_intervals.is_empty() {
        all(l.mean_seconds.len())
    } else {
        d.raised_intervals.clone()
    }
}
