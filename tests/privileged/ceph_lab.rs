//! A real Ceph cluster (Debian's packages) in the lab: it comes to HEALTH_OK, clients
//! stornet did not write (`rados bench`, fio's rbd engine) do IO, the agents on the OSD hosts
//! count the OSDs' writes and their TCP connections as the kernel does, Prometheus scrapes
//! the agents and the mgr, the mgr exports the metrics stornet reads, each lab fault moves
//! its independent count, and nothing is left once the lab is dropped.
//!
//! Each test brings up one cluster (20–35 s) and runs its checks on it in turn.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use metric_names::ceph::{self as names, CephKind};
use stornet_lab::blockdev::DiskStat;
use stornet_lab::ceph::clients::{BenchResult, parse_fio};
use stornet_lab::ceph::mgr::{mean_between, perf_mean_between};
use stornet_lab::ceph::{CephLab, CephSpec, FioRbd, RadosBench};
use stornet_lab::lab::Shaping;
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::netns::ip;
use stornet_lab::promserver::now;
use stornet_repo_checks::grafana::{Dashboard, PanelResult, Window, resolve_variables, run_panels};

/// Fails under CI, skips otherwise, when the machine cannot run the lab.
fn can_run(test: &str) -> bool {
    stornet_lab::ceph::can_run(test, &["rbd", "fio"])
}

fn up(tag: &str) -> CephLab {
    let t = Instant::now();
    let c = CephLab::new(tag, CephSpec::default()).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "{tag}: HEALTH_OK after {:.1} s, agents and Prometheus after {:.1} s",
        c.bringup_s,
        t.elapsed().as_secs_f64()
    );
    c
}

/// What the lab made, to check that dropping it removes everything.
struct Made {
    namespaces: Vec<String>,
    pids: Vec<u32>,
    loops: Vec<String>,
    dir: PathBuf,
}

fn made(c: &CephLab) -> Made {
    let mut pids: Vec<u32> = c.osds.iter().map(|o| o.pid()).collect();
    pids.extend(c.mon.iter().chain(c.mgr.iter()).map(|d| d.pid()));
    pids.extend(
        c.osds
            .iter()
            .filter_map(|o| o.agent.as_ref())
            .map(|a| a.pid()),
    );
    Made {
        namespaces: c.lab.namespaces().iter().map(|n| n.name.clone()).collect(),
        pids,
        loops: c.osds.iter().map(|o| o.disk.name().to_string()).collect(),
        dir: c.dir.path.clone(),
    }
}

fn assert_removed(m: &Made) {
    let list = ip(&["netns", "list"]).unwrap();
    for n in &m.namespaces {
        assert!(!list.contains(n.as_str()), "namespace {n} left behind");
    }
    for p in &m.pids {
        assert!(
            !Path::new(&format!("/proc/{p}")).exists(),
            "process {p} still running"
        );
    }
    for l in &m.loops {
        assert!(
            !Path::new(&format!("/sys/block/{l}/loop")).exists()
                || !std::fs::read_to_string(format!("/sys/block/{l}/loop/backing_file"))
                    .unwrap_or_default()
                    .contains(&format!("-{}.img", std::process::id())),
            "{l} still attached"
        );
    }
    assert!(!m.dir.exists(), "{} left behind", m.dir.display());
}

fn stats(c: &CephLab) -> Vec<DiskStat> {
    c.osds
        .iter()
        .map(|o| DiskStat::read(o.disk.name()).unwrap())
        .collect()
}

