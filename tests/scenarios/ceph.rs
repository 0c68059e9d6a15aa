//! A real Ceph cluster (Debian's packages) under a client stornet did not write (`rados
//! bench`), judged by `stornet analyze --prometheus --app-latency ceph` from Ceph's own op
//! latency in the mgr's metrics: a fault arrives in the middle of the load and stornet names
//! the place, while Ceph's own health (printed from the same run) stays quiet. The kernel's
//! counts (`tc -s` at the switch port, `/proc/net/snmp`, `/sys/block/*/stat`) are the
//! independent evidence.

use std::time::{Duration, Instant};

use diagnose::app_latency::AppLatency;
use serde_json::Value;
use stornet_lab::blockdev::DiskStat;
use stornet_lab::ceph::{CLIENT_HOST, CephLab, CephSpec, RadosBench};
use stornet_lab::lab::run::device_run;
use stornet_lab::lab::{Shaping, Workload};
use stornet_lab::promserver::now;

/// Seconds of load before the fault, with it, and the evaluation step: the healthy part is
/// the larger, so that the analysis' baseline is the healthy latency.
const HEALTHY_S: u64 = 28;
const FAULT_S: u64 = 20;
const STEP_S: u64 = 4;

/// Fails under CI, skips otherwise, when the machine cannot run the lab.
fn can_run(test: &str) -> bool {
    stornet_lab::ceph::can_run(test, &[])
}

/// A cluster whose daemons report to the mgr, and Prometheus scrapes it, every 2 s: a 4 s
/// step holds two of each.
fn up(tag: &str) -> CephLab {
    let spec = CephSpec {
        stats_period_s: 2,
        ..CephSpec::default()
    };
    let c = CephLab::new(tag, spec).unwrap_or_else(|e| panic!("{e:#}"));
    let health = c.health().unwrap_or_else(|e| format!("{e:#}"));
    assert_eq!(
        health,
        "HEALTH_OK",
        "Ceph did not stay healthy:\n{}",
        c.logs(20)
    );
    eprintln!("{tag}: HEALTH_OK after {:.1} s", c.bringup_s);
    c
}

/// What `rados bench` did, what Ceph said and what stornet concluded.
struct Judged {
    bench: stornet_lab::ceph::clients::BenchResult,
    /// `ceph health` at the fault's end.
    health: String,
    /// `stornet analyze --format json`.
    json: Value,
    /// The text report's lines that name the OSDs.
    places: Vec<String>,
}

/// Runs `rados bench` for the whole window, calls `fault` after `HEALTHY_S` and `lift`
/// `FAULT_S` later, as the bench stops writing (each reads its independent counts), then
/// asks stornet about the window. The fault is lifted on the clock, not when the bench
/// returns: the bench waits for its last writes, and a write behind a shallow port or a
/// starved OSD can wait out a long retransmit backoff while the fault stays.
fn judge(c: &CephLab, fault: impl FnOnce(), lift: impl FnOnce()) -> Judged {
    let start = now().floor();
    let b = RadosBench::writes((HEALTHY_S + FAULT_S) as u32)
        .limit(Duration::from_secs(HEALTHY_S + FAULT_S + 90));
    let (bench, health) = std::thread::scope(|s| {
        let load = s.spawn(|| c.rados_bench(&b));
        std::thread::sleep(Duration::from_secs(HEALTHY_S));
        fault();
        std::thread::sleep(Duration::from_secs(FAULT_S));
        let health = c.health().unwrap_or_else(|e| format!("{e:#}"));
        lift();
        let bench = load.join().unwrap().unwrap_or_else(|e| panic!("{e:#}"));
        (bench, health)
    });
    // The last reports reach the mgr and Prometheus.
    std::thread::sleep(Duration::from_secs(2 * STEP_S));
    let end = start + ((now() - start) / STEP_S as f64).floor() * STEP_S as f64;
    let analyze = |format: &str| -> String {
        c.analyze(start, end, STEP_S, format)
            .unwrap_or_else(|e| panic!("{e:#}"))
    };
    let text = analyze("text");
    eprintln!("{text}");
    let json_text = analyze("json");
    // Kept for a person to read: every host's candidates and signals, levels and lags.
    let kept = std::env::temp_dir().join(format!(
        "stornet-scenario-ceph-{}-{start}.json",
        std::process::id()
    ));
    if std::fs::write(&kept, &json_text).is_ok() {
        eprintln!("stornet's JSON is kept in {}", kept.display());
    }
    let json: Value = serde_json::from_str(&json_text).expect("stornet's JSON");
    let places = text
        .lines()
        .filter(|l| l.starts_with("osd."))
        .map(str::to_string)
        .collect();
    c.cleanup_bench().unwrap();
    Judged {
        bench,
        health,
        json,
        places,
    }
}

