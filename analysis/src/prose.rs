//! Every sentence and phrase the analysis writes: what a signal or a part of the latency
//! is, the findings behind a candidate, and the evidence and confidence of a verdict.

use std::fmt::Write;

use crate::breakdown::{PartKind, PartShare};
use crate::context::{Context, Mode};
use crate::model::Direction;
use crate::report::{Candidate, Cause, DirectionResult, State};
use crate::signals::{SignalKind, SignalScore};
use crate::units::{bit_rate, bytes, count, level, pct, secs};

// ---- signals and parts ----

/// What a signal is, as a phrase: "retransmits to 198.18.0.2".
pub fn phrase(subject: &str, s: &SignalScore) -> String {
    use SignalKind::*;
    let on = |what: &str| format!("{what} on {} {}", s.host, s.key);
    let (iface, qdisc) = s.key.split_once(' ').unwrap_or((&s.key, ""));
    let from = if s.host == subject {
        String::new()
    } else {
        format!(" from {}", s.host)
    };
    match s.kind {
        Retransmits => format!("retransmits{from} to {}", s.key),
        Srtt => format!("smoothed RTT{from} to {}", s.key),
        SkbDrops => format!("packets dropped on {} with reason {}", s.host, s.key),
        QdiscDrops => format!("drops at the {qdisc} qdisc on {} {iface}", s.host),
        QdiscBacklog => format!("backlog of the {qdisc} qdisc on {} {iface}", s.host),
        QdiscOverlimits => format!("overlimits of the {qdisc} qdisc on {} {iface}", s.host),
        InterfaceRxDrops => on("rx drops"),
        InterfaceTxDrops => on("tx drops"),
        InterfaceRxErrors => on("rx errors"),
        InterfaceTxErrors => on("tx errors"),
        InflightRatio => on("in-flight requests"),
        QueueTime => on("block-layer queue time"),
        ServiceTime => on("device service time"),
        BlockErrors => on("IO errors"),
        AboveBlock => format!("time above the block layer on {}", s.host),
        ReplicaRtt => format!("round trip to replica {}", s.key),
        CpuStalled => format!("time some task waited for a CPU on {}", s.host),
        CpuThrottled => format!(
            "time the storage daemon's CPU quota held it off the CPU on {}",
            s.host
        ),
    }
}

fn correlation(s: &SignalScore) -> String {
    let Some(rho) = s.rho else {
        return "no rank correlation (too few points or a constant series)".into();
    };
    let lag = match s.lag.unwrap_or(0) {
        0 => String::new(),
        1 => " with the signal one interval ahead".into(),
        -1 => " with the signal one interval behind".into(),
        l if l > 0 => format!(" with the signal {l} intervals ahead"),
        l => format!(" with the signal {} intervals behind", -l),
    };
    format!("rank correlation {rho:.2}{lag}")
}

/// A signal in raised intervals against the others, with its correlation.
pub fn describe_raised(cx: &Context, i: usize) -> String {
    let s = &cx.scores[i];
    let (r, all) = match cx.mode {
        Mode::Raised { raised, others } => (raised.len(), others.len()),
        Mode::Whole => (0, 0),
    };
    let o = s.others_intervals;
    // The intervals next to a raised one are left out of the comparison when enough remain.
    let others = if o < all {
        format!("the {o} others not next to them")
    } else {
        format!("the other {o}")
    };
    let what = phrase(&cx.subject.name, s);
    let (during, before) = (s.raised.unwrap_or(0.0), s.others.unwrap_or(0.0));
    // Levels taken at the signal's lag say so (the correlation names the lag).
    let shifted = match s.shift {
        0 => "",
        l if l > 0 => ", each taken earlier by the lag,",
        _ => ", each taken later by the lag,",
    };
    if s.kind.is_counter() {
        format!(
            "{} {what} in the {r} raised intervals{shifted} ({} in {others}); {}",
            count(during),
            count(before),
            correlation(s)
        )
    } else {
        format!(
            "{what} {} in the raised intervals{shifted} against {} in the others; {}",
            level(s.kind, during),
            level(s.kind, before),
            correlation(s)
        )
    }
}

