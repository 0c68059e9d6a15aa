//! `network_saturation` on synthetic runs: a replica behind a link at its rate (writes
//! waiting in the send queue, nothing dropped), a paused link, and the runs it must leave
//! alone: a link used well, a link at its rate with a short round trip, a path that drops
//! (congestion), a slow replica device.

use analysis::{BlockOp, Cause, Device, Host, Interface, Latency, Peer, Qdisc, Run, Series, State};

const N: usize = 12;
const REPLICA: &str = "198.18.0.2";
/// 40 Mbit/s.
const LINK: f64 = 5e6;

fn c(v: f64) -> Series {
    vec![Some(v); N]
}

/// The writes of a run: constant latency, `round_trip` of it waiting for the replica.
fn writes(round_trip: f64, iops: f64) -> Latency {
    let mut l = Latency {
        iops: c(iops),
        p50_seconds: c(round_trip),
        p99_seconds: c(round_trip * 1.1),
        mean_seconds: c(round_trip + 0.000_3),
        local_device_seconds: c(0.000_2),
        ..Latency::default()
    };
    l.replicas.insert(REPLICA.into(), c(round_trip));
    l
}

/// A client `a` writing to replica `b` through switch `sw`, whose port toward `b` is a
/// tbf at `link` bytes per second letting out `used` of its rate. The client's connections to the
/// replica hold `queued` bytes, delivered at `delivered` bytes per second, with an RTT of
/// `srtt`.
struct Setup {
    round_trip: f64,
    srtt: f64,
    queued: f64,
    delivered: f64,
    link: f64,
    used: f64,
}

impl Setup {
    /// The run: 64 KiB writes 16 deep behind 40 Mbit/s.
    fn saturated() -> Setup {
        Setup {
            round_trip: 0.217,
            srtt: 0.007,
            queued: 1.1e6,
            delivered: 0.99 * LINK,
            link: LINK,
            used: 0.99,
        }
    }

    /// A link four times faster at 60% of its rate.
    fn used_well() -> Setup {
        Setup {
            round_trip: 0.004,
            srtt: 0.001_5,
            queued: 70_000.0,
            delivered: 12e6,
            link: 4.0 * LINK,
            used: 0.6,
        }
    }

    fn run(&self) -> Run {
        let mut a = Host {
            name: "a".into(),
            addresses: vec!["198.18.0.1".into()],
            write: Some(writes(self.round_trip, 75.0)),
            ..Host::default()
        };
        let mut dev = Device::default();
        dev.ops.insert(
            "write".into(),
            BlockOp {
                ios: c(75.0),
                queue_seconds: c(0.000_01),
                service_seconds: c(0.000_1),
                errors: c(0.0),
            },
        );
        a.devices.insert("loop0".into(), dev);
        a.peers.insert(
            REPLICA.into(),
            Peer {
                retransmits: c(0.0),
                srtt_seconds: c(self.srtt),
                notsent_bytes: c(self.queued * 0.9),
                send_queue_bytes: c(self.queued),
                delivery_rate_bytes_per_second: c(self.delivered),
                busy_seconds: c(self.used.min(1.0)),
                rwnd_limited_seconds: c(0.0),
                sndbuf_limited_seconds: c(0.0),
                ..Peer::default()
            },
        );
        let b = Host {
            name: "b".into(),
            addresses: vec![REPLICA.into()],
            ..Host::default()
        };
        let mut sw = Host {
            name: "sw".into(),
            switch: true,
            ..Host::default()
        };
        sw.qdiscs.push(Qdisc {
            interface: "sb".into(),
            qdisc: "tbf".into(),
            drops: c(0.0),
            backlog_bytes: c(30_000.0),
            overlimits: c(4_000.0),
            sent_bytes: c(self.used * self.link),
            rate_bytes_per_second: c(self.link),
        });
        Run {
            interval_seconds: 1.0,
            starts: (0..N).map(|i| i as f64).collect(),
            hosts: vec![a, b, sw],
        }
    }
}

fn analyze(run: &Run) -> analysis::Report {
    analysis::analyze(run).expect("the run lines up")
}

fn saturation(r: &analysis::Report) -> &analysis::Candidate {
    r.hosts[0].directions[0]
        .candidates
        .iter()
        .find(|c| c.cause == Cause::NetworkSaturation)
        .expect("a saturation candidate")
}

