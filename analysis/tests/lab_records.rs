//! Runs recorded in stornet's lab (`tests/scenarios`), trimmed to the series that matter.
//! Unless said otherwise, host a writes 64 KiB blocks at 100 per second with every write
//! replicated to host b through a switch whose ports are shaped to 200 Mbit/s.

use analysis::{Cause, Report, Run, analyze};

/// The analysis of `r`, whose verdict must be `cause` (the report's text otherwise).
fn judged(r: &Run, cause: Cause) -> Report {
    let report = analyze(r).unwrap();
    assert_eq!(report.verdict.cause, cause, "{}", report.to_text());
    report
}

fn run(json: &str) -> Run {
    let run: Run = serde_json::from_str(json).expect("a lab record");
    run.validate().expect("its series line up");
    run
}

/// A shallow (16 KiB) buffer: the path drops most of every write and TCP recovers from
/// timeouts, so the replica cannot keep up with the schedule; every IO slot stays busy and
/// IOs wait seconds for one. The replica's round trip (hundreds of ms) is a small part of
/// that latency, yet it is what holds the slots: the wait belongs to it.
#[test]
fn waiting_for_slots_held_by_a_congested_replica_is_network_congestion() {
    let mut r = run(include_str!("lab/shallow-buffer.json"));
    let report = judged(&r, Cause::NetworkCongestion);
    assert_eq!(
        report.verdict.location.as_deref(),
        Some("path to replica 198.19.1.2")
    );
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("for a free IO slot"), "{e}");
    assert!(e.contains("retransmits to 198.19.1.2"), "{e}");

    // Without knowing the slots were full, the wait would count against every part and
    // the run would pass as healthy, with a p99 of seconds.
    r.hosts[0].write.as_mut().unwrap().slots_in_use.clear();
    judged(&r, Cause::None);
}

/// A deep (4 MiB) buffer, healthy, while another pair of namespaces on the same machine
/// (not on this path, not watched by the agent) pushed a bulk transfer through a 64 KiB
/// buffer: the kernel counted 170,000 `qdisc_drop` drops, none of them at this path's
/// qdiscs, which the agent watches and which dropped nothing.
#[test]
fn qdisc_drops_elsewhere_on_the_machine_do_not_make_a_path_congested() {
    let r = run(include_str!("lab/deep-buffer-foreign-drops.json"));
    let h = &r.hosts[0];
    let foreign: f64 = h.skb_drops["qdisc_drop"].iter().flatten().sum();
    let on_path: f64 = h.qdiscs.iter().flat_map(|q| q.drops.iter().flatten()).sum();
    assert!(foreign > 100_000.0 && on_path == 0.0);
    judged(&r, Cause::None);

    // A host whose qdiscs were not measured still has the drop reason to go by.
    let mut unwatched = r.clone();
    unwatched.hosts[0].qdiscs.clear();
    judged(&unwatched, Cause::NetworkCongestion);
}

/// Scenario 5: 64 writes outstanding on a loop device whose queue holds 31 requests, in
/// front of a backing file throttled to 2,000 writes per second. The backing file's
/// throttle releases writes in bursts, so the queue fills and drains: a point sample of
/// in-flight finds it full in only some intervals, while the device was busy with 26 of
/// its 31 slots on average (completed IOs × service time, Little's law). IOs waiting for
/// a slot show as time above the block layer, which without the queue at its limit would
/// read as throttling.
#[test]
fn a_queue_that_fills_in_bursts_is_device_saturation() {
    let r = run(include_str!("lab/short-queue.json"));
    let report = judged(&r, Cause::DeviceSaturation);
    assert_eq!(
        report.verdict.location.as_deref(),
        Some("device loop1 on a")
    );

    // The samples that caught the queue full are not what holds the verdict.
    let mut missed = r.clone();
    let dev = missed.hosts[0].devices.get_mut("loop1").unwrap();
    dev.inflight.iter_mut().for_each(|v| *v = Some(0.0));
    judged(&missed, Cause::DeviceSaturation);

    // Half the IOs at the same service time: 13 of 31 busy on average, the queue had room,
    // and the wait above the block layer is throttling before the device.
    let write = dev_ops(&mut missed, "loop1");
    write.ios.iter_mut().flatten().for_each(|v| *v /= 2.0);
    judged(&missed, Cause::SlowDevice);
}