/// The verdict of host `name` in stornet's JSON.
fn host_verdict<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["host"] == name)
        .map(|h| &h["verdict"])
        .unwrap_or(&Value::Null)
}

fn line(v: &Value) -> String {
    format!(
        "{} at {} ({:.2})",
        v["cause"].as_str().unwrap_or("-"),
        v["location"].as_str().unwrap_or("-"),
        v["confidence"].as_f64().unwrap_or(0.0)
    )
}

/// A shallow buffer at the switch port toward h1 (osd.0's host) in the middle of 64 KiB
/// writes: every OSD's op latency rises (every placement group has a replica on h1) and
/// Ceph stays HEALTH_OK; stornet, judging each OSD host by its OSD's op latency, names the
/// path to h1, and the switch port's `tc -s` drops and the senders' retransmits
/// (`/proc/net/snmp`) count the loss.
#[test]
fn scenario_ceph_1_a_shallow_port_toward_an_osd_host_is_named_from_cephs_own_latency() {
    if !can_run("scenario_ceph_1_a_shallow_port_toward_an_osd_host_is_named_from_cephs_own_latency")
    {
        return;
    }
    let began = Instant::now();
    let c = up("ceph1");
    // What `--app-latency ceph` queries is in the live mgr's metrics, with the labels it
    // joins by.
    let m = c.mgr_scrape().unwrap();
    let app = AppLatency::ceph();
    let mut wanted: Vec<(String, Vec<&str>)> = app
        .metrics
        .iter()
        .flat_map(|x| ["_sum", "_count"].map(|s| (format!("{}{s}", x.name), vec![app.by.as_str()])))
        .collect();
    for j in [&app.hosts, &app.devices].into_iter().flatten() {
        wanted.push((j.metric.to_string(), [&[j.key][..], j.labels].concat()));
    }
    for (name, labels) in &wanted {
        let found: Vec<_> = m.iter().filter(|s| &s.name == name).collect();
        assert!(
            found.len() >= c.osds.len(),
            "the mgr exports {found:?} of {name}"
        );
        for l in labels {
            assert!(
                found.iter().all(|s| s.label(l).is_some()),
                "{name} without {l}"
            );
        }
    }
    let h1 = c.lab.host("h1").addr.to_string();
    let counts = |c: &CephLab| (c.port_drops("h1").unwrap(), c.retransmits().unwrap());
    let before = std::cell::Cell::new(None);
    let after = std::cell::Cell::new(None);
    let j = judge(
        &c,
        || {
            before.set(Some(counts(&c)));
            c.shape_port("h1", Some(&Shaping::shallow())).unwrap();
        },
        || {
            after.set(Some(counts(&c)));
            c.shape_port("h1", None).unwrap();
        },
    );
    let ((d0, r0), (d1, r1)) = (before.take().unwrap(), after.take().unwrap());
    let resent: u64 = r1
        .iter()
        .filter(|(h, _)| h != "h1")
        .map(|(h, n)| n - r0.iter().find(|(g, _)| g == h).map_or(0, |x| x.1))
        .sum();
    let v = &j.json["verdict"];
    eprintln!(
        "rados bench 64 KiB writes, {HEALTHY_S} s healthy then {FAULT_S} s with a shallow port toward h1: \
         {:.0} IOPS, mean {:.0} ms, max {:.0} ms; Ceph: {}; tc -s: {} drops at h1's port; \
         /proc/net/snmp: {resent} retransmits from the other hosts; stornet: {}; h2 {}, h3 {}; \
         the scenario {:.0} s",
        j.bench.iops,
        j.bench.mean_latency_s * 1e3,
        j.bench.max_latency_s * 1e3,
        j.health,
        d1 - d0,
        line(v),
        line(host_verdict(&j.json, "h2")),
        line(host_verdict(&j.json, "h3")),
        began.elapsed().as_secs_f64()
    );
    for p in &j.places {
        eprintln!("  {p}");
    }
    assert!(d1 > d0, "the shallow port dropped nothing");
    assert!(resent > 0, "nobody retransmitted toward h1");
    assert_eq!(v["cause"], "network_congestion", "{}", line(v));
    // The OSDs whose replicas are on h1 wait for the path to it.
    for host in ["h2", "h3"] {
        let hv = host_verdict(&j.json, host);
        assert_eq!(hv["cause"], "network_congestion", "{host}: {}", line(hv));
        let location = hv["location"].as_str().unwrap_or_default();
        assert!(
            location.contains(&h1),
            "{host}: the verdict's place {location:?} is not the path to h1 ({h1})"
        );
    }
    assert!(
        j.places
            .iter()
            .any(|p| p.contains("wait for the path to h1 (osd.0's host)")),
        "no OSD waits for the path to h1: {:?}",
        j.places
    );
}

