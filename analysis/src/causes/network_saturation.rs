//! `network_saturation`: the path to a peer runs at its capacity, or is paused, and every
//! IO waits its turn behind the others; nothing needs to be dropped.
//!
//! A link at its rate with a deep buffer (or a lossless, paused fabric) holds IO back in
//! the sender's socket and the switch's queue: the round trip per IO grows far beyond the
//! path's RTT plus the replica's own time, while retransmits and drops stay at zero. The
//! cause holds when that gap is there and the path shows why: data waiting in the send
//! queue long enough to account for it, a link or shaper near its rate, or pause frames.
//! Data that waits because the receiver's window is full does not count: the replica reads
//! more slowly than the path delivers, which is the replica's cause, not the network's.
//! It leaves a path to `network_congestion`, `packet_loss` or `mtu_mismatch` when one of
//! those holds there: a queue that overflows is congestion, whatever else it does.

use super::network::{net_candidate, served_device};
use super::score::{judge, magnitude, score};
use crate::breakdown::{PartKind, local_devices};
use crate::context::Context;
use crate::model::Host;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::series::{mean_over, median_over, sum_over};
use crate::signals::path_hosts;

/// `other_cause`: a loss, congestion or MTU cause already holds on this path.
pub(super) fn network_saturation(cx: &Context, peer: Option<&str>, other_cause: bool) -> Candidate {
    let mut c = net_candidate(cx, Cause::NetworkSaturation, peer);
    if let Some(p) = peer.and_then(|p| Path::measure(cx, p)) {
        let (strength, findings) = p.judge(cx, other_cause);
        judge(cx, &mut c, strength, findings);
    }
    // Unconfirmed, it claims nothing: a share of the round trip alone is every network
    // cause's, and the others say what they saw.
    c.score = if c.requirement_met {
        score(cx, &c)
    } else {
        0.0
    };
    c
}

/// What the judged intervals show of the path to one peer.
struct Path<'a> {
    peer: &'a str,
    /// Mean round trip per IO to the peer (the replica's, or the time of the device it
    /// serves).
    round_trip: f64,
    /// The path's smoothed RTT and the replica's own time per IO (its device's), 0 unknown.
    rtt: f64,
    service: f64,
    /// Bytes waiting to be sent or acknowledged toward the peer, and the rate they leave at.
    queued: Option<Queued>,
    /// The busiest shaper or link on the path, by its share of its rate.
    link: Option<Link>,
    /// Pause frames on the path's interfaces, and where.
    pause: Option<(f64, String)>,
}

struct Queued {
    bytes: f64,
    rate: f64,
    /// Share of the time the connections had data to send, and waited for send buffer
    /// room, when measured.
    busy: Option<f64>,
    sndbuf: Option<f64>,
    /// Share of the time the connections waited for the receiver's window.
    rwnd: Option<f64>,
}

struct Link {
    /// "the tbf qdisc on sw sb", "link eth0 of h1".
    what: String,
    bytes_per_second: f64,
    rate: f64,
}