fn dev_ops<'a>(r: &'a mut Run, device: &str) -> &'a mut analysis::BlockOp {
    r.hosts[0]
        .devices
        .get_mut(device)
        .and_then(|d| d.ops.get_mut("write"))
        .expect("the device's writes")
}

/// A run's first k intervals are a run of k intervals: every series cut at k.
#[test]
fn the_first_intervals_of_a_run_line_up() {
    for json in [
        include_str!("lab/shallow-buffer.json"),
        include_str!("lab/deep-buffer-foreign-drops.json"),
        include_str!("lab/short-queue.json"),
        include_str!("lab/two-replicas.json"),
        include_str!("lab/cpu-taken.json"),
        include_str!("lab/busy-host.json"),
    ] {
        let r = run(json);
        assert_eq!(r.first(r.len()), r);
        for k in 0..r.len() {
            let p = r.first(k);
            assert_eq!(p.len(), k);
            p.validate().unwrap_or_else(|e| panic!("first {k}: {e}"));
            assert!(analyze(&p).is_ok());
        }
    }
}

/// Scenario 7: every write goes to two replicas, 198.18.13.2 behind a deep switch port and
/// 198.18.13.3 behind a shallow one (16 KiB), 100 writes of 64 KiB per second.
#[test]
fn of_two_replicas_the_congested_one_is_named_and_the_other_is_healthy() {
    let r = run(include_str!("lab/two-replicas.json"));
    let report = analyze(&r).unwrap();
    let v = &report.verdict;
    assert_eq!(v.cause, Cause::NetworkCongestion, "{}", report.to_text());
    assert_eq!(v.location.as_deref(), Some("path to replica 198.18.13.3"));
    let healthy: Vec<&String> = v
        .evidence
        .iter()
        .filter(|e| e.contains("stayed healthy"))
        .collect();
    assert_eq!(
        healthy,
        [
            "replica 198.18.13.2 stayed healthy: round trip 2.2 ms (<1% of the latency), 0 retransmits to it"
        ],
        "{}",
        report.to_text()
    );

    // Had the other replica's round trip been as long, it would not be called healthy.
    let mut both = r.clone();
    let write = both.hosts[0].write.as_mut().unwrap();
    let slow = write.replicas["198.18.13.3"].clone();
    write.replicas.insert("198.18.13.2".into(), slow);
    let report = analyze(&both).unwrap();
    assert!(
        !report
            .verdict
            .evidence
            .iter()
            .any(|e| e.contains("stayed healthy")),
        "{}",
        report.to_text()
    );
}

/// Scenario 1's healthy path (deep buffers), while for the first 3 s two CPU spinners per
/// CPU and a disk writer ran on the same machine: some task waited for a CPU 60% of the
/// time then, 3% afterwards, and the write p99 rose from 2.4 ms to 21-25 ms with it.
#[test]
fn latency_that_rises_with_a_starved_cpu_is_the_cpu() {
    let r = run(include_str!("lab/cpu-taken.json"));
    let report = judged(&r, Cause::Cpu);
    assert_eq!(report.verdict.location.as_deref(), Some("CPU of a"));
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("time some task waited for a CPU on a"), "{e}");

    // Without the CPU's pressure the same rise reads as the device's: a loop device's
    // service time is its worker thread's CPU time, and it rose with the starvation.
    let mut blind = r.clone();
    blind.hosts[0].cpu_stalled_seconds.clear();
    judged(&blind, Cause::SlowDevice);

    // A CPU with room to spare all along is no candidate, whatever the host's share.
    let mut idle = r.clone();
    let cpu = &mut idle.hosts[0].cpu_stalled_seconds;
    cpu.iter_mut().flatten().for_each(|v| *v = v.min(0.05));
    let report = analyze(&idle).unwrap();
    let h = &report.hosts[0];
    assert!(
        h.directions
            .iter()
            .flat_map(|d| &d.candidates)
            .all(|c| c.cause != Cause::Cpu || c.score == 0.0),
        "{}",
        report.to_text()
    );
}

