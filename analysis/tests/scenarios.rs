//! The analysis on synthetic runs: every cause mid-run and from the first second, with
//! confounders, healthy and noise-only runs, missing data and runs too short to judge.

mod synth;

use analysis::{Cause, Direction, Report, Run, Series, State, analyze};
use synth::{Fault, Lab, Rng};

fn report(lab: &Lab) -> Report {
    analyze(&lab.build()).expect("a synthetic run lines up")
}

fn direction_result(r: &Report, d: Direction) -> &analysis::DirectionResult {
    r.hosts[0]
        .directions
        .iter()
        .find(|x| x.direction == d)
        .unwrap_or_else(|| panic!("{d}s were recorded"))
}

fn write_result(r: &Report) -> &analysis::DirectionResult {
    direction_result(r, Direction::Write)
}

fn evidence(r: &Report) -> String {
    r.verdict.evidence.join("\n")
}

/// Best score among candidates of the given causes.
fn best_of(r: &Report, causes: &[Cause]) -> f64 {
    write_result(r)
        .candidates
        .iter()
        .filter(|c| causes.contains(&c.cause))
        .map(|c| c.score)
        .fold(0.0, f64::max)
}

const NETWORK: &[Cause] = &[Cause::NetworkCongestion, Cause::MtuMismatch];
const DEVICE: &[Cause] = &[Cause::DeviceSaturation, Cause::SlowDevice];

fn assert_cause(r: &Report, cause: Cause, state: State) {
    assert_eq!(r.verdict.cause, cause, "{}", r.to_text());
    assert_eq!(write_result(r).state, state, "{}", r.to_text());
}

// ---- each cause in the middle of a run, with device and network both noisy ----

#[test]
fn congestion_on_the_replica_path_is_named_over_a_noisy_device() {
    let r = report(&Lab::new(Fault::Congestion).noisy());
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    let d = write_result(&r);
    assert_eq!(d.raised_intervals, (15..27).collect::<Vec<_>>());
    assert!(r.verdict.confidence >= 0.6, "{}", r.to_text());
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("path to replica 198.18.0.2")
    );
    let e = evidence(&r);
    assert!(
        e.contains("p99 write latency") && e.contains("in 12 of 40 intervals"),
        "{e}"
    );
    assert!(
        e.contains("100% of the rise is waiting for replica 198.18.0.2"),
        "{e}"
    );
    assert!(
        e.contains("retransmits to 198.18.0.2 in the 12 raised intervals"),
        "{e}"
    );
    assert!(e.contains("tbf qdisc on h1 v1"), "{e}");
    assert!(best_of(&r, DEVICE) < 0.2, "{}", r.to_text());
}

#[test]
fn device_saturation_is_named_over_a_noisy_network() {
    let r = report(&Lab::new(Fault::Saturation).noisy());
    assert_cause(&r, Cause::DeviceSaturation, State::Raised);
    assert!(r.verdict.confidence >= 0.6, "{}", r.to_text());
    let e = evidence(&r);
    assert!(
        e.contains("in-flight at the queue limit (128 of 128) in 12 of 12 raised intervals"),
        "{e}"
    );
    assert!(e.contains("in the block-layer queue of loop3"), "{e}");
    assert!(best_of(&r, NETWORK) < 0.2, "{}", r.to_text());
}

#[test]
fn a_slow_device_is_named_over_a_noisy_network() {
    let r = report(&Lab::new(Fault::SlowDevice).noisy());
    assert_cause(&r, Cause::SlowDevice, State::Raised);
    assert!(r.verdict.confidence >= 0.6, "{}", r.to_text());
    assert!(
        evidence(&r).contains("device service time on h1 loop3"),
        "{}",
        r.to_text()
    );
    assert!(best_of(&r, NETWORK) < 0.2, "{}", r.to_text());
    assert!(
        best_of(&r, &[Cause::DeviceSaturation]) < 0.2,
        "{}",
        r.to_text()
    );
}

/// The run of `fault` with its writes sent to `dm-0`, a bio-based device stacked on loop3
/// (as the agent counts one: no queue time, its service time holding the time below). With
/// `adds`, dm-0 adds the device time itself and loop3 stays at its baseline; without, the
/// time is loop3's and dm-0 passes it through.
fn stacked(fault: Fault, adds: bool) -> Report {
    let mut run = Lab::new(fault).noisy().build();
    let h1 = &mut run.hosts[0];
    let loop3 = h1.devices["loop3"].clone();
    let mut dm = analysis::Device {
        parents: vec!["loop3".into()],
        ..analysis::Device::default()
    };
    for (name, op) in &loop3.ops {
        let mut top = op.clone();
        top.service_seconds = op
            .service_seconds
            .iter()
            .zip(&op.queue_seconds)
            .map(|(s, q)| Some(s.unwrap_or(0.0) + q.unwrap_or(0.0) + 0.00002))
            .collect();
        top.queue_seconds = Vec::new();
        dm.ops.insert(name.clone(), top);
    }
    if adds {
        // loop3 keeps its first interval's times throughout.
        for op in h1.devices.get_mut("loop3").unwrap().ops.values_mut() {
            for s in [&mut op.service_seconds, &mut op.queue_seconds] {
                let first = s[0];
                s.iter_mut().for_each(|x| *x = first);
            }
        }
    }
    h1.devices.insert("dm-0".into(), dm);
    h1.local_devices = vec!["dm-0".into()];
    analyze(&run).expect("lines up")
}