#[test]
fn a_link_at_its_rate_with_writes_in_the_send_queue_is_saturation() {
    let r = analyze(&Setup::saturated().run());
    let v = &r.verdict;
    assert_eq!(v.cause, Cause::NetworkSaturation, "{}", r.to_text());
    assert_eq!(v.location.as_deref(), Some("path to replica 198.18.0.2"));
    assert_eq!(r.hosts[0].directions[0].state, State::Steady);
    assert!(v.confidence >= 0.7, "{}", r.to_text());
    let e = v.evidence.join("\n");
    for part in [
        "writes wait 222 ms in the send queue to 198.18.0.2",
        "the tbf qdisc on sw sb carries 39.6 Mbit/s, 99% of its 40 Mbit/s",
        "the round trip per write to 198.18.0.2 is 217 ms, 31x the path's RTT of 7.0 ms",
    ] {
        assert!(e.contains(part), "{part:?} in\n{e}");
    }
}

#[test]
fn a_link_used_well_is_healthy() {
    let r = analyze(&Setup::used_well().run());
    assert_eq!(r.verdict.cause, Cause::None, "{}", r.to_text());
    assert!(!saturation(&r).requirement_met);
}

#[test]
fn a_link_at_its_rate_with_a_short_round_trip_is_healthy() {
    // Busy, even queued, but each write's round trip is a few RTTs: the link is used to
    // the full and nobody waits for long.
    let s = Setup {
        round_trip: 0.012,
        srtt: 0.004,
        ..Setup::saturated()
    };
    let r = analyze(&s.run());
    assert_eq!(r.verdict.cause, Cause::None, "{}", r.to_text());
}

#[test]
fn a_long_round_trip_without_a_full_link_or_queue_is_not_saturation() {
    // The replica is slow to answer (what it does is not measured): nothing waits on the
    // path, which runs at a fraction of its rate.
    let s = Setup {
        queued: 20_000.0,
        delivered: 1e6,
        used: 0.2,
        ..Setup::saturated()
    };
    let r = analyze(&s.run());
    assert!(!saturation(&r).requirement_met, "{}", r.to_text());
    assert_ne!(r.verdict.cause, Cause::NetworkSaturation);
}

#[test]
fn the_send_queue_alone_tells_without_a_shaper() {
    let mut run = Setup::saturated().run();
    run.hosts.retain(|h| h.name != "sw");
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
}

#[test]
fn pause_frames_tell_without_a_queue_or_rate() {
    let mut run = Setup::saturated().run();
    run.hosts.retain(|h| h.name != "sw");
    let p = run.hosts[0].peers.get_mut(REPLICA).unwrap();
    p.send_queue_bytes.clear();
    p.notsent_bytes.clear();
    let r = analyze(&run);
    assert!(!saturation(&r).requirement_met, "{}", r.to_text());
    run.hosts[0].interfaces.insert(
        "eth0".into(),
        Interface {
            mtu_bytes: c(1500.0),
            rx_pause_frames: c(800.0),
            tx_pause_frames: c(0.0),
            ..Interface::default()
        },
    );
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
    let e = r.verdict.evidence.join("\n");
    assert!(
        e.contains("9,600 pause frames on the path, most on the link eth0 of a"),
        "{e}"
    );
}

/// The share of each interval the client's connections to the replica waited for its
/// receive window.
fn rwnd_limited(run: &mut Run, share: f64) {
    run.hosts[0]
        .peers
        .get_mut(REPLICA)
        .unwrap()
        .rwnd_limited_seconds = c(share);
}

#[test]
fn a_send_queue_held_by_the_receivers_window_is_not_saturation() {
    // No shaper: only the send queue tells. The connections waited for the replica's
    // receive window 80% of the time: the replica does not read, the path is idle.
    let mut run = Setup::saturated().run();
    run.hosts.retain(|h| h.name != "sw");
    rwnd_limited(&mut run, 0.8);
    let r = analyze(&run);
    assert!(!saturation(&r).requirement_met, "{}", r.to_text());
    assert_ne!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
    let e = saturation(&r).findings.join("\n");
    assert!(
        e.contains("the connections to 198.18.0.2 waited for its receive window 80% of the time"),
        "{e}"
    );
    // Below half the time, the queue is the path's again.
    rwnd_limited(&mut run, 0.3);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
    // A link at its rate still tells, whatever the window did.
    let mut run = Setup::saturated().run();
    rwnd_limited(&mut run, 0.8);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
}

#[test]
fn a_path_that_drops_is_congestion_not_saturation() {
    let mut run = Setup::saturated().run();
    run.hosts[0].peers.get_mut(REPLICA).unwrap().retransmits = c(40.0);
    let q = &mut run.hosts[2].qdiscs[0];
    q.drops = c(30.0);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkCongestion, "{}", r.to_text());
    assert!(!saturation(&r).requirement_met);
}