/// The same starvation under an application whose own latency is judged (a Ceph OSD's op
/// latency in fleet mode): no replica parts, and a p99 that rose 10-fold in the starved
/// intervals while the device's time, some of it CPU wait, is a sliver of that rise. The
/// CPU's own signal names it; that sliver must not make it "a place that holds almost none
/// of the rise".
#[test]
fn an_application_starved_of_cpu_is_the_cpu_whatever_its_device_holds() {
    let mut r = run(include_str!("lab/cpu-taken.json"));
    let w = r.hosts[0].write.as_mut().unwrap();
    w.replicas.clear();
    for i in 0..3 {
        for s in [&mut w.p99_seconds, &mut w.mean_seconds] {
            s[i] = s[i].map(|v| v * 10.0);
        }
    }
    let report = judged(&r, Cause::Cpu);
    assert_eq!(report.verdict.location.as_deref(), Some("CPU of a"));
}

/// The application starved of CPU as above, but by a CPU quota on a host whose CPUs are
/// busy anyway (stornet's Ceph lab: an OSD on a saturated 2-CPU machine, capped at 5% of a
/// CPU). Its tasks wait for a CPU 39-55% of the time whether capped or not, so that wait
/// did not rise with the latency; its cgroup's throttled time, zero before, held it off the
/// CPU 1.1 s per second under the cap. The throttled time names the CPU.
#[test]
fn a_cpu_quota_that_bites_on_a_busy_host_is_the_cpu() {
    let mut r = run(include_str!("lab/cpu-taken.json"));
    let w = r.hosts[0].write.as_mut().unwrap();
    w.replicas.clear();
    w.local_device_seconds.clear();
    for i in 0..3 {
        for s in [&mut w.p99_seconds, &mut w.mean_seconds] {
            s[i] = s[i].map(|v| v * 10.0);
        }
    }
    let (n, dt) = (r.starts.len(), r.interval_seconds);
    let waits = [0.39, 0.55, 0.41, 0.52, 0.47];
    r.hosts[0].cpu_stalled_seconds = (0..n).map(|i| Some(dt * waits[i % 5])).collect();
    let report = analyze(&r).unwrap();
    assert_ne!(report.verdict.cause, Cause::Cpu, "{}", report.to_text());

    r.hosts[0].cpu_throttled_seconds = (0..n)
        .map(|i| Some(if i < 3 { 1.1 * dt } else { 0.0 }))
        .collect();
    let report = judged(&r, Cause::Cpu);
    assert_eq!(report.verdict.location.as_deref(), Some("CPU of a"));
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("CPU quota held it off the CPU on a"), "{e}");
}

/// A healthy run on a busy host (`cargo xtask bench diagnosis`: two CPU spinners and a
/// direct-IO disk writer beside the load, replicas b and c behind deep ports): some task
/// waited for a CPU about a third of the time, and the client retransmitted 36 times to c,
/// 0.01 per write, with nothing dropped on the path. Late acknowledgements, not congestion.
#[test]
fn retransmits_on_a_contended_cpu_without_drops_are_not_congestion() {
    let r = run(include_str!("lab/busy-host.json"));
    judged(&r, Cause::None);

    // Without the CPU's pressure the receivers' drops of data they already had still
    // show the retransmits were needless; without both, they read as congestion.
    let mut blind = r.clone();
    blind.hosts[0].cpu_stalled_seconds.clear();
    judged(&blind, Cause::None);
    blind.hosts[0].skb_drops.remove("tcp_old_data");
    judged(&blind, Cause::NetworkCongestion);
}

/// Two more healthy runs on the busy host of the diagnosis bench, its CPU contended about
/// 45% of the time all run. In the first, p99 jumped to 47 ms against 13 ms in 6 scattered
/// intervals, with the loop device's service time (its worker thread's CPU time) 1.6 ms
/// higher in them; in the second nothing was raised and 1.0 ms per IO was spent above the
/// block layer (the submitting task's CPU time). Neither is a slow device.
#[test]
fn device_time_that_a_contended_cpu_accounts_for_is_not_a_slow_device() {
    let r = run(include_str!("lab/busy-host-jumps.json"));
    let report = judged(&r, Cause::Cpu);
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("can be waiting for a CPU"), "{e}");
    let mut blind = r.clone();
    blind.hosts[0].cpu_stalled_seconds.clear();
    judged(&blind, Cause::SlowDevice);
    // A disk's service time is the hardware's, not a CPU's: the same rise on a disk is
    // the disk's.
    let mut disk = r.clone();
    let h = &mut disk.hosts[0];
    let dev = h.devices.remove("loop0").unwrap();
    h.devices.insert("sdb".into(), dev);
    h.local_devices = vec!["sdb".into()];
    let report = judged(&disk, Cause::SlowDevice);
    // The host's other disk, written by the busy writer, is compared with itself.
    let e = report.verdict.evidence.join("\n");
    assert!(
        e.contains("the other devices of a that served writes: service time vda "),
        "{e}"
    );

    let r = run(include_str!("lab/busy-host-held.json"));
    judged(&r, Cause::None);
    let mut blind = r.clone();
    blind.hosts[0].cpu_stalled_seconds.clear();
    judged(&blind, Cause::SlowDevice);
}