/// A signal over the whole run: events and rate, or its mean.
pub fn describe_run(cx: &Context, i: usize) -> String {
    let s = &cx.scores[i];
    let what = phrase(&cx.subject.name, s);
    let run = s.run.unwrap_or(0.0);
    if !s.kind.is_counter() {
        return format!("{what} {} on average over the run", level(s.kind, run));
    }
    let seconds = cx.run.len() as f64 * cx.run.interval_seconds;
    let mut out = format!(
        "{} {what} over the run ({:.1} per second",
        count(run),
        run / seconds
    );
    if s.kind == SignalKind::Retransmits
        && let Some(lat) = cx.subject.latency(cx.direction)
    {
        let ios: f64 = lat
            .iops
            .iter()
            .flatten()
            .filter(|v| v.is_finite())
            .sum::<f64>()
            * cx.run.interval_seconds;
        if ios > 0.0 {
            let _ = write!(out, ", {:.2} per {} IO", run / ios, cx.direction);
        }
        if let Some(sent) = cx.segments_sent(i) {
            let _ = write!(
                out,
                ", {:.2}% of {} segments sent",
                100.0 * run / sent,
                count(sent)
            );
        }
    }
    out.push(')');
    out
}

/// A part of the latency, as a phrase: "waiting for replica 198.18.0.2".
pub fn part_phrase(kind: PartKind, key: &str) -> String {
    let on = if key.is_empty() {
        String::new()
    } else {
        format!(" of {key}")
    };
    match kind {
        PartKind::LocalDevice => format!("on the local device{on}"),
        PartKind::AboveBlock => format!("above the block layer{on}"),
        PartKind::Queue => format!("in the block-layer queue{on}"),
        PartKind::Service => format!("in device service time{on}"),
        PartKind::Replica => format!("waiting for replica {key}"),
    }
}

/// A part of the latency, as a short label: "local device".
pub fn part_label(kind: PartKind) -> &'static str {
    match kind {
        PartKind::LocalDevice => "local device",
        PartKind::AboveBlock => "above block layer",
        PartKind::Queue => "queue",
        PartKind::Service => "service",
        PartKind::Replica => "replica",
    }
}

// ---- where candidates act, and their findings ----

/// Where a network candidate acts: "path to replica 198.18.0.2".
/// `serves`: the local device the peer serves over the network, if it does.
pub fn net_location(
    peer: Option<&str>,
    replica: bool,
    serves: Option<&str>,
    subject: &str,
) -> String {
    match (peer, serves) {
        (Some(p), _) if replica => format!("path to replica {p}"),
        (Some(p), Some(d)) => format!("path to peer {p}, which serves device {d}"),
        (Some(p), None) => format!("path to peer {p}"),
        (None, _) => format!("network of {subject}"),
    }
}

/// A device served over the network whose path a network cause explains.
pub fn served_over(device: &str, peer: &str) -> String {
    format!("{device} is served by {peer} over the network, and the path to it is the cause")
}

/// Where a CPU candidate acts: "CPU of h1", "CPU of h2 (replica …)".
pub fn cpu_location(host: &str, replica: Option<&str>) -> String {
    match replica {
        Some(p) => format!("CPU of {host} (replica {p})"),
        None => format!("CPU of {host}"),
    }
}

/// Where a device candidate acts: "device loop3 on h1", "device sdb on h2 (replica …)".
/// `above`: the stacked devices the IO was sent to, when its time went to `devices` below.
pub fn device_location(
    devices: &[String],
    above: &[String],
    host: &str,
    replica: Option<&str>,
) -> String {
    let devs = match (devices.is_empty(), above.is_empty()) {
        (true, _) => "local device".to_string(),
        (false, true) => format!("device {}", devices.join(", ")),
        (false, false) => format!("device {} (below {})", devices.join(", "), above.join(", ")),
    };
    match replica {
        Some(p) => format!("{devs} on {host} (replica {p})"),
        None => format!("{devs} on {host}"),
    }
}

/// Interfaces on a path whose MTUs differ: each MTU, largest first, with the (host,
/// interface) pairs that have it.
pub fn mtus_differ(groups: &[(f64, Vec<(&str, &str)>)]) -> String {
    let groups: Vec<String> = groups
        .iter()
        .map(|(v, on)| {
            let names: Vec<String> = on.iter().map(|(h, i)| format!("{h} {i}")).collect();
            format!("{v:.0} on {}", names.join(", "))
        })
        .collect();
    format!("MTUs differ on the path: {}", groups.join("; "))
}