#[test]
fn a_slow_device_below_a_stacked_one_is_named_with_it() {
    let r = stacked(Fault::SlowDevice, false);
    assert_cause(&r, Cause::SlowDevice, State::Raised);
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("device loop3 (below dm-0) on h1"),
        "{}",
        r.to_text()
    );
    // On the lower device's own service time, not on its share alone.
    assert!(
        evidence(&r).contains("device service time on h1 loop3"),
        "{}",
        r.to_text()
    );
}

#[test]
fn a_stacked_layer_that_adds_the_time_is_named_itself() {
    let r = stacked(Fault::SlowDevice, true);
    assert_cause(&r, Cause::SlowDevice, State::Raised);
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("device dm-0 on h1"),
        "{}",
        r.to_text()
    );
}

/// `lab`'s run with the replica's round trip turned into a remote device's time: h1 writes
/// to nvme1c1n1, which h2 (198.18.0.2) serves over NVMe/TCP through the switch, and
/// replicates nothing. Whatever held up the replica's round trip now holds up the device.
fn remote_run(lab: Lab) -> Run {
    let mut run = lab.build();
    let h1 = &mut run.hosts[0];
    let lat = h1.write.as_mut().expect("writes");
    let round_trip = lat
        .replicas
        .remove("198.18.0.2")
        .expect("the replica's round trip");
    lat.local_device_seconds = round_trip.clone();
    let mut dev = h1.devices.remove("loop3").expect("loop3");
    for op in dev.ops.values_mut() {
        op.service_seconds = round_trip.clone();
    }
    dev.peer = Some("198.18.0.2".into());
    h1.devices.insert("nvme1c1n1".into(), dev);
    h1.local_devices = vec!["nvme1c1n1".into()];
    run
}

fn remote_device(fault: Fault) -> Report {
    analyze(&remote_run(Lab::new(fault).noisy())).expect("lines up")
}

/// The candidate of `cause` for writes.
fn candidate(r: &Report, cause: Cause) -> &analysis::Candidate {
    write_result(r)
        .candidates
        .iter()
        .find(|c| c.cause == cause)
        .unwrap_or_else(|| panic!("no {cause} candidate: {}", r.to_text()))
}

/// Congestion in raised intervals on the path to the remote device's server, named with
/// the device, with `evidence_part` among its evidence.
fn assert_congestion_toward_the_target(r: &Report, evidence_part: &str) {
    assert_cause(r, Cause::NetworkCongestion, State::Raised);
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("path to peer 198.18.0.2, which serves device nvme1c1n1"),
        "{}",
        r.to_text()
    );
    assert!(evidence(r).contains(evidence_part), "{}", r.to_text());
}

#[test]
fn congestion_toward_the_server_of_a_remote_device_names_device_and_peer() {
    let r = remote_device(Fault::Congestion);
    assert_congestion_toward_the_target(&r, "retransmits to 198.18.0.2");
    // The device holds the rise, but its time is the path's: not a slow device.
    let slow = candidate(&r, Cause::SlowDevice);
    assert!(!slow.requirement_met, "{}", r.to_text());
    assert!(
        slow.findings
            .iter()
            .any(|f| f.contains("nvme1c1n1 is served by 198.18.0.2")),
        "{}",
        r.to_text()
    );
}