/// The diagnosis bench's loss case: host c drops 3% of the TCP segments it receives at
/// random from 14 s into the run (an nftables rule; 1,426 segments by its counter), with
/// deep buffers everywhere. The kernel counts the drops as `netfilter_drop`, and the client
/// retransmits toward c only.
#[test]
fn counted_loss_without_a_queue_is_packet_loss_on_that_path() {
    let r = run(include_str!("lab/lossy-replica.json"));
    let report = judged(&r, Cause::PacketLoss);
    assert_eq!(
        report.verdict.location.as_deref(),
        Some("path to replica 198.18.13.3")
    );

    // The same drops with a queue overflowing on the path are congestion.
    let mut queued = r.clone();
    let h = &mut queued.hosts[0];
    let lost = h.skb_drops["netfilter_drop"].clone();
    let port = h
        .qdiscs
        .iter_mut()
        .find(|q| q.interface.ends_with("port-c"))
        .unwrap();
    port.drops = lost;
    judged(&queued, Cause::NetworkCongestion);

    // Loss no host counts leaves only the retransmits: congestion, as before.
    let mut uncounted = r.clone();
    uncounted.hosts[0].skb_drops.remove("netfilter_drop");
    judged(&uncounted, Cause::NetworkCongestion);

    // Without retransmits toward c, drops counted host-wide name no path.
    let mut elsewhere = r.clone();
    let peer = elsewhere.hosts[0].peers.get_mut("198.18.13.3").unwrap();
    peer.retransmits.iter_mut().flatten().for_each(|v| *v = 0.0);
    let report = analyze(&elsewhere).unwrap();
    assert_ne!(
        report.verdict.cause,
        Cause::PacketLoss,
        "{}",
        report.to_text()
    );
}

/// The diagnosis bench's MTU case: every host and switch port at MTU 9000, then 14 s into
/// the run the switch port toward c is set to 1500. The bridge drops each write's last
/// segment (larger than 1500 bytes, sent on its own) without counting it or sending ICMP,
/// so c's writes stall: no write to c completes after the onset, and the run ends with
/// one that waited 10 s. Only the MTUs on the path, c's MSS and the retransmits tell.
#[test]
fn segments_dropped_uncounted_at_a_smaller_port_mtu_are_an_mtu_mismatch() {
    let r = run(include_str!("lab/port-mtu-dropped.json"));
    let report = judged(&r, Cause::MtuMismatch);
    assert_eq!(
        report.verdict.location.as_deref(),
        Some("path to replica 198.18.241.3")
    );
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("larger than the 1500-byte MTU"), "{e}");

    // With the port at 9000 like the rest, the same retransmits are congestion.
    let mut same = r.clone();
    for i in same.hosts[0].interfaces.values_mut() {
        if i.mtu_bytes.iter().flatten().any(|&m| m == 1500.0) {
            i.mtu_bytes.iter_mut().flatten().for_each(|m| *m = 9000.0);
        }
    }
    judged(&same, Cause::NetworkCongestion);
}

/// The address of host `name` in `r`, and `r` without that host (its agent unsampled).
fn without_host(r: &Run, name: &str) -> (String, Run) {
    let addr = r.host(name).unwrap().addresses[0].clone();
    let mut blind = r.clone();
    blind.hosts.retain(|h| h.name != name);
    (addr, blind)
}