/// osd.0's disk throttled to 50 writes/s in the middle of 64 KiB writes: every OSD's op
/// latency rises (each write waits for osd.0's commit) and Ceph stays HEALTH_OK; stornet
/// names osd.0's device on h1, whose writes `/sys/block/*/stat` counts at the throttle.
#[test]
fn scenario_ceph_2_a_throttled_osd_disk_is_named_from_cephs_own_latency() {
    if !can_run("scenario_ceph_2_a_throttled_osd_disk_is_named_from_cephs_own_latency") {
        return;
    }
    let began = Instant::now();
    let c = up("ceph2");
    let disk = c.osd(0).disk.name().to_string();
    // Writes with data: /sys/block also counts the empty write that carries each flush.
    let data = || {
        let s = DiskStat::read(&disk).unwrap();
        s.write_ios - s.flush_ios
    };
    let from = std::cell::Cell::new((0, Instant::now()));
    let rate = std::cell::Cell::new(0.0);
    let j = judge(
        &c,
        || {
            from.set((data(), Instant::now()));
            c.slow_osd_disk(0, Some(50)).unwrap();
        },
        || {
            let (n0, t0) = from.get();
            rate.set((data() - n0) as f64 / t0.elapsed().as_secs_f64());
            c.slow_osd_disk(0, None).unwrap();
        },
    );
    let rate = rate.get();
    let v = &j.json["verdict"];
    eprintln!(
        "rados bench 64 KiB writes, {HEALTHY_S} s healthy then {FAULT_S} s with osd.0's disk at 50 writes/s: \
         {:.0} IOPS, mean {:.0} ms, max {:.0} ms; Ceph: {}; /sys/block/{disk}/stat: about {rate:.0} data writes/s \
         under the throttle; stornet: {}; h1 {}; the scenario {:.0} s",
        j.bench.iops,
        j.bench.mean_latency_s * 1e3,
        j.bench.max_latency_s * 1e3,
        j.health,
        line(v),
        line(host_verdict(&j.json, "h1")),
        began.elapsed().as_secs_f64()
    );
    for p in &j.places {
        eprintln!("  {p}");
    }
    assert!(
        rate <= 60.0,
        "{disk} did {rate:.0} writes/s under a 50/s throttle"
    );
    let h1 = host_verdict(&j.json, "h1");
    assert_eq!(h1["cause"], "slow_device", "h1: {}", line(h1));
    let location = h1["location"].as_str().unwrap_or_default();
    assert!(
        location.contains(&disk),
        "h1's verdict place {location:?} is not osd.0's device {disk}"
    );
}