/// An NVMe/TCP write path through a shallow buffer that drops all run long, on a busy
/// emulated host: h1 writes to the multipath head nvme1n1, whose time goes down to its path
/// nvme1c1n1, served by 198.18.0.2. In six intervals a few retransmits time out (the head's
/// and the path's service time rise 30 ms, the p99 five-fold) while some task waits for
/// h1's CPU three times as often as in the others.
fn congested_head_on_a_busy_host() -> Report {
    let mut run = remote_run(Lab::new(Fault::Congestion).throughout().noisy());
    let timed_out = |i: usize| (20..26).contains(&i);
    let raise = |s: &mut Series, by: fn(f64) -> f64| {
        for (i, v) in s.iter_mut().enumerate() {
            if let (Some(v), true) = (v.as_mut(), timed_out(i)) {
                *v = by(*v);
            }
        }
    };
    let n = run.starts.len();
    let h1 = &mut run.hosts[0];
    let lat = h1.write.as_mut().expect("writes");
    raise(&mut lat.local_device_seconds, |v| v + 0.030);
    raise(&mut lat.p99_seconds, |v| v * 5.0);
    let mut path = h1.devices.remove("nvme1c1n1").expect("the path device");
    for op in path.ops.values_mut() {
        raise(&mut op.service_seconds, |v| v + 0.030);
    }
    let mut head = path.clone();
    head.peer = None;
    head.parents = vec!["nvme1c1n1".into()];
    for op in head.ops.values_mut() {
        op.queue_seconds = Vec::new();
    }
    h1.devices.insert("nvme1c1n1".into(), path);
    h1.devices.insert("nvme1n1".into(), head);
    h1.local_devices = vec!["nvme1n1".into()];
    h1.cpu_stalled_seconds = (0..n)
        .map(|i| Some(if timed_out(i) { 0.24 } else { 0.08 }))
        .collect();
    analyze(&run).expect("lines up")
}

#[test]
fn congestion_all_run_long_is_named_when_its_timeouts_raise_a_few_intervals() {
    let r = congested_head_on_a_busy_host();
    // The drops did not rise with the timeouts: the run-long counts are the evidence.
    assert_congestion_toward_the_target(&r, "drops at the tbf qdisc");
    // The path's service time rose by 30 ms: no CPU that some task waited for 24% of the
    // time accounts for that, so the CPU is not placed on the device.
    assert!(
        !candidate(&r, Cause::Cpu)
            .findings
            .iter()
            .any(|f| f.contains("can be waiting for a CPU")),
        "{}",
        r.to_text()
    );
}

#[test]
fn a_remote_device_slow_on_its_own_is_a_slow_device_and_a_healthy_one_nothing() {
    // The server's disk is slow and the path is clean: the device is slow, not the path.
    let r = remote_device(Fault::SlowReplicaDevice);
    assert_eq!(r.verdict.cause, Cause::SlowDevice, "{}", r.to_text());
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("device nvme1c1n1 on h1"),
        "{}",
        r.to_text()
    );
    assert!(best_of(&r, NETWORK) < 0.2, "{}", r.to_text());
    let r = remote_device(Fault::None);
    assert_eq!(r.verdict.cause, Cause::None, "{}", r.to_text());
}

/// A healthy remote device judged as a whole, whose initiator resent `per_write` segments
/// per write (spread evenly) toward the device's server, with nothing dropped on the path;
/// `segments_per_write` sent per write when the agent counted them.
fn remote_resending(per_write: f64, segments_per_write: Option<f64>) -> Report {
    let mut run = remote_run(Lab::new(Fault::None).throughout().noisy());
    let h1 = &mut run.hosts[0];
    let iops: Series = h1.write.as_ref().expect("writes").iops.clone();
    let per_interval = |per: f64| -> Series { iops.iter().map(|v| v.map(|x| x * per)).collect() };
    let peer = h1.peers.get_mut("198.18.0.2").expect("the server");
    peer.retransmits = per_interval(per_write);
    if let Some(n) = segments_per_write {
        peer.delivered_segments = per_interval(n);
    }
    analyze(&run).expect("lines up")
}

#[test]
fn retransmits_are_judged_against_the_segments_sent_when_counted() {
    // An emulated NVMe/TCP initiator that stalled now and then: 0.03 retransmits per 64 KiB
    // write is 0.06% of its 45 segments, no congestion, as the evidence's figure says.
    let r = remote_resending(0.03, Some(45.0));
    assert_cause(&r, Cause::None, State::Steady);
    let c = candidate(&r, Cause::NetworkCongestion);
    assert!(!c.requirement_met, "{}", r.to_text());
    // Without the segments' count the same run is judged per IO, where it is an anomaly.
    let r = remote_resending(0.03, None);
    assert_cause(&r, Cause::NetworkCongestion, State::Steady);
    // A buffer that drops bursts: 1.5% of the segments resent is congestion, with its share.
    let r = remote_resending(0.675, Some(45.0));
    assert_cause(&r, Cause::NetworkCongestion, State::Steady);
    assert!(evidence(&r).contains("1.50% of"), "{}", r.to_text());
}

#[test]
fn throttling_above_the_block_layer_is_a_slow_device_not_the_network() {
    let r = report(&Lab::new(Fault::Throttle).noisy());
    assert_cause(&r, Cause::SlowDevice, State::Raised);
    assert!(
        evidence(&r).contains("above the block layer"),
        "{}",
        r.to_text()
    );
    assert!(best_of(&r, NETWORK) < 0.2, "{}", r.to_text());
}