/// A path MTU below the interface MTU.
pub fn path_mtu_below(addr: &str, pmtu: f64, local: f64) -> String {
    format!("path MTU to {addr} is {pmtu:.0} bytes, below the {local:.0}-byte interface MTU")
}

/// Segments to a peer larger than an interface's MTU on the path.
/// `at`: the (host, interface) pairs with that MTU, in path order.
pub fn segments_too_large(addr: &str, bytes: f64, mtu: f64, at: &[(&str, &str)]) -> String {
    let mut hosts: Vec<(&str, Vec<&str>)> = Vec::new();
    for &(host, iface) in at {
        match hosts.iter_mut().find(|(h, _)| *h == host) {
            Some((_, ifaces)) => ifaces.push(iface),
            None => hosts.push((host, vec![iface])),
        }
    }
    let places: Vec<String> = hosts
        .iter()
        .map(|(h, ifaces)| format!("{h} {}", ifaces.join(", ")))
        .collect();
    format!(
        "segments to {addr} of up to {bytes:.0} bytes are larger than the {mtu:.0}-byte MTU of {}: dropped there",
        places.join("; ")
    )
}

/// An MSS too small for the interface MTU.
pub fn mss_too_small(addr: &str, mss: f64, local: f64) -> String {
    format!("MSS to {addr} is {mss:.0} bytes, too small for the {local:.0}-byte interface MTU")
}

/// The finding of an MTU candidate when no interface on the path differs.
pub const NO_MTU_DIFFERENCE: &str = "no MTU difference on the path";

/// In-flight requests at the device's queue limit in enough intervals.
pub fn at_queue_limit(
    inflight: f64,
    limit: f64,
    intervals: usize,
    of: usize,
    raised: bool,
) -> String {
    let scope = if raised {
        "raised intervals"
    } else {
        "intervals"
    };
    format!(
        "in-flight at the queue limit ({inflight:.0} of {limit:.0}) in {intervals} of {of} {scope}"
    )
}

/// A whole run whose block-layer queue time exceeds the device's service time.
pub fn queue_dominant(queue: f64, service: f64) -> String {
    format!(
        "mean block-layer queue time {} against {} of service",
        secs(queue),
        secs(service)
    )
}

/// A whole run with a long device service time.
pub fn slow_service(service: f64, slow_from: f64) -> String {
    format!(
        "mean device service time {} (slow from {})",
        secs(service),
        secs(slow_from)
    )
}

/// Device time that a contended CPU accounts for (`part` per IO, or its rise).
pub fn cpu_wait(location: &str, part: f64, raised: bool, host: &str, stalled: f64) -> String {
    format!(
        "{} per IO at {location}{} can be waiting for a CPU: some task waited for the CPU of {host} {} of the time",
        secs(part),
        if raised { " (its rise)" } else { "" },
        pct(stalled)
    )
}

/// A whole run whose IOs wait above the block layer while the device has room.
pub fn held_above_block(above: f64, local: f64) -> String {
    format!(
        "{} per IO held above the block layer ({} of the local device time) while the device queue had room: throttling (such as a cgroup IO limit) before the device",
        secs(above),
        pct(above / local)
    )
}

/// The round trip per IO to a peer against the path's RTT and the replica's own time.
pub fn round_trip_beyond_rtt(
    d: Direction,
    peer: &str,
    round_trip: f64,
    rtt: f64,
    own: f64,
) -> String {
    let times = round_trip / (rtt + own).max(f64::MIN_POSITIVE);
    let own = if own > 0.0 {
        format!(" plus the replica's own {}", secs(own))
    } else {
        String::new()
    };
    format!(
        "the round trip per {d} to {peer} is {}, {times:.0}x the path's RTT of {}{own}",
        secs(round_trip),
        secs(rtt),
    )
}

/// Data waiting toward a peer, and how long an IO waits behind it.
pub fn send_queue_wait(
    d: Direction,
    wait: f64,
    peer: &str,
    queued: f64,
    rate: f64,
    busy: Option<f64>,
    sndbuf: Option<f64>,
) -> String {
    let mut out = format!(
        "{d}s wait {} in the send queue to {peer} ({} not yet acknowledged, delivered at {})",
        secs(wait),
        bytes(queued),
        bit_rate(rate)
    );
    if let Some(b) = busy {
        let _ = write!(
            out,
            "; the connections were busy {} of the time",
            pct(b.min(1.0))
        );
        if let Some(s) = sndbuf.filter(|s| *s > 0.0) {
            let _ = write!(
                out,
                ", the writer waited for send buffer room {}",
                pct(s.min(1.0))
            );
        }
    }
    out
}