impl<'a> Path<'a> {
    fn measure(cx: &Context, peer: &'a str) -> Option<Path<'a>> {
        let idx = cx.intervals();
        let round_trip = cx
            .parts
            .replicas()
            .find(|r| r.key == peer)
            .map(|r| &r.series)
            .or_else(|| {
                served_device(cx, Some(peer))?;
                cx.parts.get(PartKind::LocalDevice).map(|p| &p.series)
            })
            .and_then(|s| mean_over(s, &idx))?;
        let p = cx.subject.peers.get(peer)?;
        let rtt = mean_over(&p.srtt_seconds, &idx)?;
        let service = cx
            .run
            .host_with_address(peer)
            .filter(|h| h.name != cx.subject.name)
            .and_then(|h| device_time(cx, h, &idx))
            .unwrap_or(0.0);
        let secs = cx.run.interval_seconds;
        let waiting = mean_over(&p.send_queue_bytes, &idx).or(mean_over(&p.notsent_bytes, &idx));
        let rate = mean_over(&p.delivery_rate_bytes_per_second, &idx);
        let queued = match (waiting, rate) {
            (Some(bytes), Some(rate)) if rate > 0.0 => Some(Queued {
                bytes,
                rate,
                busy: mean_over(&p.busy_seconds, &idx).map(|b| b / secs),
                sndbuf: mean_over(&p.sndbuf_limited_seconds, &idx).map(|b| b / secs),
                rwnd: mean_over(&p.rwnd_limited_seconds, &idx).map(|b| b / secs),
            }),
            _ => None,
        };
        Some(Path {
            peer,
            round_trip,
            rtt,
            service,
            queued,
            link: busiest_link(cx, peer, &idx),
            pause: pause_frames(cx, peer, &idx),
        })
    }

    /// The time per IO the path's RTT and the replica's own time do not explain.
    fn excess(&self) -> f64 {
        self.round_trip - self.rtt - self.service
    }

    /// The strength of the cause (0: it does not hold) and the findings behind it.
    fn judge(&self, cx: &Context, other_cause: bool) -> (f64, Vec<String>) {
        let t = cx.t;
        let expected = self.rtt + self.service;
        let far = self.round_trip >= t.saturation_round_trip_factor * expected
            && self.excess() >= t.saturation_wait_seconds;
        let d = cx.direction;
        let mut found = vec![prose::round_trip_beyond_rtt(
            d,
            self.peer,
            self.round_trip,
            self.rtt,
            self.service,
        )];
        // Data waiting to leave accounts for much of the gap, unless it waits for the
        // receiver to read: a full receive window is the replica's doing, not the path's.
        let queue_wait = self.queued.as_ref().map(|q| q.bytes / q.rate);
        let rwnd = self.queued.as_ref().and_then(|q| q.rwnd).unwrap_or(0.0);
        let receiver_bound = rwnd >= t.saturation_rwnd_share;
        let queued = !receiver_bound
            && queue_wait.is_some_and(|w| w >= t.saturation_queue_share * self.excess());
        let at_rate = self
            .link
            .as_ref()
            .is_some_and(|l| l.bytes_per_second >= t.saturation_link_use * l.rate);
        let paused = self.pause.as_ref().is_some_and(|p| p.0 >= t.min_events);
        if let (Some(q), Some(w)) = (&self.queued, queue_wait) {
            found.push(prose::send_queue_wait(
                d, w, self.peer, q.bytes, q.rate, q.busy, q.sndbuf,
            ));
        }
        if receiver_bound {
            found.push(prose::receive_window_bound(d, self.peer, rwnd));
        }
        if let Some(l) = &self.link {
            found.push(prose::link_use(&l.what, l.bytes_per_second, l.rate));
        }
        if let Some((frames, on)) = &self.pause {
            found.push(prose::pause_frames(*frames, on));
        }
        let holds = far && (queued || at_rate || paused) && !other_cause;
        let strength = if holds {
            magnitude(
                self.round_trip / expected.max(f64::MIN_POSITIVE),
                t.saturation_round_trip_factor,
            )
        } else {
            0.0
        };
        (strength, found)
    }
}

/// The mean time per IO of the replica host's own devices (queue and service).
fn device_time(cx: &Context, h: &Host, idx: &[usize]) -> Option<f64> {
    local_devices(h, cx.direction)
        .iter()
        .filter_map(|name| {
            let op = h.devices.get(name)?.ops.get(cx.direction.op())?;
            let service = mean_over(&op.service_seconds, idx)?;
            Some(service + mean_over(&op.queue_seconds, idx).unwrap_or(0.0))
        })
        .reduce(f64::max)
}

/// The hosts on the path to `peer` (the analysed host, the peer's, switches), each with the
/// interface the route to the peer leaves by where that is known (the analysed host's).
fn on_path<'h>(cx: &Context<'h>, peer: &str) -> Vec<(&'h Host, Option<&'h str>)> {
    let route = cx
        .subject
        .peers
        .get(peer)
        .and_then(|p| p.interface.as_deref());
    path_hosts(cx.run, cx.subject, cx.parts)
        .into_iter()
        .filter(|h| h.name == cx.subject.name || h.switch || h.addresses.iter().any(|a| a == peer))
        .map(|h| {
            (
                h,
                if h.name == cx.subject.name {
                    route
                } else {
                    None
                },
            )
        })
        .collect()
}

/// The shaper or link on the path that carries the largest share of its rate: qdiscs with
/// a rate (tbf, htb, cake) by bytes they let out, interfaces with a link speed by bytes
/// sent. Medians over the intervals: a rate set within the first judged interval leaves
/// that interval's old rate and traffic behind, which a mean would carry.
fn busiest_link(cx: &Context, peer: &str, idx: &[usize]) -> Option<Link> {
    let secs = cx.run.interval_seconds;
    let mut found: Vec<Link> = Vec::new();
    for (h, only) in on_path(cx, peer) {
        let here = |iface: &str| only.is_none_or(|o| o == iface);
        for q in h.qdiscs.iter().filter(|q| here(&q.interface)) {
            if let (Some(sent), Some(rate)) = (
                median_over(&q.sent_bytes, idx),
                median_over(&q.rate_bytes_per_second, idx),
            ) && rate > 0.0
            {
                found.push(Link {
                    what: prose::qdisc_on(&q.qdisc, &h.name, &q.interface),
                    bytes_per_second: sent / secs,
                    rate,
                });
            }
        }
        for (name, i) in h.interfaces.iter().filter(|(name, _)| here(name)) {
            if let (Some(sent), Some(speed)) = (
                median_over(&i.tx_bytes, idx),
                median_over(&i.speed_bytes_per_second, idx),
            ) && speed > 0.0
            {
                found.push(Link {
                    what: prose::link_on(&h.name, name),
                    bytes_per_second: sent / secs,
                    rate: speed,
                });
            }
        }
    }
    found
        .into_iter()
        .max_by(|a, b| (a.bytes_per_second / a.rate).total_cmp(&(b.bytes_per_second / b.rate)))
}

/// Pause frames sent and received on the path's interfaces over `idx`, and the interface
/// with the most.
fn pause_frames(cx: &Context, peer: &str, idx: &[usize]) -> Option<(f64, String)> {
    let mut total = 0.0;
    let mut most: Option<(f64, String)> = None;
    for (h, only) in on_path(cx, peer) {
        for (name, i) in h.interfaces.iter() {
            if only.is_some_and(|o| o != name) {
                continue;
            }
            let frames = [&i.rx_pause_frames, &i.tx_pause_frames]
                .into_iter()
                .filter_map(|s| sum_over(s, idx))
                .sum::<f64>();
            total += frames;
            if frames > 0.0 && most.as_ref().is_none_or(|m| frames > m.0) {
                most = Some((frames, prose::link_on(&h.name, name)));
            }
        }
    }
    most.map(|(_, on)| (total, on))
}