/// The diagnosis bench's slow replica device: b and c are nodes, each with its own disk and
/// agent. 14 s into the run the device behind c's disk (ext4 over a loop device over a
/// second one) is throttled to 40 writes per second: c's requests take long in service,
/// c's round trip and with it the client's p99 rise a hundredfold.
#[test]
fn a_replica_whose_disk_slowed_is_named_by_its_device() {
    let r = run(include_str!("lab/replica-disk-slow.json"));
    let report = judged(&r, Cause::SlowDevice);
    let c = r.host("c").unwrap();
    let (addr, blind) = without_host(&r, "c");
    let device = c.devices.keys().next().unwrap();
    assert_eq!(
        report.verdict.location.as_deref(),
        Some(format!("device {device} on c (replica {addr})").as_str()),
        "{}",
        report.to_text()
    );
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("stayed healthy"), "b is named healthy: {e}");
    // Without c's agent the rise is still placed on c's round trip, but nothing measured
    // there explains it.
    let report = analyze(&blind).unwrap();
    assert_ne!(
        report.verdict.cause,
        Cause::SlowDevice,
        "{}",
        report.to_text()
    );
    assert_ne!(report.verdict.cause, Cause::Cpu, "{}", report.to_text());
}

/// The diagnosis bench's replica CPU starvation: 14 s into the run a spinner joins c's
/// server in its cgroups under a CPU limit of a quarter of a CPU; c's agent reads the
/// pressure of that group, whose tasks then wait for a CPU most of the time (the kernel
/// counts throttled time as pressure). The hosts share one kernel, so the client's own
/// pressure (the machine's) rose too: the verdict must still be c's.
#[test]
fn a_replica_starved_under_its_cpu_limit_is_its_cpu() {
    let r = run(include_str!("lab/replica-cpu-starved.json"));
    let report = judged(&r, Cause::Cpu);
    let (addr, blind) = without_host(&r, "c");
    assert_eq!(
        report.verdict.location.as_deref(),
        Some(format!("CPU of c (replica {addr})").as_str()),
        "{}",
        report.to_text()
    );
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains("waited for a CPU on c"), "{e}");
    // Without c's agent nothing names c's CPU.
    let report = analyze(&blind).unwrap();
    assert!(
        report.verdict.location.as_deref() != Some(&format!("CPU of c (replica {addr})")),
        "{}",
        report.to_text()
    );
}

/// Scenario 9 on a busy machine (two CPU spinners beside it): c's CPU starved, its round
/// trip took 75% of the p99's 167 ms rise. Two things on the way rose too: every path's
/// smoothed RTT (b's from 2.8 to 5.6 ms) and the backlog of the switch port toward c (78
/// KiB at 200 Mbit/s: 3 ms). Neither explains more than a sliver of the rise, so neither
/// meets congestion's requirement: the verdict is c's CPU and b is named healthy. With
/// those gates off, congestion toward c is met and crowds the CPU's confidence.
#[test]
fn a_small_queue_and_rtt_rise_on_a_busy_host_are_not_congestion() {
    let r = run(include_str!("lab/replica-cpu-starved-busy.json"));
    let report = judged(&r, Cause::Cpu);
    let c = r.host("c").unwrap().addresses[0].clone();
    let b = r.host("b").unwrap().addresses[0].clone();
    let congestion_met = |report: &Report| {
        report.hosts[0].directions[0]
            .candidates
            .iter()
            .any(|k| k.cause == Cause::NetworkCongestion && k.requirement_met)
    };
    assert!(!congestion_met(&report), "{}", report.to_text());
    let e = report.verdict.evidence.join("\n");
    assert!(e.contains(&format!("replica {b} stayed healthy")), "{e}");
    assert_eq!(
        report.verdict.location.as_deref(),
        Some(format!("CPU of c (replica {c})").as_str())
    );
    let off = analysis::Thresholds {
        min_rtt_rise_share: 0.0,
        ..Default::default()
    };
    let report = analysis::analyze_with(&r, &off).unwrap();
    assert!(congestion_met(&report), "{}", report.to_text());
}