#[test]
fn waiting_for_a_request_slot_with_the_queue_full_is_saturation_not_throttling() {
    for lab in [
        Lab::new(Fault::TagWait).noisy(),
        Lab::new(Fault::TagWait).noisy().throughout(),
    ] {
        let r = report(&lab);
        assert_eq!(r.verdict.cause, Cause::DeviceSaturation, "{}", r.to_text());
        assert!(
            evidence(&r).contains("in-flight at the queue limit"),
            "{}",
            r.to_text()
        );
    }
}

#[test]
fn an_mtu_mismatch_is_not_mistaken_for_congestion() {
    let r = report(&Lab::new(Fault::Mtu).noisy());
    assert_cause(&r, Cause::MtuMismatch, State::Raised);
    assert!(r.verdict.confidence >= 0.6, "{}", r.to_text());
    let e = evidence(&r);
    assert!(
        e.contains("MTUs differ on the path: 9000 on h1 v1, h2 v2; 1500 on sw sa, sw sb"),
        "{e}"
    );
    assert!(e.contains("rx drops on sw sa"), "{e}");
    assert!(
        best_of(&r, &[Cause::NetworkCongestion]) < 0.3,
        "{}",
        r.to_text()
    );
}

#[test]
fn a_slow_replica_device_is_not_blamed_on_the_network() {
    let r = report(&Lab::new(Fault::SlowReplicaDevice).noisy());
    assert_cause(&r, Cause::SlowDevice, State::Raised);
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("device loop4 on h2 (replica 198.18.0.2)")
    );
    assert!(best_of(&r, NETWORK) < 0.3, "{}", r.to_text());
}

#[test]
fn without_confounders_each_cause_is_clearer_still() {
    for (fault, cause) in [
        (Fault::Congestion, Cause::NetworkCongestion),
        (Fault::Saturation, Cause::DeviceSaturation),
        (Fault::SlowDevice, Cause::SlowDevice),
        (Fault::Throttle, Cause::SlowDevice),
        (Fault::Mtu, Cause::MtuMismatch),
    ] {
        let r = report(&Lab::new(fault));
        assert_cause(&r, cause, State::Raised);
        assert!(r.verdict.confidence >= 0.6, "{fault:?}: {}", r.to_text());
    }
}

#[test]
fn the_causal_side_wins_across_seeds() {
    for seed in 1..=20 {
        for (fault, cause) in [
            (Fault::Congestion, Cause::NetworkCongestion),
            (Fault::Saturation, Cause::DeviceSaturation),
            (Fault::SlowDevice, Cause::SlowDevice),
            (Fault::Throttle, Cause::SlowDevice),
            (Fault::Mtu, Cause::MtuMismatch),
        ] {
            let mut lab = Lab::new(fault).noisy();
            lab.seed = seed;
            let r = report(&lab);
            assert_eq!(
                r.verdict.cause,
                cause,
                "seed {seed} {fault:?}: {}",
                r.to_text()
            );
        }
    }
}

// ---- a run slow from its first second: judged as a whole ----

#[test]
fn slow_from_the_start_each_cause_is_found_by_where_latency_goes() {
    for (fault, cause, needle) in [
        (
            Fault::Congestion,
            Cause::NetworkCongestion,
            "retransmits to 198.18.0.2 over the run",
        ),
        (
            Fault::Saturation,
            Cause::DeviceSaturation,
            "in-flight at the queue limit (128 of 128) in 40 of 40 intervals",
        ),
        (
            Fault::SlowDevice,
            Cause::SlowDevice,
            "mean device service time",
        ),
        (
            Fault::Throttle,
            Cause::SlowDevice,
            "held above the block layer",
        ),
        (
            Fault::Mtu,
            Cause::MtuMismatch,
            "rx drops on sw sa over the run",
        ),
        (
            Fault::SlowReplicaDevice,
            Cause::SlowDevice,
            "mean device service time",
        ),
    ] {
        let r = report(&Lab::new(fault).noisy().throughout());
        assert_cause(&r, cause, State::Steady);
        assert!(write_result(&r).raised_intervals.is_empty());
        assert!(r.verdict.confidence >= 0.5, "{fault:?}: {}", r.to_text());
        let e = evidence(&r);
        assert!(
            e.contains("none raised above the run's own baseline"),
            "{e}"
        );
        assert!(e.contains(needle), "{fault:?}: {e}");
    }
}

#[test]
fn slow_from_the_start_throttling_is_not_the_network() {
    let r = report(&Lab::new(Fault::Throttle).noisy().throughout());
    assert_eq!(best_of(&r, NETWORK), 0.0, "{}", r.to_text());
}

// ---- healthy and noise-only runs ----

#[test]
fn a_healthy_run_is_none_with_full_confidence() {
    let r = report(&Lab::new(Fault::None));
    assert_cause(&r, Cause::None, State::Steady);
    assert_eq!(r.verdict.confidence, 1.0);
    let e = evidence(&r);
    assert!(
        e.contains("no anomalous signal: 0 retransmits to the replicas, 0 qdisc drops"),
        "{e}"
    );
}