/// osd.1's daemon capped at 5% of a CPU (a cgroup quota, as a container's limit) in the
/// middle of 64 KiB writes: every OSD's op latency rises (each write waits for osd.1's
/// part) and Ceph stays HEALTH_OK; stornet names the CPU of osd.1's host, whose cgroup's
/// `cpu.stat` counts the throttling and `cpu.pressure` the wait.
#[test]
fn scenario_ceph_3_an_osd_starved_of_cpu_is_its_hosts_cpu() {
    if !can_run("scenario_ceph_3_an_osd_starved_of_cpu_is_its_hosts_cpu") {
        return;
    }
    let began = Instant::now();
    let c = up("ceph3");
    let osd = c.osd(1);
    let host = osd.host.clone();
    let from = std::cell::Cell::new((0.0, 0.0));
    let took = std::cell::Cell::new((0.0, 0.0));
    let j = judge(
        &c,
        || {
            from.set((
                osd.cpu_throttled().unwrap().1,
                osd.cpu_waited_seconds().unwrap(),
            ));
            c.starve_osd_cpu(1, Some(50)).unwrap();
        },
        || {
            let (t0, w0) = from.get();
            took.set((
                osd.cpu_throttled().unwrap().1 - t0,
                osd.cpu_waited_seconds().unwrap() - w0,
            ));
            c.starve_osd_cpu(1, None).unwrap();
        },
    );
    let (throttled, waited) = took.get();
    let v = &j.json["verdict"];
    let hv = host_verdict(&j.json, &host);
    eprintln!(
        "rados bench 64 KiB writes, {HEALTHY_S} s healthy then {FAULT_S} s with osd.1 at 5% of a CPU: \
         {:.0} IOPS, mean {:.0} ms, max {:.0} ms; Ceph: {}; cpu.stat: throttled {throttled:.1} s, \
         cpu.pressure: waited {waited:.1} s; stornet: {}; {host} {}; the scenario {:.0} s",
        j.bench.iops,
        j.bench.mean_latency_s * 1e3,
        j.bench.max_latency_s * 1e3,
        j.health,
        line(v),
        line(hv),
        began.elapsed().as_secs_f64()
    );
    for p in &j.places {
        eprintln!("  {p}");
    }
    assert!(
        throttled > 1.0,
        "osd.1 was throttled for only {throttled:.2} s"
    );
    assert!(waited > 1.0, "osd.1's tasks waited {waited:.2} s for a CPU");
    assert_eq!(hv["cause"], "cpu", "{host}: {}", line(hv));
    let location = hv["location"].as_str().unwrap_or_default();
    assert!(
        location.contains(&format!("CPU of {host}")),
        "{host}'s verdict place {location:?} is not its CPU"
    );
}

/// Seconds of loadgen's writes on CephFS before the MTU fault, with it, and after it.
const MTU_HEALTHY_S: u64 = 16;
const MTU_FAULT_S: u64 = 12;
const MTU_AFTER_S: u64 = 10;