/// The connections to `peer` waited for its receive window `share` of the time.
pub fn receive_window_bound(d: Direction, peer: &str, share: f64) -> String {
    format!(
        "the connections to {peer} waited for its receive window {} of the time: it reads the \
         {d}s more slowly than the path delivers them, so the queue is not the path's",
        pct(share.min(1.0))
    )
}

/// How much of its rate a shaper or link on the path carries.
pub fn link_use(what: &str, bytes_per_second: f64, rate: f64) -> String {
    format!(
        "{what} carries {}, {} of its {}",
        bit_rate(bytes_per_second),
        pct(bytes_per_second / rate),
        bit_rate(rate)
    )
}

/// Pause frames counted on the path.
pub fn pause_frames(frames: f64, most_on: &str) -> String {
    format!(
        "{} pause frames on the path, most on {most_on}",
        count(frames)
    )
}

/// A qdisc, as the saturation findings name it: "the tbf qdisc on sw sb".
pub fn qdisc_on(qdisc: &str, host: &str, interface: &str) -> String {
    format!("the {qdisc} qdisc on {host} {interface}")
}

/// A link, as the saturation findings name it: "the link eth0 of h1".
pub fn link_on(host: &str, interface: &str) -> String {
    format!("the link {interface} of {host}")
}

// ---- verdicts ----

/// Why no verdict could be given.
pub fn no_verdict(why: &str) -> String {
    format!("no verdict: {why}")
}

/// A run without latency to analyse.
pub const NO_HOST_LATENCY: &str = "no host in the run has read or write latency";

/// A host without latency to analyse.
pub fn host_without_latency(host: &str) -> String {
    format!("host {host} has no read or write latency")
}

/// Another host's verdict, told beside the chosen one.
pub fn other_host(host: &str, cause: Cause, confidence: f64) -> String {
    format!("host {host}: {cause} (confidence {confidence:.2})")
}

/// Another direction's verdict, told beside the chosen one.
pub fn other_direction(
    d: Direction,
    cause: Cause,
    location: Option<&str>,
    confidence: f64,
) -> String {
    let at = location.map_or(String::new(), |l| format!(" at {l}"));
    format!("{d}s: {cause}{at} (confidence {confidence:.2})")
}

/// Too few intervals with a p99 to analyse a direction.
pub fn too_few_intervals(d: Direction, present: usize, n: usize, min: usize) -> String {
    format!("only {present} of {n} intervals have a {d} p99; the analysis needs at least {min}")
}

/// The first evidence of a direction: its p99 against the baseline.
pub fn headline(d: Direction, r: &DirectionResult) -> String {
    let p99 = r.p99_seconds.map_or("-".into(), secs);
    let base = r
        .baseline
        .as_ref()
        .map_or("-".into(), |b| secs(b.p99_seconds));
    match r.state {
        State::Raised => format!(
            "p99 {d} latency {p99} against a {base} baseline in {} of {} intervals",
            r.raised_intervals.len(),
            r.intervals
        ),
        _ => format!(
            "p99 {d} latency {p99} over {} intervals, none raised above the run's own baseline: the run is judged as a whole",
            r.intervals
        ),
    }
}

/// The analysed host's other devices (name, service time in the raised intervals or over
/// the run, and in the other intervals).
pub fn other_devices(host: &str, op: &str, fared: &[(String, f64, Option<f64>)]) -> String {
    let each: Vec<String> = fared
        .iter()
        .map(|(name, now, before)| match before {
            Some(b) => format!("{name} {} -> {}", secs(*b), secs(*now)),
            None => format!("{name} {}", secs(*now)),
        })
        .collect();
    format!(
        "the other devices of {host} that served {op}s: service time {}",
        each.join(", ")
    )
}