#[test]
fn a_noise_only_run_finds_nothing() {
    for seed in 1..=20 {
        let mut lab = Lab::new(Fault::None).noisy();
        lab.seed = seed;
        lab.latency_noise = 0.4;
        let r = report(&lab);
        assert_cause(&r, Cause::None, State::Steady);
        assert!(
            write_result(&r).candidates.iter().all(|c| c.score == 0.0),
            "{}",
            r.to_text()
        );
    }
}

#[test]
fn a_healthy_run_without_agent_data_is_none_with_less_confidence() {
    let mut lab = Lab::new(Fault::None);
    lab.agent = false;
    let r = report(&lab);
    assert_cause(&r, Cause::None, State::Steady);
    assert!(r.verdict.confidence < 0.75, "{}", r.to_text());
    assert!(
        r.verdict.confidence_explained.contains("not measured"),
        "{}",
        r.to_text()
    );
}

// ---- missing data ----

#[test]
fn without_a_breakdown_the_signals_still_find_congestion() {
    let mut lab = Lab::new(Fault::Congestion).noisy();
    lab.breakdown = false;
    let r = report(&lab);
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    let d = write_result(&r);
    assert!(
        d.breakdown
            .iter()
            .all(|p| p.part != analysis::breakdown::PartKind::Replica)
    );
    assert_eq!(d.candidates[0].share, None, "{}", r.to_text());
}

#[test]
fn without_agent_signals_the_breakdown_points_at_the_network_unconfirmed() {
    let mut lab = Lab::new(Fault::Congestion);
    lab.agent = false;
    let r = report(&lab);
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    assert!(r.verdict.confidence < 0.5, "{}", r.to_text());
    assert!(
        r.verdict.confidence_explained.contains("not met"),
        "{}",
        r.to_text()
    );
    assert!(evidence(&r).contains("not confirmed"), "{}", r.to_text());
}

#[test]
fn without_breakdown_or_signals_a_rise_is_unexplained() {
    let mut lab = Lab::new(Fault::Congestion);
    lab.agent = false;
    lab.breakdown = false;
    let r = report(&lab);
    assert_cause(&r, Cause::Unexplained, State::Raised);
    assert!(
        evidence(&r).contains("no measured part or signal explains the rise"),
        "{}",
        r.to_text()
    );
}

/// Removes every `k`-th value of every series in the run.
fn punch_holes(run: &mut Run, k: usize, rng: &mut Rng) {
    let mut hole = |s: &mut Vec<Option<f64>>| {
        for (i, v) in s.iter_mut().enumerate() {
            if (i + rng.upto(k as u64 - 1) as usize).is_multiple_of(k) {
                *v = None;
            }
        }
    };
    for h in &mut run.hosts {
        if let Some(w) = h.write.as_mut() {
            hole(&mut w.p99_seconds);
            hole(&mut w.mean_seconds);
            hole(&mut w.local_device_seconds);
            w.replicas.values_mut().for_each(&mut hole);
        }
        for d in h.devices.values_mut() {
            hole(&mut d.inflight);
            for op in d.ops.values_mut() {
                hole(&mut op.queue_seconds);
                hole(&mut op.service_seconds);
            }
        }
        for p in h.peers.values_mut() {
            hole(&mut p.retransmits);
        }
        for q in &mut h.qdiscs {
            hole(&mut q.drops);
        }
        for i in h.interfaces.values_mut() {
            hole(&mut i.rx_drops);
        }
    }
}

#[test]
fn gaps_in_every_series_do_not_change_the_cause() {
    for (fault, cause) in [
        (Fault::Congestion, Cause::NetworkCongestion),
        (Fault::Saturation, Cause::DeviceSaturation),
        (Fault::Mtu, Cause::MtuMismatch),
    ] {
        let mut run = Lab::new(fault).noisy().build();
        punch_holes(&mut run, 5, &mut Rng::new(3));
        let r = analyze(&run).unwrap();
        assert_eq!(r.verdict.cause, cause, "{fault:?}: {}", r.to_text());
    }
}

#[test]
fn p99_is_recomputed_from_histograms_when_only_they_were_recorded() {
    let mut lab = Lab::new(Fault::Congestion).noisy();
    lab.histograms = true;
    let r = report(&lab);
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    // The merged p99 of the raised intervals lies in the slow bucket (≥ 250 ms).
    let p99 = write_result(&r).p99_seconds.unwrap();
    assert!(p99 > 0.2 && p99 < 1.0, "{p99}");
}