#[test]
fn a_slow_replica_device_is_not_saturation() {
    // The replica's own device takes 200 ms a write: the round trip is its, and the
    // writes waiting toward it wait for it to answer, not for the link.
    let s = Setup {
        used: 0.3,
        queued: 200_000.0,
        delivered: 1.5e6,
        ..Setup::saturated()
    };
    let mut run = s.run();
    let mut dev = Device {
        inflight: c(16.0),
        queue_limit: c(128.0),
        ..Device::default()
    };
    dev.ops.insert(
        "write".into(),
        BlockOp {
            ios: c(75.0),
            queue_seconds: c(0.000_1),
            service_seconds: c(0.2),
            errors: c(0.0),
        },
    );
    run.hosts[1].devices.insert("loop1".into(), dev);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::SlowDevice, "{}", r.to_text());
    assert!(!saturation(&r).requirement_met);
}

#[test]
fn saturation_that_sets_in_mid_run_is_named_on_the_raised_intervals() {
    let healthy = Setup::used_well().run();
    let mut run = Setup::saturated().run();
    // Two thirds as the healthy run (at 60% of the same link), the rest saturated.
    const FROM: usize = 8;
    for (h, g) in run.hosts.iter_mut().zip(&healthy.hosts) {
        let mix = |s: &mut Series, t: &Series| {
            if !s.is_empty() && !t.is_empty() {
                s[..FROM].copy_from_slice(&t[..FROM]);
            }
        };
        if let (Some(w), Some(x)) = (h.write.as_mut(), g.write.as_ref()) {
            mix(&mut w.p50_seconds, &x.p50_seconds);
            mix(&mut w.p99_seconds, &x.p99_seconds);
            mix(&mut w.mean_seconds, &x.mean_seconds);
            for (k, s) in w.replicas.iter_mut() {
                mix(s, &x.replicas[k]);
            }
        }
        for (k, p) in h.peers.iter_mut() {
            let q = &g.peers[k];
            mix(&mut p.srtt_seconds, &q.srtt_seconds);
            mix(&mut p.send_queue_bytes, &q.send_queue_bytes);
            mix(&mut p.notsent_bytes, &q.notsent_bytes);
            mix(
                &mut p.delivery_rate_bytes_per_second,
                &q.delivery_rate_bytes_per_second,
            );
        }
        for q in &mut h.qdiscs {
            q.sent_bytes[..FROM].fill(Some(0.6 * LINK));
        }
    }
    let r = analyze(&run);
    let d = &r.hosts[0].directions[0];
    assert_eq!(d.state, State::Raised, "{}", r.to_text());
    assert_eq!(d.raised_intervals, (FROM..N).collect::<Vec<_>>());
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
}

#[test]
fn a_queue_standing_at_a_saturated_shaper_is_saturation_and_elsewhere_congestion() {
    // A shaper at its rate keeps a standing queue without dropping: that is saturation.
    let mut run = Setup::saturated().run();
    run.hosts[2].qdiscs[0].backlog_bytes = c(150_000.0);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
    // The same queue on a path whose round trip stays short is a standing queue, as before.
    let mut run = Setup::used_well().run();
    run.hosts[2].qdiscs[0].backlog_bytes = c(150_000.0);
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkCongestion, "{}", r.to_text());
}

#[test]
fn a_shaper_rate_set_within_the_first_judged_interval_does_not_hide_the_link_at_its_rate() {
    // The shaper alone tells (little waits in the send queue), and its new rate was set
    // during the first interval: there the agent still saw the old, four times faster rate
    // and the traffic of a link used well. A mean over the intervals makes the link 77%
    // used; the intervals themselves are at 99% but one.
    let s = Setup {
        queued: 20_000.0,
        ..Setup::saturated()
    };
    let mut run = s.run();
    for q in run.hosts.iter_mut().flat_map(|h| h.qdiscs.iter_mut()) {
        q.rate_bytes_per_second[0] = Some(4.0 * LINK);
        q.sent_bytes[0] = Some(0.6 * LINK);
    }
    let r = analyze(&run);
    assert_eq!(r.verdict.cause, Cause::NetworkSaturation, "{}", r.to_text());
    assert!(
        saturation(&r)
            .findings
            .iter()
            .any(|f| f.contains("99% of its 40 Mbit/s")),
        "{}",
        r.to_text()
    );
}