/// Runs `rados bench` and prints its result with what Ceph said meanwhile: each OSD's write
/// op latency (its own `perf dump`) and the cluster's health.
fn bench(c: &CephLab, what: &str, b: &RadosBench) -> BenchResult {
    let perf =
        || -> Vec<serde_json::Value> { c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect() };
    let p0 = perf();
    let r = c
        .rados_bench(b)
        .unwrap_or_else(|e| panic!("rados bench ({what}): {e:#}"));
    let p1 = perf();
    let op_w: Vec<String> = (0..p0.len())
        .map(
            |i| match perf_mean_between(&p0[i], &p1[i], ["osd", "op_w_latency"]) {
                Some(s) => format!("{:.0} ms", s * 1e3),
                None => "-".into(),
            },
        )
        .collect();
    eprintln!(
        "{what}: {:.0} IOPS, mean {:.1} ms, max {:.0} ms ({} writes of {} KiB); op_w latency by OSD {}; {}",
        r.iops,
        r.mean_latency_s * 1e3,
        r.max_latency_s * 1e3,
        r.writes,
        b.block >> 10,
        op_w.join(", "),
        c.health().unwrap_or_default()
    );
    r
}

/// The agent on OSD `i`'s host.
fn scrape(c: &CephLab, i: usize) -> Vec<Sample> {
    c.osds[i].agent.as_ref().unwrap().scrape().unwrap()
}