#[test]
fn values_that_are_not_numbers_read_as_missing() {
    let mut run = Lab::new(Fault::SlowDevice).build();
    let w = run.hosts[0].write.as_mut().unwrap();
    w.p99_seconds[3] = Some(f64::NAN);
    w.p99_seconds[4] = Some(f64::INFINITY);
    w.p99_seconds[5] = Some(-1.0);
    run.hosts[0]
        .peers
        .values_mut()
        .for_each(|p| p.retransmits[7] = Some(f64::NAN));
    let r = analyze(&run).unwrap();
    assert_eq!(r.verdict.cause, Cause::SlowDevice, "{}", r.to_text());
    assert_eq!(write_result(&r).intervals, 37);
}

// ---- short runs and bad input ----

#[test]
fn very_short_runs_have_insufficient_data() {
    for n in [0, 1, 2, 3, 7] {
        let mut lab = Lab::new(Fault::Congestion);
        lab.n = n;
        lab.from = 1;
        lab.to = 3;
        let r = report(&lab);
        assert_eq!(r.verdict.cause, Cause::InsufficientData, "n={n}");
        assert_eq!(r.verdict.confidence, 0.0);
        let e = evidence(&r);
        assert!(
            e.contains(&format!("only {n} of {n} intervals have a write p99")),
            "{e}"
        );
    }
}

#[test]
fn the_shortest_run_analysed_gives_a_result() {
    let mut lab = Lab::new(Fault::Congestion);
    lab.n = 8;
    lab.from = 4;
    lab.to = 7;
    let r = report(&lab);
    assert_ne!(r.verdict.cause, Cause::InsufficientData);
}

#[test]
fn a_run_without_latency_has_insufficient_data() {
    let mut run = Lab::new(Fault::None).build();
    for h in &mut run.hosts {
        h.write = None;
    }
    let r = analyze(&run).unwrap();
    assert_eq!(r.verdict.cause, Cause::InsufficientData);
    assert!(r.hosts.is_empty());
}

#[test]
fn series_that_do_not_line_up_are_a_clear_error() {
    let mut run = Lab::new(Fault::None).build();
    run.hosts[0].write.as_mut().unwrap().p99_seconds.pop();
    let e = analyze(&run).unwrap_err();
    assert_eq!(
        e.to_string(),
        "host h1 write p99_seconds has 39 entries but the run has 40 intervals"
    );
    let mut run = Lab::new(Fault::None).build();
    run.interval_seconds = f64::NAN;
    assert!(
        analyze(&run)
            .unwrap_err()
            .to_string()
            .contains("interval length")
    );
}

#[test]
fn arbitrary_values_never_panic() {
    let mut rng = Rng::new(99);
    for round in 0..300 {
        let mut lab = Lab::new(if round % 2 == 0 {
            Fault::Congestion
        } else {
            Fault::Saturation
        });
        lab.n = 1 + rng.upto(30) as usize;
        lab.from = rng.upto(lab.n as u64) as usize;
        lab.to = lab.from + rng.upto(10) as usize;
        lab.histograms = round % 3 == 0;
        let mut run = lab.build();
        let mut wreck = |s: &mut Vec<Option<f64>>| {
            for v in s.iter_mut() {
                *v = match rng.upto(9) as u64 {
                    0 => None,
                    1 => Some(f64::NAN),
                    2 => Some(-5.0),
                    3 => Some(0.0),
                    4 => Some(f64::INFINITY),
                    5 => Some(1e300),
                    _ => *v,
                };
            }
        };
        for h in &mut run.hosts {
            if let Some(w) = h.write.as_mut() {
                wreck(&mut w.p99_seconds);
                wreck(&mut w.mean_seconds);
                wreck(&mut w.iops);
                w.replicas.values_mut().for_each(&mut wreck);
            }
            for d in h.devices.values_mut() {
                wreck(&mut d.inflight);
                wreck(&mut d.queue_limit);
                d.ops
                    .values_mut()
                    .for_each(|o| wreck(&mut o.service_seconds));
            }
            h.peers.values_mut().for_each(|p| wreck(&mut p.retransmits));
            h.interfaces
                .values_mut()
                .for_each(|i| wreck(&mut i.mtu_bytes));
        }
        let r = analyze(&run).unwrap();
        assert!(
            (0.0..=1.0).contains(&r.verdict.confidence),
            "{}",
            r.to_text()
        );
        let _ = r.to_text();
    }
}

// ---- several directions and hosts, JSON ----

#[test]
fn healthy_reads_do_not_hide_congested_writes() {
    let mut lab = Lab::new(Fault::Congestion).noisy();
    lab.reads = true;
    let r = report(&lab);
    assert_eq!(r.verdict.cause, Cause::NetworkCongestion);
    assert_eq!(r.verdict.direction, Some(Direction::Write));
    let reads = r.hosts[0]
        .directions
        .iter()
        .find(|d| d.direction == Direction::Read)
        .unwrap();
    assert_eq!(reads.cause, Cause::None, "{}", r.to_text());
    assert!(evidence(&r).contains("reads: none"), "{}", r.to_text());
}