/// A replica that stayed healthy while the cause was on another.
pub fn healthy_replica(s: &PartShare, retransmits: Option<f64>) -> String {
    let (amount, of) = match s.baseline_seconds {
        Some(b) => (format!("{} -> {}", secs(b), secs(s.seconds)), "rise"),
        None => (secs(s.seconds), "latency"),
    };
    let retransmits = retransmits.map_or(String::new(), |r| {
        format!(", {} retransmits to it", count(r))
    });
    format!(
        "replica {} stayed healthy: round trip {amount} ({} of the {of}){retransmits}",
        s.key,
        pct(s.share)
    )
}

/// Where the latency (rise) goes: the largest part, others after it.
pub fn where_it_goes(shares: &[PartShare]) -> Option<String> {
    let mut top: Vec<&PartShare> = shares
        .iter()
        .filter(|s| matches!(s.part, PartKind::LocalDevice | PartKind::Replica))
        .collect();
    top.sort_by(|a, b| b.share.total_cmp(&a.share));
    let amount = |s: &PartShare| match s.baseline_seconds {
        Some(b) => format!("{} -> {}", secs(b), secs(s.seconds)),
        None => secs(s.seconds),
    };
    let describe = |s: &PartShare| {
        format!(
            "{} {} ({})",
            pct(s.share),
            part_phrase(s.part, &s.key),
            amount(s)
        )
    };
    let first = top.first()?;
    let of = if first.baseline_seconds.is_some() {
        "of the rise is"
    } else {
        "of the latency is"
    };
    let mut out = format!(
        "{} {of} {} ({})",
        pct(first.share),
        part_phrase(first.part, &first.key),
        amount(first)
    );
    for s in top.iter().skip(1) {
        out.push_str(&format!("; {}", describe(s)));
    }
    if first.part == PartKind::LocalDevice {
        let mut sub: Vec<&PartShare> = shares
            .iter()
            .filter(|s| {
                matches!(
                    s.part,
                    PartKind::Queue | PartKind::Service | PartKind::AboveBlock
                )
            })
            .collect();
        sub.sort_by(|a, b| b.share.total_cmp(&a.share));
        if let Some(s) = sub.first() {
            out.push_str(&format!("; of the local device's part, {}", describe(s)));
        }
    }
    Some(out)
}

/// IOs waited for a free slot in `full` of `of` intervals, `mean` seconds on average.
pub fn slot_wait(mean: f64, full: usize, of: usize) -> String {
    format!(
        "IOs waited {} on average for a free IO slot in {full} of {of} intervals, all slots busy with IOs in flight: that wait is counted with the parts that held the slots",
        secs(mean)
    )
}

/// `waiting`'s IOs waited for slots that `holder`'s IOs held.
pub fn slot_holders(
    waiting: Direction,
    holder: Direction,
    wait: f64,
    full: usize,
    of: usize,
    held: f64,
    own: f64,
) -> String {
    format!(
        "{waiting}s waited {} on average for a free IO slot in {full} of {of} intervals, with most slots busy; a {holder} held its slot {} from submission, a {waiting} {}: the {holder}s' cause holds the {waiting}s back",
        secs(wait),
        secs(held),
        secs(own)
    )
}

/// Confidence of a direction that takes the cause of the one holding its IO slots.
pub fn slot_holders_confidence(holder: Direction, of: f64, share: f64, c: f64) -> String {
    format!(
        "the {holder}s' confidence {of:.2} × the share of the latency spent waiting for a slot {share:.2} = {c:.2}"
    )
}

/// The best candidate of a rise no cause explains.
pub fn best_candidate(top: Option<&Candidate>) -> String {
    top.map_or("no candidate could be formed".into(), |c| {
        format!(
            "the best candidate, {} at {}, scores {:.2}",
            c.cause, c.location, c.score
        )
    })
}

/// The confidence of an unexplained rise: its best candidate scores too low.
pub fn unexplained_confidence(best: &str, min_score: f64) -> String {
    format!("no cause named: {best}, below the {min_score:.2} needed")
}

/// The evidence of an unexplained rise.
pub fn unexplained(best: &str) -> String {
    format!(
        "no measured part or signal explains the rise ({best}); CPU, the application or an unmeasured hop remain possible"
    )
}

