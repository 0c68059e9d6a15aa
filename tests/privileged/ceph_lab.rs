//! A real Ceph cluster (Debian's packages) in the lab: it comes to HEALTH_OK, clients
//! stornet did not write (`rados bench`, fio's rbd engine) do IO, the agents on the OSD hosts
//! count the OSDs' writes and their TCP connections as the kernel does, Prometheus scrapes
//! the agents and the mgr, the mgr exports the metrics stornet reads, each lab fault moves
//! its independent count, and nothing is left once the lab is dropped.
//!
//! Each test brings up one cluster (20–35 s) and runs its checks on it in turn.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use stornet_lab::blockdev::DiskStat;
use stornet_lab::ceph::clients::{BenchResult, parse_fio};
use stornet_lab::ceph::{CephLab, CephSpec, FioRbd, RadosBench};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::netns::ip;
use stornet_lab::privilege::{require_root, require_tool};
use metric_names::ceph::{self as names, CephKind};

/// Fails under CI, skips otherwise, when the machine cannot run the lab.
fn can_run(test: &str) -> bool {
    require_root(test)
        && [
            "ceph-mon",
            "ceph-mgr",
            "ceph-osd",
            "ceph",
            "rados",
            "rbd",
            "fio",
            "prometheus",
        ]
        .iter()
        .all(|t| require_tool(test, t))
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

fn bench(c: &CephLab, what: &str, b: &RadosBench) -> BenchResult {
    let r = c
        .rados_bench(b)
        .unwrap_or_else(|e| panic!("rados bench ({what}): {e:#}"));
    eprintln!(
        "{what}: {:.0} IOPS, mean {:.1} ms, max {:.0} ms ({} writes of {} KiB), {}",
        r.iops,
        r.mean_latency_s * 1e3,
        r.max_latency_s * 1e3,
        r.writes,
        b.block >> 10,
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
    let made = made(&c);
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
        let labels = [("device", disk), ("op", "write")];
        let count = |s: &[Sample]| sum(s, "stornet_block_io_size_bytes_count", &labels);
        let counted = count(&second[i].4) - count(&first[i].4);
        // The kernel's count between the two scrapes lies between these.
        let (low, high) = (
            second[i].0.write_ios.saturating_sub(first[i].1.write_ios),
            second[i].1.write_ios - first[i].0.write_ios,
        );
        assert!(low > r.writes / 2, "{disk}: only {low} writes for {r:?}");
        assert!(
            counted <= high as f64 && counted >= low as f64 * 0.995,
            "agent on {}: {counted} writes to {disk}, sysfs {low}..={high}",
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
                ns.run("ss", &["-Htn", "state", "established", "dst", &peer.to_string()])
                    .unwrap()
                    .lines()
                    .count() as f64
            };
            let before = ss();
            let agent = sum(&scrape(&c, i), "stornet_tcp_sockets", &[("peer", &peer.to_string())]);
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
    let ups = p.query("up", None).unwrap();
    assert!(ups.len() == n + 1 && ups.iter().all(|s| s.value() == 1.0), "{ups:?}");

    let t = Instant::now();
    drop(c);
    eprintln!("down in {:.1} s", t.elapsed().as_secs_f64());
    assert_removed(&made);
}