/// The same run, with a dozen retransmits toward b spread over it, as late acknowledgements
/// on a busy machine cause: b is still named healthy, since its retransmits did not rise
/// with the latency. Had they come with c's starvation, and not been needless, they would
/// speak against b.
#[test]
fn a_replica_with_a_few_retransmits_that_did_not_rise_stayed_healthy() {
    let r = run(include_str!("lab/replica-cpu-starved.json"));
    let b = r.host("b").unwrap().addresses[0].clone();
    let healthy = |r: &Run| {
        let report = judged(r, Cause::Cpu);
        report
            .verdict
            .evidence
            .iter()
            .any(|e| e.contains(&format!("replica {b} stayed healthy")))
    };
    let with_resent = |at: &dyn Fn(usize) -> bool| {
        let mut r = r.clone();
        let resent = &mut r.hosts[0].peers.get_mut(&b).unwrap().retransmits;
        for (i, v) in resent.iter_mut().enumerate() {
            *v = Some(if at(i) { 2.0 } else { 0.0 });
        }
        r
    };
    assert!(healthy(&r), "b is named healthy without retransmits");
    // 12 retransmits, every other interval: as many before the rise as during it.
    assert!(healthy(&with_resent(&|i| i % 2 == 0)), "evenly spread");
    // 10 retransmits, all in the intervals where c starved and the p99 rose: needless
    // ones (the client's host dropped data it already had: 193 `tcp_old_data`) do not
    // speak against b; without those drops they do.
    let mut rising = with_resent(&|i| i >= 17 && i % 2 == 1 || i >= 22);
    assert!(healthy(&rising), "needless retransmits");
    let old = rising.hosts[0].skb_drops.get_mut("tcp_old_data").unwrap();
    old.iter_mut().for_each(|v| *v = Some(0.0));
    assert!(!healthy(&rising), "retransmits that rose with the latency");
}

/// A healthy run of the diagnosis bench (nothing injected; deep ports, replicas b and c):
/// for its first 14 s something else on the machine kept a task waiting for a CPU 10-17% of
/// the time, and the client retransmitted 26 segments to b and 22 to c, 0.01 per write.
/// The receivers dropped 50 segments as `tcp_old_data`: they already had that data, so the
/// originals had arrived and only their acknowledgements were late. Not congestion.
#[test]
fn retransmits_the_receiver_found_needless_are_not_congestion() {
    let r = run(include_str!("lab/needless-retransmits.json"));
    judged(&r, Cause::None);
    // Newer kernels give a segment wholly before what the receiver last acknowledged a
    // reason of its own: the same evidence.
    let mut older = r.clone();
    for h in &mut older.hosts {
        if let Some(s) = h.skb_drops.remove("tcp_old_data") {
            h.skb_drops.insert("tcp_old_sequence".into(), s);
        }
    }
    judged(&older, Cause::None);
    let mut blind = r.clone();
    for h in &mut blind.hosts {
        h.skb_drops.remove("tcp_old_data");
    }
    let b = r.host("b").unwrap().addresses[0].clone();
    let report = judged(&blind, Cause::NetworkCongestion);
    assert_eq!(
        report.verdict.location.as_deref(),
        Some(format!("path to replica {b}").as_str())
    );
}

/// A cluster run (`loadgen run --client`): hosts a, b and c each write 64 KiB blocks at 100
/// per second to their own disk and replicate every write to the two others; only the
/// switch port toward c has a shallow (16 KiB) buffer. a and b find their writes waiting
/// for c; c, whose acknowledgements come back through its own port, finds its writes
/// waiting for a replica too, and names one of the deep paths, more confidently than a or
/// b name theirs. The cluster's verdict is the place two hosts agree on.
#[test]
fn the_path_several_hosts_of_a_cluster_name_outweighs_one_hosts() {
    let r = run(include_str!("lab/cluster-shallow-c.json"));
    let report = judged(&r, Cause::NetworkCongestion);
    let to_c = "path to replica 198.19.155.3";
    assert_eq!(report.verdict.location.as_deref(), Some(to_c));
    let own = |name: &str| {
        let h = report.hosts.iter().find(|h| h.host == name).unwrap();
        (
            h.verdict.location.clone().unwrap_or_default(),
            h.verdict.confidence,
        )
    };
    let ((a, ca), (b, cb), (c, cc)) = (own("a"), own("b"), own("c"));
    assert_eq!((a.as_str(), b.as_str()), (to_c, to_c));
    assert_ne!(c, to_c);
    assert!(
        cc > ca.max(cb),
        "c's own verdict is the most confident: {cc} {ca} {cb}"
    );

    // One host alone: its own verdict.
    let mut alone = r.clone();
    alone.hosts.retain(|h| h.name != "b");
    alone.hosts[0].write = None;
    assert_ne!(
        analyze(&alone).unwrap().verdict.location.as_deref(),
        Some(to_c)
    );
}