#[test]
fn fleet_mode_analyses_each_host_and_names_the_affected_one() {
    let mut run = Lab::new(Fault::Congestion).noisy().build();
    let mut healthy = Lab::new(Fault::None).build().hosts.remove(0);
    healthy.name = "h3".into();
    healthy.addresses = vec!["198.18.0.3".into()];
    run.hosts.push(healthy);
    let r = analyze(&run).unwrap();
    assert_eq!(r.hosts.len(), 2);
    assert_eq!(r.hosts[1].verdict.cause, Cause::None);
    assert_eq!(r.verdict.cause, Cause::NetworkCongestion);
    assert_eq!(r.verdict.host.as_deref(), Some("h1"));
    assert!(evidence(&r).contains("host h3: none"), "{}", r.to_text());
}

#[test]
fn the_report_and_the_run_are_json() {
    let run = Lab::new(Fault::Congestion).noisy().build();
    let text = serde_json::to_string(&run).unwrap();
    let back: Run = serde_json::from_str(&text).unwrap();
    assert!(back == run, "the run survives a JSON round trip");
    let r = analyze(&run).unwrap();
    let v: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"]["cause"], "network_congestion");
    assert!(v["verdict"]["confidence"].as_f64().unwrap() > 0.5);
    assert!(v["verdict"]["evidence"].as_array().unwrap().len() >= 3);
    let signals = v["hosts"][0]["directions"][0]["signals"]
        .as_array()
        .unwrap();
    let retrans = signals
        .iter()
        .find(|s| s["kind"] == "retransmits" && s["host"] == "h1")
        .expect("retransmits are scored");
    assert!(retrans["rho"].as_f64().unwrap() > 0.5, "{retrans}");
    assert_eq!(retrans["rose"], true);
    let back: Report = serde_json::from_value(v).unwrap();
    assert_eq!(back.verdict.cause, r.verdict.cause);
    assert_eq!(back.verdict.evidence, r.verdict.evidence);
}

/// Congestion toward 198.18.0.2 (retransmits), while the round trip to another peer,
/// 198.18.0.3, rose by a millisecond against a p99 that rose by hundreds: that peer's RTT
/// cannot account for the rise, so it does not compete with the path that resent. With
/// the rule off (any RTT rise counts fully), it would.
fn beside_a_peer_whose_rtt_rose_a_little(t: &analysis::Thresholds) -> Report {
    let lab = Lab {
        breakdown: false,
        ..Lab::new(Fault::Congestion)
    };
    let mut run = lab.build();
    let h1 = &mut run.hosts[0];
    // Only the peers' own signals: no queue on the host that every path shares.
    h1.qdiscs.clear();
    h1.skb_drops.clear();
    let srtt: Series = (0..lab.n)
        .map(|i| {
            Some(if (lab.from..lab.to).contains(&i) {
                0.0013
            } else {
                0.0003
            })
        })
        .collect();
    h1.peers.insert(
        "198.18.0.3".into(),
        analysis::Peer {
            retransmits: vec![Some(0.0); lab.n],
            srtt_seconds: srtt,
            ..analysis::Peer::default()
        },
    );
    analysis::analyze_with(&run, t).expect("a synthetic run lines up")
}

fn score_toward(r: &Report, peer: &str) -> f64 {
    write_result(r)
        .candidates
        .iter()
        .filter(|c| c.cause == Cause::NetworkCongestion && c.location.contains(peer))
        .map(|c| c.score)
        .fold(0.0, f64::max)
}

#[test]
fn a_round_trip_that_rose_a_little_does_not_explain_a_large_rise() {
    let t = analysis::Thresholds::default();
    let r = beside_a_peer_whose_rtt_rose_a_little(&t);
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    let (resent, rtt) = (
        score_toward(&r, "198.18.0.2"),
        score_toward(&r, "198.18.0.3"),
    );
    assert!(
        r.verdict
            .location
            .as_deref()
            .unwrap_or("")
            .contains("198.18.0.2"),
        "{}",
        r.to_text()
    );
    assert!(
        rtt < 0.2 * resent,
        "{rtt} against {resent}\n{}",
        r.to_text()
    );
    // Nor does it meet congestion's requirement by itself.
    assert!(
        write_result(&r)
            .candidates
            .iter()
            .filter(|c| c.cause == Cause::NetworkCongestion && c.location.contains("198.18.0.3"))
            .all(|c| !c.requirement_met),
        "{}",
        r.to_text()
    );
    let off = analysis::Thresholds {
        rtt_rise_share: 1e-9,
        min_rtt_rise_share: 0.0,
        ..t
    };
    let r = beside_a_peer_whose_rtt_rose_a_little(&off);
    let rtt_off = score_toward(&r, "198.18.0.3");
    assert!(
        rtt_off > 0.5 * score_toward(&r, "198.18.0.2"),
        "without the rule the RTT's path scores {rtt_off}\n{}",
        r.to_text()
    );
}