/// How a named cause's confidence was reached: its score, its evidence, the runner-up.
pub fn named_confidence(
    state: State,
    c: &Candidate,
    runner: Option<&Candidate>,
    confidence: f64,
) -> String {
    let second = runner.map_or(0.0, |o| o.score);
    let what = if state == State::Raised {
        "of the rise"
    } else {
        "of the latency"
    };
    let signal = if state == State::Raised {
        "signal evidence"
    } else {
        "anomaly strength"
    };
    let how = match (c.share, c.association) {
        (Some(s), Some(a)) => format!("0.5 × {} {what} there + 0.5 × {signal} {a:.2}", pct(s)),
        (Some(s), None) => format!("0.8 × {} {what} there, no signal to confirm it", pct(s)),
        (None, Some(a)) => format!("0.8 × {signal} {a:.2}, no latency breakdown to place it"),
        (None, None) => "no evidence".into(),
    };
    let unmet = if c.requirement_met {
        ""
    } else {
        "; its defining condition is not met, so it keeps 30%"
    };
    let next = runner.map_or("no other cause scores".into(), |o| {
        format!(
            "the next cause, {} at {}, scores {:.2}",
            o.cause, o.location, o.score
        )
    });
    format!(
        "{} at {} scores {:.2} ({how}{unmet}); {next}; confidence = {:.2} - 0.5 × {second:.2} = {:.2}",
        c.cause, c.location, c.score, c.score, confidence
    )
}

/// A named cause whose defining condition does not hold.
pub fn not_confirmed(cause: Cause) -> String {
    format!("not confirmed: none of the signals that define {cause} was measured or rose")
}

/// How a healthy direction's confidence was reached, from the kinds of evidence missing.
pub fn healthy_confidence(missing: &[&str], measured: usize, confidence: f64) -> String {
    if missing.is_empty() {
        format!("no anomaly, with all three kinds of evidence measured: confidence {confidence:.2}")
    } else {
        format!(
            "no anomaly, but {} not measured: confidence 0.5 + 0.5 × {measured}/3 = {confidence:.2}",
            missing.join(" and ")
        )
    }
}

/// The evidence of a healthy direction: what was checked.
pub fn healthy(cx: &Context) -> String {
    format!("no anomalous signal: {}", checked(cx))
}

/// A summary of the signals that were checked: totals of counters, the largest levels.
fn checked(cx: &Context) -> String {
    // With replicas in the breakdown, the retransmits that matter are those to them (the
    // agent counts every peer of the machine).
    let replicas: Vec<&str> = cx.parts.replicas().map(|p| p.key.as_str()).collect();
    let relevant = |s: &SignalScore| {
        s.kind != SignalKind::Retransmits
            || replicas.is_empty()
            || s.peer.as_deref().is_some_and(|p| replicas.contains(&p))
    };
    let sum = |k: SignalKind| -> Option<f64> {
        let v: Vec<f64> = cx
            .scores
            .iter()
            .filter(|s| s.kind == k && relevant(s))
            .filter_map(|s| s.run)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let max = |k: SignalKind| -> Option<f64> {
        cx.scores
            .iter()
            .filter(|s| s.kind == k)
            .filter_map(|s| s.run)
            .reduce(f64::max)
    };
    let mut out = Vec::new();
    let retransmits = if replicas.is_empty() {
        "retransmits"
    } else {
        "retransmits to the replicas"
    };
    for (k, what) in [
        (SignalKind::Retransmits, retransmits),
        (SignalKind::QdiscDrops, "qdisc drops"),
        (SignalKind::InterfaceRxDrops, "interface rx drops"),
        (SignalKind::BlockErrors, "IO errors"),
    ] {
        // The agent counts a peer's retransmits from the first one: a replica with RTT
        // samples and no retransmit series had none.
        let none_yet = k == SignalKind::Retransmits
            && !replicas.is_empty()
            && cx.scores.iter().any(|s| {
                s.kind == SignalKind::Srtt
                    && s.peer.as_deref().is_some_and(|p| replicas.contains(&p))
            });
        if let Some(v) = sum(k).or(none_yet.then_some(0.0)) {
            out.push(format!("{} {what}", count(v)));
        }
    }
    for (k, what) in [
        (SignalKind::ServiceTime, "device service time"),
        (SignalKind::QueueTime, "block-layer queue time"),
        (SignalKind::InflightRatio, "in-flight"),
    ] {
        if let Some(v) = max(k) {
            out.push(format!("{what} {}", level(k, v)));
        }
    }
    if out.is_empty() {
        "no signal was measured".into()
    } else {
        out.join(", ")
    }
}