/// A jumbo-frame network (every host, port and the bridge at MTU 9000) whose switch port
/// toward h1 (osd.0's host) falls back to 1500 in the middle of the writes of a client
/// stornet did not build into Ceph: loadgen writing a file on a `ceph-fuse` mount of CephFS,
/// with an agent beside it. The client's connection to osd.0 agreed on jumbo segments, and
/// the port drops each frame above 1500 bytes (a bridge sends no ICMP); the OSDs' own
/// connections, open since before the jumbo frames, keep their 1500-byte segments, so
/// their op latency, which `--app-latency ceph` judges, does not see it. The client's
/// latency does: stornet names `mtu_mismatch` on the path to h1 from loadgen's run record;
/// the kernel's drop tracepoint (the agent's count of drops at the bridge), the port's rx
/// drops and `ip link`'s MTUs are the independent counts, and Ceph's health is printed from
/// the same run.
#[test]
fn scenario_ceph_4_an_mtu_mismatch_toward_an_osd_host_is_named_from_the_clients_latency() {
    let test =
        "scenario_ceph_4_an_mtu_mismatch_toward_an_osd_host_is_named_from_the_clients_latency";
    if !stornet_lab::ceph::can_run(test, &["ceph-fuse"]) {
        return;
    }
    let began = Instant::now();
    let spec = CephSpec {
        prometheus: false,
        agents: false,
        ..CephSpec::default()
    };
    let mut c = CephLab::new("ceph4", spec).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        c.health().unwrap_or_default(),
        "HEALTH_OK",
        "{}",
        c.logs(20)
    );
    c.start_cephfs().unwrap_or_else(|e| panic!("{e:#}"));
    c.set_mtu(9000).unwrap();
    let mount = c.mount_cephfs().unwrap_or_else(|e| panic!("{e:#}"));
    let agent = c.client_agent().unwrap_or_else(|e| panic!("{e:#}"));
    let dir = std::env::temp_dir().join(format!("stornet-scenario-ceph4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = Workload::file_writes(&format!("{}s", MTU_HEALTHY_S + MTU_FAULT_S + MTU_AFTER_S));
    let file = mount.dir.join("lg");
    let client = c.client_host();
    let h1 = c.lab.host("h1").addr.to_string();
    // `ip link`'s MTU of a link in a namespace.
    let mtu = |ns: &stornet_lab::netns::Netns, dev: &str| -> u32 {
        let out = ns.ip(&["-o", "link", "show", dev]).unwrap_or_default();
        let mut words = out.split_whitespace();
        words
            .find(|w| *w == "mtu")
            .and_then(|_| words.next()?.parse().ok())
            .unwrap_or(0)
    };
    let port = c.lab.host("h1").port.clone();
    let (o, counts) = std::thread::scope(|s| {
        let run = s.spawn(|| {
            device_run(&c.lab, client, &agent, &file, &w, &dir, "cephfs-mtu")
                .unwrap_or_else(|e| panic!("{e:#}\nagent log:\n{}", agent.log()))
        });
        // The file is laid out and the ramp passes before the measured part.
        while !file.exists() {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(MTU_HEALTHY_S + 2));
        let rx0 = c.port_rx_drops().unwrap();
        let r0 = client.ns.snmp_tcp("RetransSegs").unwrap();
        c.set_port_mtu("h1", 1500).unwrap();
        let mtus = (
            mtu(&client.ns, stornet_lab::lab::Host::DEV),
            mtu(&c.lab.switch, &port),
        );
        std::thread::sleep(Duration::from_secs(MTU_FAULT_S));
        let health = c.health().unwrap_or_else(|e| format!("{e:#}"));
        let rx = retransmitted_on(&rx0, &c.port_rx_drops().unwrap());
        let resent = client.ns.snmp_tcp("RetransSegs").unwrap() - r0;
        c.set_port_mtu("h1", 9000).unwrap();
        (run.join().unwrap(), (mtus, rx, resent, health))
    });
    let ((client_mtu, port_mtu), rx, resent, health) = counts;
    drop(mount);
    let w_all = o.latency(0, "write");
    let bridge = o
        .record_sum(0, CLIENT_HOST, &["skb_drops", "not_specified"])
        .unwrap_or(0.0);
    let v = &o.analysis["verdict"];
    eprintln!(
        "loadgen on CephFS, 64 KiB writes, {MTU_HEALTHY_S} s healthy then {MTU_FAULT_S} s with h1's port at MTU \
         {port_mtu} (the client's {client_mtu}): {:.0} IOPS, mean {:.0} ms, p99 {:.0} ms over the run; Ceph: \
         {health}; /proc/net/snmp: {resent} retransmits from the client; the agent saw {bridge} drops \
         without reason (the bridge's); ip -s link: {rx} frames the switch ports refused; stornet: {}; \
         the scenario {:.0} s",
        w_all.iops,
        w_all.mean_s * 1e3,
        w_all.p99_s * 1e3,
        line(v),
        began.elapsed().as_secs_f64()
    );
    for e in o.evidence() {
        eprintln!("  {e}");
    }
    assert_eq!((client_mtu, port_mtu), (9000, 1500), "ip link's MTUs");
    assert!(resent > 0, "the client retransmitted nothing toward h1");
    assert!(bridge > 0.0, "the agent counted no drops at the bridge");
    assert_eq!(v["cause"], "mtu_mismatch", "{}", line(v));
    let location = v["location"].as_str().unwrap_or_default();
    assert!(
        location.contains(&h1),
        "the verdict's place {location:?} is not the path to h1 ({h1})"
    );
    let evidence = o.evidence().join("\n");
    assert!(
        evidence.contains("1500"),
        "the evidence names the 1500-byte port: {evidence}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Frames refused over the fault, all ports together.
fn retransmitted_on(before: &[(String, u64)], after: &[(String, u64)]) -> u64 {
    after
        .iter()
        .map(|(h, n)| n - before.iter().find(|(g, _)| g == h).map_or(0, |x| x.1))
        .sum()
}