/// Reads and writes share 16 IO slots at a fixed rate, and congestion toward the replica
/// slows the writes all run long (the demo's 64 KiB run through a shallow buffer): every
/// slot holds a write and the reads wait for one. `full` says whether the slots were all
/// busy (else the reads' wait has no holder).
fn reads_behind_writes(full: bool) -> Report {
    let lab = Lab {
        reads: true,
        ..Lab::new(Fault::Congestion).throughout()
    };
    let mut run = lab.build();
    let on = |i: usize| (lab.from..lab.to).contains(&i);
    let h1 = &mut run.hosts[0];
    let writes = h1.write.clone().expect("writes");
    let in_use: Series = (0..lab.n)
        .map(|i| Some(if on(i) && full { 1.0 } else { 0.4 }))
        .collect();
    let read = h1.read.as_mut().expect("reads");
    for i in 0..lab.n {
        let own = read.local_device_seconds[i].unwrap();
        // Waiting for a slot: about half a write's time, when the slots are all busy.
        let wait = if on(i) {
            0.5 * writes.mean_seconds[i].unwrap()
        } else {
            0.0
        };
        read.mean_seconds[i] = Some(own + wait);
        read.p99_seconds[i] = Some(2.5 * (own + wait));
    }
    read.slots_in_use = in_use.clone();
    h1.write.as_mut().unwrap().slots_in_use = in_use;
    analyze(&run).expect("a synthetic run lines up")
}

fn read_result(r: &Report) -> &analysis::DirectionResult {
    direction_result(r, Direction::Read)
}

#[test]
fn reads_waiting_for_slots_that_writes_hold_take_the_writes_cause() {
    let r = reads_behind_writes(true);
    let (w, rd) = (write_result(&r), read_result(&r));
    assert_eq!(w.cause, Cause::NetworkCongestion, "{}", r.to_text());
    assert_eq!(rd.cause, Cause::NetworkCongestion, "{}", r.to_text());
    assert_eq!(rd.location, w.location, "{}", r.to_text());
    assert!(
        rd.confidence > 0.0 && rd.confidence <= w.confidence,
        "{}",
        r.to_text()
    );
    let said = rd.evidence.join("\n");
    assert!(
        said.contains("reads waited") && said.contains("writes' cause holds the reads back"),
        "{said}"
    );
    // The host's verdict stays the writes': theirs is the cause itself.
    assert_eq!(r.hosts[0].verdict.direction, Some(Direction::Write));
    // The same reads without every slot busy: no holder, the reads keep their own verdict.
    let r = reads_behind_writes(false);
    assert!(
        matches!(read_result(&r).cause, Cause::None | Cause::Unexplained),
        "{}",
        r.to_text()
    );
}

// ---- a file on a network file system: the local IO's time is its server's ----

#[test]
fn congestion_toward_a_network_file_systems_server_is_named_from_the_local_io() {
    let mut lab = Lab::new(Fault::Congestion).noisy();
    lab.network_fs = true;
    let r = report(&lab);
    assert_cause(&r, Cause::NetworkCongestion, State::Raised);
    assert_eq!(
        r.verdict.location.as_deref(),
        Some("path to peer 198.18.0.2"),
        "{}",
        r.to_text()
    );
    // The local IO's rise is the path's: each server may hold all of it.
    let to = |peer: &str| {
        write_result(&r)
            .candidates
            .iter()
            .find(|c| c.cause == Cause::NetworkCongestion && c.location.ends_with(peer))
            .unwrap_or_else(|| panic!("no candidate toward {peer}: {}", r.to_text()))
    };
    // No block device is under the file: no device cause to weigh.
    assert!(
        write_result(&r)
            .candidates
            .iter()
            .all(|c| !DEVICE.contains(&c.cause)),
        "{}",
        r.to_text()
    );
    let (busy, calm) = (to("198.18.0.2"), to("198.18.0.3"));
    assert!(busy.share.is_some_and(|s| s > 0.9), "{busy:?}");
    assert_eq!(busy.share, calm.share, "{}", r.to_text());
    // Only the signals on its own path can make a server the cause.
    assert!(busy.requirement_met && !calm.requirement_met, "{calm:?}");
    assert!(calm.score < busy.score / 2.0, "{}", r.to_text());
}

#[test]
fn without_network_peers_a_deviceless_local_io_is_not_put_on_the_network() {
    let mut lab = Lab::new(Fault::Congestion).noisy();
    lab.network_fs = true;
    let mut run = lab.build();
    run.hosts[0].peers.clear();
    let r = analyze(&run).expect("a synthetic run lines up");
    assert!(
        write_result(&r)
            .candidates
            .iter()
            .filter(|c| NETWORK.contains(&c.cause))
            .all(|c| c.share.is_none_or(|s| s == 0.0)),
        "{}",
        r.to_text()
    );
}