/// The cluster comes up with a hostname per daemon and lab addresses; the mgr exports what
/// the table says (and not its gaps); `rados bench` and fio's rbd engine do IO, which Ceph's
/// own counters and the OSDs' disks count; each OSD host's agent counts its disk's writes
/// as /sys/block does, its TCP connections to the other OSD hosts as `ss` does, and bytes on
/// its interface at least as many as Ceph replicated; Prometheus scrapes agents and mgr; the
/// lab leaves nothing behind.
#[test]
fn ceph_lab_runs_clients_its_agents_count_and_prometheus_scrapes() {
    if !can_run("ceph_lab_runs_clients_its_agents_count_and_prometheus_scrapes") {
        return;
    }
    let c = up("cephrun");
    let mut made = made(&c);
    assert_eq!(c.health().unwrap(), "HEALTH_OK");

    // The join Ceph offers: each OSD's hostname, addresses and device, as the lab made them.
    let m = c.mgr_scrape().unwrap();
    for o in &c.osds {
        let daemon = o.name();
        let host = c.lab.host(&o.host);
        let meta = m
            .iter()
            .find(|s| s.name == "ceph_osd_metadata" && s.label("ceph_daemon") == Some(&daemon))
            .unwrap_or_else(|| panic!("no ceph_osd_metadata of {daemon}"));
        assert_eq!(meta.label("hostname"), Some(o.host.as_str()), "{meta:?}");
        let addr = host.addr.to_string();
        assert_eq!(meta.label("public_addr"), Some(addr.as_str()), "{meta:?}");
        assert_eq!(meta.label("cluster_addr"), Some(addr.as_str()), "{meta:?}");
        let disk = m
            .iter()
            .find(|s| s.name == "ceph_disk_occupation" && s.label("ceph_daemon") == Some(&daemon))
            .unwrap_or_else(|| panic!("no ceph_disk_occupation of {daemon}"));
        assert_eq!(disk.label("devices"), Some(o.disk.name()), "{disk:?}");
        assert_eq!(disk.label("instance"), Some(o.host.as_str()), "{disk:?}");
    }
    // The table of what stornet reads: every exported metric with its labels, no gap.
    for metric in names::ALL {
        for suffix in metric.suffixes() {
            let name = format!("{}{suffix}", metric.name);
            let found: Vec<&Sample> = m.iter().filter(|s| s.name == name).collect();
            if !metric.exported {
                assert!(found.is_empty(), "{name} is exported: not a gap");
                continue;
            }
            assert!(!found.is_empty(), "the mgr exports no {name}");
            for l in metric.labels {
                assert!(
                    found.iter().all(|s| s.label(l).is_some()),
                    "{name} without label {l}"
                );
            }
            if metric.labels.contains(&names::DAEMON) && metric.kind != CephKind::Info {
                assert!(found.len() >= c.osds.len(), "{name}: {found:?}");
            }
        }
    }

    // 64 KiB writes through rados: every OSD's disk and Ceph's own op counters move, the
    // agents count each OSD's disk as sysfs does, and the OSD hosts send at least the
    // replicas' bytes.
    let n = c.osds.len();
    let sysfs = |i: usize| DiskStat::read(c.osds[i].disk.name()).unwrap();
    let tx = |i: usize| {
        c.osd_host(c.osds[i].id)
            .ns
            .link_stat("eth0", "tx_bytes")
            .unwrap()
    };
    let bracket = |i: usize| {
        let (s0, t0) = (sysfs(i), tx(i));
        let samples = scrape(&c, i);
        let (s1, t1) = (sysfs(i), tx(i));
        (s0, s1, t0, t1, samples)
    };
    let first: Vec<_> = (0..n).map(bracket).collect();
    let perf0: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let block = 64 << 10;
    let r = bench(&c, "rados bench", &RadosBench::writes(10).block(block));
    assert!(r.writes > 0 && r.iops > 0.0, "{r:?}");
    let second: Vec<_> = (0..n).map(bracket).collect();
    let perf1: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let op_w: f64 = (0..n)
        .map(|i| {
            perf1[i]["osd"]["op_w"].as_f64().unwrap() - perf0[i]["osd"]["op_w"].as_f64().unwrap()
        })
        .sum();
    assert!(
        op_w >= r.writes as f64,
        "the OSDs served {op_w} writes as primary, rados bench made {}",
        r.writes
    );
    let mut sent = 0.0;
    for i in 0..n {
        let disk = c.osds[i].disk.name();
        let op = |op| [("device", disk), ("op", op)];
        let delta = |f: &dyn Fn(&[Sample]) -> f64| f(&second[i].4) - f(&first[i].4);
        // Each flush reaches the device behind an empty write, which /sys/block counts as a
        // write and the agent does not (docs/metrics.md): the agent's writes and flushes
        // together are sysfs's writes.
        let counted = delta(&|s| {
            sum(s, "stornet_block_io_size_bytes_count", &op("write"))
                + sum(s, "stornet_block_io_size_bytes_count", &op("flush"))
        });
        let bytes = delta(&|s| sum(s, "stornet_block_io_size_bytes_sum", &op("write")));
        // The kernel's counts between the two scrapes lie between these. On a busy machine
        // the kernel skips a BPF program run now and then without counting it (up to about
        // 1 %, docs/metrics.md): a miscount is far more (a flush's empty write counted or
        // not is a quarter of these writes).
        let (a0, a1, b0, b1) = (&first[i].0, &first[i].1, &second[i].0, &second[i].1);
        let (low, high) = (
            b0.write_ios.saturating_sub(a1.write_ios),
            b1.write_ios - a0.write_ios,
        );
        let (blow, bhigh) = (
            (b0.write_sectors.saturating_sub(a1.write_sectors)) * 512,
            (b1.write_sectors - a0.write_sectors) * 512,
        );
        assert!(low > r.writes / 2, "{disk}: only {low} writes for {r:?}");
        assert!(
            counted <= high as f64 && counted >= low as f64 * 0.98,
            "agent on {}: {counted} writes and flushes to {disk}, sysfs {low}..={high} writes",
            c.osds[i].host
        );
        assert!(
            bytes <= bhigh as f64 && bytes >= blow as f64 * 0.98,
            "agent on {}: {bytes} bytes written to {disk}, sysfs {blow}..={bhigh}",
            c.osds[i].host
        );
        let tx_labels = [("netns", "host"), ("interface", "eth0")];
        let txc = |s: &[Sample]| sum(s, "stornet_interface_transmit_bytes_total", &tx_labels);
        let sent_i = txc(&second[i].4) - txc(&first[i].4);
        let (tlow, thigh) = (second[i].2 - first[i].3, second[i].3 - first[i].2);
        assert!(
            sent_i >= tlow as f64 && sent_i <= thigh as f64,
            "{}: agent {sent_i} bytes sent, sysfs {tlow}..={thigh}",
            c.osds[i].host
        );
        sent += sent_i;
        // Its TCP connections to every other OSD host, as ss counts them around the scrape.
        for j in (0..n).filter(|&j| j != i) {
            let peer = c.osd_host(c.osds[j].id).addr;
            let ns = &c.osd_host(c.osds[i].id).ns;
            let ss = || {
                ns.run(
                    "ss",
                    &["-Htn", "state", "established", "dst", &peer.to_string()],
                )
                .unwrap()
                .lines()
                .count() as f64
            };
            let before = ss();
            let agent = sum(
                &scrape(&c, i),
                "stornet_tcp_sockets",
                &[("peer", &peer.to_string())],
            );
            let after = ss();
            assert!(
                agent >= 1.0 && agent >= before.min(after) && agent <= before.max(after),
                "{} to {peer}: agent {agent} sockets, ss {before} then {after}",
                c.osds[i].host
            );
        }
    }
    let replicated = r.writes as f64 * f64::from(block) * 2.0;
    assert!(
        sent >= replicated,
        "the OSD hosts sent {sent} bytes, the replicas alone need {replicated}"
    );
    c.cleanup_bench().unwrap();

    // fio's rbd engine (librbd): its writes reach the OSDs as ops.
    let perf0: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let json = c
        .fio_rbd(&FioRbd::randwrite("4k", 8))
        .unwrap_or_else(|e| panic!("{e:#}"));
    let w = parse_fio(&json, "write").unwrap();
    let perf1: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let op_w: f64 = (0..n)
        .map(|i| {
            perf1[i]["osd"]["op_w"].as_f64().unwrap() - perf0[i]["osd"]["op_w"].as_f64().unwrap()
        })
        .sum();
    eprintln!(
        "fio rbd 4k randwrite: {:.0} IOPS, mean {:.1} ms, p99 {:.1} ms; OSD write ops {op_w}",
        w.iops,
        w.mean_latency_s * 1e3,
        w.p99_latency_s * 1e3
    );
    assert!(w.ios > 0, "{json}");
    assert!(
        op_w >= w.ios as f64,
        "fio wrote {} times, the OSDs served {op_w} writes",
        w.ios
    );

    // CephFS through ceph-fuse: loadgen, which knows nothing of Ceph, writes to a file there
    // and the OSDs serve its writes.
    let mut c = c;
    c.start_cephfs().unwrap_or_else(|e| panic!("{e:#}"));
    made.pids.extend(c.mds.as_ref().map(|d| d.pid()));
    let mount = c.mount_cephfs().unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(mount.fs_type().unwrap(), 0x6573_5546, "a FUSE mount");
    let perf0: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let out = std::process::Command::new(stornet_lab::bins::path("loadgen"))
        .args([
            "run",
            "--name=cephfs",
            &format!("--filename={}", mount.dir.join("lg").display()),
            "--size=32m",
            "--rw=randwrite",
            "--direct=1",
            "--bs=4k",
            "--iodepth=8",
            "--runtime=5",
            "--time_based",
            "--eta=never",
            "--output-format=json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "loadgen on CephFS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lw = &report["loadgen"]["points"][0]["write"];
    let ios = lw["ios"].as_f64().unwrap();
    let perf1: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let op_w: f64 = (0..n)
        .map(|i| {
            perf1[i]["osd"]["op_w"].as_f64().unwrap() - perf0[i]["osd"]["op_w"].as_f64().unwrap()
        })
        .sum();
    eprintln!(
        "loadgen on CephFS (ceph-fuse) 4k randwrite: {ios} writes, {:.0} IOPS, mean {:.1} ms; OSD write ops {op_w}",
        lw["iops"].as_f64().unwrap_or(0.0),
        lw["intended_lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e6
    );
    assert!(ios > 0.0, "{report}");
    assert!(
        op_w >= ios,
        "loadgen wrote {ios} times, the OSDs served {op_w} writes"
    );
    drop(mount);

    // Prometheus has every agent and the mgr, with the labels that join them.
    let p = c.prometheus.as_ref().unwrap();
    let meta = p.query("ceph_osd_metadata", None).unwrap();
    assert_eq!(meta.len(), n, "{meta:?}");
    for o in &c.osds {
        let q = format!(
            "stornet_block_io_size_bytes_count{{host=\"{}\",device=\"{}\",op=\"write\"}}",
            o.host,
            o.disk.name()
        );
        p.wait_for(&q, Duration::from_secs(20), |r| {
            r.len() == 1 && r[0].value() > 0.0
        })
        .unwrap();
    }
    // The join of docs/operations.md: each OSD's write latency with its host and address.
    let joined = p
        .wait_for(
            "rate(ceph_osd_op_w_latency_sum[1m]) / rate(ceph_osd_op_w_latency_count[1m]) \
             * on (ceph_daemon) group_left (hostname, cluster_addr) ceph_osd_metadata",
            Duration::from_secs(30),
            |r| r.len() == n,
        )
        .unwrap();
    for s in &joined {
        let host = s.label("hostname").unwrap();
        assert_eq!(
            s.label("cluster_addr"),
            Some(c.lab.host(host).addr.to_string().as_str()),
            "{s:?}"
        );
    }
    let ups = p.query("up", None).unwrap();
    assert!(
        ups.len() == n + 1 && ups.iter().all(|s| s.value() == 1.0),
        "{ups:?}"
    );

    let t = Instant::now();
    drop(c);
    eprintln!("down in {:.1} s", t.elapsed().as_secs_f64());
    assert_removed(&made);
}

/// The sum over `hosts` of `RetransSegs` between two readings.
fn retransmitted(before: &[(String, u64)], after: &[(String, u64)], hosts: &[&str]) -> u64 {
    let get = |v: &[(String, u64)], h: &str| v.iter().find(|(n, _)| n == h).map_or(0, |x| x.1);
    hosts.iter().map(|h| get(after, h) - get(before, h)).sum()
}

/// Each fault through the lab's mechanisms moves the count that proves it acts, and `rados
/// bench` feels it: a shallow buffer at the switch port toward h1 drops (`tc -s`) and makes
/// the other hosts retransmit toward it, which their agents count too; a deep one holds the
/// same load without those drops; osd.0's throttled disk caps its writes (/sys/block) and
/// raises bluestore's commit latency on osd.0 alone (its own `perf dump`); osd.1 under a CPU
/// quota is throttled (`cpu.stat`); jumbo frames with h1's port left at 1500 make that port
/// refuse frames (its rx drops) and stall a new client. Ceph's health is printed for each.
#[test]
fn ceph_lab_faults_move_their_independent_counts() {
    if !can_run("ceph_lab_faults_move_their_independent_counts") {
        return;
    }
    let c = up("cephflt");
    let t_start = now();
    let made = made(&c);
    let b = RadosBench::writes(10);
    let h1 = c.osd_host(0).addr.to_string();
    let others = ["h2", "h3", "client"];
    let agent_retrans = |c: &CephLab| -> f64 {
        (1..c.osds.len())
            .map(|i| {
                sum(
                    &scrape(c, i),
                    "stornet_tcp_retransmits_total",
                    &[("peer", &h1)],
                )
            })
            .sum::<f64>()
    };

    let healthy = bench(&c, "healthy", &b);
    c.cleanup_bench().unwrap();

    // A shallow buffer toward h1.
    c.shape_port("h1", Some(&Shaping::shallow())).unwrap();
    let (d0, r0, a0) = (
        c.port_drops("h1").unwrap(),
        c.retransmits().unwrap(),
        agent_retrans(&c),
    );
    let shallow = bench(&c, "shallow buffer toward h1", &b);
    let (d1, r1, a1) = (
        c.port_drops("h1").unwrap(),
        c.retransmits().unwrap(),
        agent_retrans(&c),
    );
    let (drops, retrans, seen) = (d1 - d0, retransmitted(&r0, &r1, &others), a1 - a0);
    eprintln!(
        "  {drops} drops at h1's port; {retrans} retransmits from h2, h3, client; agents on h2, h3: {seen} toward h1"
    );
    assert!(drops > 0, "no tc drops at the shallow port");
    assert!(retrans > 0, "nobody retransmitted toward h1");
    assert!(seen > 0.0, "the agents counted no retransmits toward h1");
    assert!(
        shallow.iops < healthy.iops / 2.0,
        "{shallow:?} against healthy {healthy:?}"
    );

    // The same rate with a deep buffer: the load fits, nothing is dropped.
    c.shape_port("h1", Some(&Shaping::deep())).unwrap();
    let d0 = c.port_drops("h1").unwrap();
    let deep = bench(&c, "deep buffer toward h1", &b);
    let deep_drops = c.port_drops("h1").unwrap() - d0;
    eprintln!("  {deep_drops} drops at h1's port");
    assert!(
        deep_drops * 10 < drops.max(10),
        "{deep_drops} drops with a deep buffer, {drops} with a shallow one"
    );
    assert!(deep.iops > shallow.iops, "{deep:?} against {shallow:?}");
    c.shape_port("h1", None).unwrap();
    c.cleanup_bench().unwrap();

    // osd.0's disk at 50 writes per second.
    c.slow_osd_disk(0, Some(50)).unwrap();
    let mgr0 = c.mgr_scrape().unwrap();
    let perf0: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    let (s0, t0) = (stats(&c), Instant::now());
    let slow = bench(&c, "osd.0's disk at 50 writes/s", &b);
    let (s1, secs) = (stats(&c), t0.elapsed().as_secs_f64());
    let perf1: Vec<_> = c.osds.iter().map(|o| c.osd_perf(o.id).unwrap()).collect();
    c.slow_osd_disk(0, None).unwrap();
    let commit: Vec<f64> = (0..c.osds.len())
        .map(|i| {
            perf_mean_between(&perf0[i], &perf1[i], ["bluestore", "commit_lat"]).unwrap_or(0.0)
        })
        .collect();
    // Writes with data: /sys/block also counts the empty write that carries each flush.
    let data = |i: usize| {
        ((s1[i].write_ios - s1[i].flush_ios) - (s0[i].write_ios - s0[i].flush_ios)) as f64 / secs
    };
    let rate = data(0);
    eprintln!(
        "  osd.0's disk {rate:.0} writes/s (others {:.0}, {:.0}); bluestore commit {:.1} ms on osd.0, {:.1} and {:.1} ms on the others",
        data(1),
        data(2),
        commit[0] * 1e3,
        commit[1] * 1e3,
        commit[2] * 1e3
    );
    assert!(
        rate <= 60.0,
        "osd.0's disk did {rate:.0} writes/s under a 50/s throttle"
    );
    assert!(
        commit[0] > 5.0 * commit[1].max(commit[2]),
        "bluestore commit latency {commit:?}: not osd.0's alone"
    );
    assert!(slow.iops < healthy.iops / 2.0, "{slow:?}");
    // The mgr, which stornet reads, says the same once its module has refreshed (5 s).
    std::thread::sleep(Duration::from_secs(6));
    let mgr1 = c.mgr_scrape().unwrap();
    let via_mgr: Vec<f64> = c
        .osds
        .iter()
        .map(|o| mean_between(&mgr0, &mgr1, "ceph_bluestore_commit_lat", &o.name()).unwrap_or(0.0))
        .collect();
    eprintln!("  the mgr's ceph_bluestore_commit_lat by OSD: {via_mgr:?}");
    assert!(
        via_mgr[0] > 5.0 * via_mgr[1].max(via_mgr[2]),
        "the mgr's bluestore commit latency {via_mgr:?}: not osd.0's alone"
    );
    c.cleanup_bench().unwrap();

    // osd.1 at 5% of a CPU.
    c.starve_osd_cpu(1, Some(50)).unwrap();
    let (n0, _) = c.osd(1).cpu_throttled().unwrap();
    let w0 = c.osd(1).cpu_waited_seconds().unwrap();
    let starved = bench(&c, "osd.1 at 5% of a CPU", &b);
    let (n1, throttled_s) = c.osd(1).cpu_throttled().unwrap();
    let waited = c.osd(1).cpu_waited_seconds().unwrap() - w0;
    c.starve_osd_cpu(1, None).unwrap();
    eprintln!(
        "  osd.1 throttled in {} periods ({throttled_s:.1} s in all), its tasks waited {waited:.1} s for a CPU",
        n1 - n0
    );
    assert!(n1 > n0, "osd.1's cgroup was never throttled");
    assert!(waited > 1.0, "osd.1 waited {waited:.2} s for a CPU");
    assert!(starved.iops < healthy.iops / 2.0, "{starved:?}");
    c.cleanup_bench().unwrap();

    ceph_dashboard_shows_the_faults(&c, t_start);

    // Jumbo frames with h1's port left at 1500: a new client's connections to h1 agree on
    // 9000-byte segments, the bridge drops each one at that port without counting it
    // anywhere but the kernel's drop tracepoint, and the client retransmits into the void.
    // Last: the cluster does not recover fast.
    let bridge_drops = |c: &CephLab| {
        scrape(c, 1)
            .iter()
            .filter(|s| {
                s.name == "stornet_skb_drops_unspecified_total"
                    && s.label("function").is_some_and(|f| f.starts_with("br_"))
            })
            .map(|s| s.value)
            .sum::<f64>()
    };
    c.mtu_mismatch(Some("h1")).unwrap();
    let (rx0, r0, k0) = (
        c.port_rx_drops().unwrap(),
        c.retransmits().unwrap(),
        bridge_drops(&c),
    );
    let stalled = c.rados_bench(&RadosBench::writes(5).limit(Duration::from_secs(25)));
    let refused = retransmitted(&rx0, &c.port_rx_drops().unwrap(), &["h1"]);
    let retrans = retransmitted(&r0, &c.retransmits().unwrap(), &["client"]);
    let dropped = bridge_drops(&c) - k0;
    eprintln!(
        "jumbo frames, h1's port at 1500: rados bench {}; {retrans} retransmits from the client; h1's port refused {refused} frames; the agents saw the bridge drop {dropped}; {}",
        match &stalled {
            Ok(r) => format!("{:.0} IOPS, max {:.0} ms", r.iops, r.max_latency_s * 1e3),
            Err(e) => format!("{e:#}")
                .lines()
                .next()
                .unwrap_or_default()
                .to_string(),
        },
        c.health().unwrap_or_default()
    );
    if let Ok(r) = &stalled {
        assert!(r.iops < healthy.iops / 10.0, "{r:?}");
    }
    assert!(retrans > 0, "the client retransmitted nothing");
    c.mtu_mismatch(None).unwrap();

    let t = Instant::now();
    drop(c);
    eprintln!("down in {:.1} s", t.elapsed().as_secs_f64());
    assert_removed(&made);
}

/// The Ceph dashboard over the faults so far, as Grafana would run it: every OSD host is a
/// value of its variable, every panel returns series, and the panels show the faults where
/// they were: retransmits toward h1's address from the other hosts (the shallow port),
/// bluestore's commit latency highest on osd.0 (its throttled disk), and one device series
/// per OSD, joined through `ceph_disk_occupation`.
fn ceph_dashboard_shows_the_faults(c: &CephLab, start: f64) {
    let prom = c.prometheus.as_ref().expect("the lab's Prometheus");
    // Past the mgr's next refresh, so its last figures are in.
    std::thread::sleep(Duration::from_secs(u64::from(c.spec.stats_period_s) + 2));
    let w = Window {
        start,
        end: now(),
        step_s: 4,
        scrape_s: 2,
    };
    let d = Dashboard::load("dashboards/ceph.json").unwrap();
    let vars = resolve_variables(&d, prom, &w).unwrap();
    let hosts = &vars["host"].0;
    assert_eq!(hosts, &["h1", "h2", "h3"], "the dashboard's OSD hosts");
    let results = run_panels(&d, prom, &w, &vars).unwrap();
    let empty: Vec<&str> = results
        .iter()
        .filter(|r| r.series_count() == 0)
        .map(|r| r.panel.title.as_str())
        .collect();
    assert!(
        empty.is_empty(),
        "Ceph dashboard panels without series: {empty:?}"
    );
    let panel = |title: &str| -> &PanelResult {
        results
            .iter()
            .find(|r| r.panel.title == title)
            .unwrap_or_else(|| panic!("no panel {title}"))
    };
    // The largest value of each series over the window, by the label that names it.
    let peaks = |title: &str, label: &str| -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = panel(title).queries[0]
            .series
            .iter()
            .map(|s| {
                let peak = s
                    .samples
                    .iter()
                    .map(|p| p.1)
                    .filter(|v| v.is_finite())
                    .fold(0.0, f64::max);
                (s.label(label).unwrap_or_default().to_string(), peak)
            })
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    };
    let retrans = peaks("Retransmits toward each OSD host", "hostname");
    let commit = peaks(
        "Bluestore commit latency by OSD (its own disk)",
        "ceph_daemon",
    );
    let pressure = peaks("CPU pressure on the OSD hosts", "host");
    eprintln!(
        "Ceph dashboard: {} panels with series; retransmits toward {retrans:?}; commit latency {commit:?}; CPU pressure {pressure:?}",
        results.len()
    );
    assert_eq!(retrans[0].0, "h1", "retransmits peak toward {retrans:?}");
    assert_eq!(commit[0].0, "osd.0", "commit latency peaks at {commit:?}");
    let device = peaks("Service time p99 of each OSD's device", "ceph_daemon");
    assert_eq!(
        device.len(),
        c.osds.len(),
        "one device series per OSD: {device:?}"
    );
}

/// A cluster that misses its deadline is an error, never a hang: it names the wait and
/// carries the daemons' last log lines, and the half-built lab is removed.
#[test]
fn ceph_lab_that_misses_its_deadline_fails_with_the_daemons_logs_and_leaves_nothing() {
    let test = "ceph_lab_that_misses_its_deadline_fails_with_the_daemons_logs_and_leaves_nothing";
    if !can_run(test) {
        return;
    }
    let spec = CephSpec {
        // Enough for the mon to answer, not for three OSDs to boot.
        health_timeout: Duration::from_secs(4),
        agents: false,
        prometheus: false,
        ..CephSpec::default()
    };
    let t = Instant::now();
    let err = match CephLab::new("cephlate", spec) {
        Ok(_) => panic!("a cluster came up within 4 s"),
        Err(e) => format!("{e:#}"),
    };
    eprintln!("failed after {:.1} s", t.elapsed().as_secs_f64());
    assert!(err.contains("not within"), "{err}");
    assert!(err.contains("--- mon.a"), "the mon's log is missing: {err}");
    if err.contains("OSDs up") {
        assert!(
            err.contains("--- osd.0"),
            "the OSDs' logs are missing: {err}"
        );
    }
    let me = std::process::id().to_string();
    let list = ip(&["netns", "list"]).unwrap();
    assert!(
        !list
            .lines()
            .any(|l| l.contains("stn-cephlate-") && l.contains(&me)),
        "{list}"
    );
    assert!(!Path::new(&format!("/dev/shm/stornet-ceph-cephlate-{me}")).exists());
    let procs = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("cmdline")).ok())
        .filter(|c| c.contains(&format!("stornet-ceph-cephlate-{me}")))
        .count();
    assert_eq!(procs, 0, "Ceph daemons of the failed lab still run");
}
