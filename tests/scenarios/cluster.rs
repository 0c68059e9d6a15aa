//! Scenario 10: a cluster run. Three storage hosts, a, b and c, each with a disk of its own,
//! its own agent and a `loadgen serve` that takes job orders; only the switch port toward c
//! has a shallow buffer. One controller, `loadgen run --client a=… --client b=… --client
//! c=…` in a's namespace, gives every host the same job and starts them at one instant:
//! paced 64 KiB writes to the host's own disk, each replicated to the two other hosts (every
//! host is given all three replication addresses and leaves out its own), as hyperconverged
//! storage writes. a's and b's writes to c cross the shallow port.
//!
//! Checked against counts of their own: "All clients" in the record is the sum of the
//! hosts' own results (IOs, bytes, every latency histogram bin by bin, also per replica
//! leg), added up here from the record's histograms; each host's writes are what its disk
//! completed (`/sys/block/<dev>/stat`); only the port toward c dropped (`tc -s`); the hosts
//! started within 50 ms of each other; and the cluster verdict is `network_congestion` on
//! the path to c, which a's and b's own verdicts name too.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{DiskStat, Mount};
use stornet_lab::lab::run::analyze;
use stornet_lab::lab::{Disk, DiskSpec, Host, Lab, Outcome, Shaping};
use stornet_lab::privilege::require_root;
use stornet_lab::replica::{ServeProcess, wait_bounded};

use crate::buffers::workload;
use crate::support::{self, RunDir};

/// The hosts, in `--client` order; the controller runs in the first one's namespace.
const HOSTS: [&str; 3] = ["a", "b", "c"];
/// The host behind the shallow switch port.
const SHALLOW: &str = "c";
/// The most the hosts' measured parts may start apart: a quarter of the 1 s intervals the
/// analysis lines the hosts up in. The hosts share one clock here, so this is the start
/// order's delivery and each job's wake-up, not clock error: a few milliseconds usually,
/// 55 ms once on a machine busy with qemu guests; a host that started on its own, without
/// the common start, would be seconds apart.
const MAX_SKEW_S: f64 = 0.25;
/// A controller still running by then hangs (the run takes about 25 s).
const CONTROLLER_LIMIT: Duration = Duration::from_secs(180);
/// The histograms of a direction's results in the record.
const HISTOGRAMS: [&str; 4] = ["slat", "clat", "lat", "total"];

/// One storage host: the disk its jobs write to, a second disk whose file system keeps the
/// copies the others replicate to it, its agent and its `loadgen serve` (replication and
/// job service). Dropped in field order: the server first, then the agent, the file system
/// and the disks.
struct StorageHost<'a> {
    host: &'a Host,
    serve: ServeProcess,
    agent: AgentProcess,
    _replica_fs: Mount,
    _replica_disk: Disk,
    /// Written by this host's jobs alone, as a raw device (`--allow-device`): the copies it
    /// receives go to the other disk, and no file system adds metadata or journal writes,
    /// so its `/sys/block` write count is the jobs' own.
    disk: Disk,
    replication: SocketAddr,
    jobs: SocketAddr,
}

impl<'a> StorageHost<'a> {
    fn start(lab: &'a Lab, name: &str) -> StorageHost<'a> {
        let host = lab.host(name);
        let tag = format!("s10{name}");
        let disk = support::disk(&tag, DiskSpec::new(support::DISK_BYTES));
        // The block layer counts requests: with merging off, one write is one request.
        disk.dev.set_queue_attr("nomerges", "2").unwrap();
        let replica_disk = support::disk(&tag, DiskSpec::new(support::DISK_BYTES));
        stornet_lab::fs::mkfs_ext4(replica_disk.path()).unwrap();
        let replica_fs = Mount::new(replica_disk.path(), &tag).unwrap();
        // The host's agent reports its disk, its network and the switch's ports (a fabric
        // whose counters the operator reads too); retransmits it counts in every namespace
        // of the machine's one kernel. Not the machine's CPU pressure: every host's agent
        // would report the same, the whole machine's, as its own.
        let config = format!(
            "[net]\nmax_peers = 4096\nnamespaces = [{:?}]\n\n[block]\ndevices_include = [{:?}]\n\n\
             [collectors]\npressure = false\n",
            lab.switch.name,
            disk.name()
        );
        let agent = AgentProcess::in_netns(&host.ns, &config)
            .unwrap_or_else(|e| panic!("starting the agent of {name}: {e:#}"));
        let replication = host.socket(host.free_port().unwrap());
        let jobs = loop {
            let port = host.free_port().unwrap();
            if port != replication.port() {
                break host.socket(port);
            }
        };
        let serve = ServeProcess::start(
            &host.ns,
            replication,
            &replica_fs.dir,
            &[
                "--jobs-listen",
                &jobs.to_string(),
                "--agent",
                &format!("http://{}", agent.addr),
                "--allow-device",
                &disk.path().display().to_string(),
            ],
        )
        .unwrap_or_else(|e| panic!("starting loadgen serve on {name}: {e:#}"));
        StorageHost {
            host,
            serve,
            agent,
            _replica_fs: replica_fs,
            _replica_disk: replica_disk,
            disk,
            replication,
            jobs,
        }
    }
}

/// The controller's command line: the shared job (with every replication address), then
/// each host with its own disk.
fn controller_args(hosts: &[StorageHost], record: &Path, report: &Path) -> Vec<String> {
    let mut w = workload();
    // Writes to c may wait through several retransmission timeouts in a row: a replica
    // timing out would end its writer's job, and the run would be incomplete.
    w.extra.push("--replica_timeout=30s".into());
    let mut args = vec!["run".to_string(), "--name=cluster".into()];
    args.extend(w.args());
    args.extend(hosts.iter().map(|h| format!("--replica={}", h.replication)));
    args.extend([
        format!("--record={}", record.display()),
        format!("--output={}", report.display()),
        "--output-format=json".into(),
        "--eta=never".into(),
        // Acknowledgements toward c cross its shallow port too: its result at the end may
        // be slow to arrive.
        "--client-timeout=60s".into(),
    ]);
    for h in hosts {
        args.push(format!("--client={}={}", h.host.name, h.jobs));
        args.push(format!("--filename={}", h.disk.path().display()));
    }
    args
}

/// Runs the controller in the first host's namespace and analyses the record; returns the
/// outcome (with the switch's and the hosts' own counts over the run) and each host's disk
/// counts over the run.
fn run_cluster(lab: &Lab, hosts: &[StorageHost], dir: &RunDir) -> (Outcome, Vec<DiskStat>) {
    let record = dir.path.join("cluster.json");
    let report = dir.path.join("cluster-report.json");
    let log = dir.path.join("controller.log");
    let bin = stornet_lab::bins::path("loadgen");
    let mut cmd = hosts[0].host.ns.command(bin.to_str().unwrap());
    cmd.args(controller_args(hosts, &record, &report))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap());
    let retransmits = || -> u64 {
        hosts
            .iter()
            .map(|h| h.host.ns.snmp_tcp("RetransSegs").unwrap())
            .sum()
    };
    let stats = || -> Vec<DiskStat> { hosts.iter().map(|h| h.disk.dev.stat().unwrap()).collect() };

    let (snmp0, qdisc0, rx0) = (
        retransmits(),
        lab.port_qdisc_drops().unwrap(),
        lab.port_rx_drops().unwrap(),
    );
    let before = stats();
    let start = Instant::now();
    let child = cmd.spawn().expect("starting the controller");
    let (out, _) = wait_bounded(child, CONTROLLER_LIMIT).expect("the controller");
    let seconds = start.elapsed().as_secs_f64();
    let after = stats();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    if !out.status.success() {
        for h in hosts {
            eprintln!("--- {} serve:\n{}", h.host.name, h.serve.log());
            eprintln!("--- {} agent:\n{}", h.host.name, h.agent.log());
        }
        panic!("the controller exited with {}: {stderr}", out.status);
    }
    let report = serde_json::from_str(&std::fs::read_to_string(&report).unwrap())
        .expect("the controller's report is JSON");
    let o = Outcome {
        report,
        failure: None,
        analysis: analyze(&record, None).expect("stornet analyze"),
        record,
        loadgen_stderr: stderr,
        retransmits: retransmits() - snmp0,
        qdisc_drops: lab.port_qdisc_drops().unwrap() - qdisc0,
        port_rx_drops: lab.port_rx_drops().unwrap() - rx0,
        seconds,
    };
    let delta = before
        .iter()
        .zip(&after)
        .map(|(b, a)| DiskStat {
            read_ios: a.read_ios - b.read_ios,
            write_ios: a.write_ios - b.write_ios,
            ..DiskStat::default()
        })
        .collect();
    (o, delta)
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {key} in {v}"))
}

/// Histograms in the record's form (non-empty `buckets` as `[index, count]` pairs),
/// added up.
#[derive(Debug, Default, PartialEq)]
struct Added {
    buckets: BTreeMap<u64, u64>,
    count: u64,
    sum: u64,
    min: Option<u64>,
    max: u64,
    saturated: u64,
}

impl Added {
    fn of<'v>(histograms: impl IntoIterator<Item = &'v Value>) -> Added {
        let mut s = Added::default();
        for h in histograms {
            for b in h["buckets"].as_array().expect("buckets") {
                *s.buckets.entry(b[0].as_u64().unwrap()).or_default() += b[1].as_u64().unwrap();
            }
            let n = count(h, "count");
            s.count += n;
            s.sum += count(h, "sum");
            if n > 0 {
                let m = count(h, "min");
                s.min = Some(s.min.map_or(m, |x| x.min(m)));
            }
            s.max = s.max.max(count(h, "max"));
            s.saturated += count(h, "saturated");
        }
        s
    }
}

/// "All clients" (the record's result) of every point and direction equals the sum of the
/// hosts' own results: IOs and bytes, and every histogram, per replica leg too, bin by bin.
fn check_all_clients(record: &Value) {
    let clients = record["clients"]
        .as_array()
        .expect("clients[] in the record");
    let points = record["result"]["points"].as_array().expect("points");
    assert!(!points.is_empty(), "the record has no point");
    for (p, point) in points.iter().enumerate() {
        for d in 0..2 {
            let all = &point["merged"][d];
            let own: Vec<&Value> = clients
                .iter()
                .map(|c| &c["result"]["points"][p]["merged"][d])
                .collect();
            for key in ["ios", "bytes"] {
                let sum: u64 = own.iter().map(|o| count(o, key)).sum();
                assert_eq!(count(all, key), sum, "point {p} direction {d}: {key}");
            }
            for h in HISTOGRAMS {
                assert_eq!(
                    Added::of([&all[h]]),
                    Added::of(own.iter().map(|o| &o[h])),
                    "point {p} direction {d}: histogram {h}"
                );
            }
            let legs = |v: &'_ Value| v["legs"].as_array().cloned().unwrap_or_default();
            let hosts_legs: Vec<Value> = own.iter().flat_map(|o| legs(o)).collect();
            for leg in legs(all) {
                let name = &leg["name"];
                let of_hosts = hosts_legs.iter().filter(|l| l["name"] == *name);
                assert_eq!(
                    Added::of([&leg["lat"]]),
                    Added::of(of_hosts.map(|l| &l["lat"])),
                    "point {p} direction {d}: leg {name}"
                );
            }
            // Every host's legs are in All clients.
            for leg in &hosts_legs {
                assert!(
                    legs(all).iter().any(|l| l["name"] == leg["name"]),
                    "leg {} is not in All clients",
                    leg["name"]
                );
            }
        }
    }
}

/// fio's client/server JSON: an entry per host, then "All clients" with their writes.
fn check_fio_json(report: &Value) {
    let stats = report["client_stats"].as_array().expect("client_stats");
    let names: Vec<&str> = stats
        .iter()
        .map(|e| e["hostname"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, [HOSTS.as_slice(), &["All clients"]].concat());
    let writes = |e: &Value| e["write"]["total_ios"].as_u64().expect("write total_ios");
    let hosts: u64 = stats[..HOSTS.len()].iter().map(writes).sum();
    assert_eq!(writes(&stats[HOSTS.len()]), hosts, "All clients' writes");
}

/// A value of every point of a host's results in the record, added up.
fn over_points(client: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    client["result"]["points"]
        .as_array()
        .expect("the host's points")
        .iter()
        .map(f)
        .sum()
}

#[test]
fn scenario_10_a_cluster_run_names_the_shallow_port_of_its_host() {
    if !require_root("scenario_10_a_cluster_run_names_the_shallow_port_of_its_host") {
        return;
    }
    let began = Instant::now();
    let dir = RunDir::new("cluster");
    let lab = support::client_and_two_replicas("s10", SHALLOW, Shaping::shallow());
    let hosts: Vec<StorageHost> = HOSTS.iter().map(|n| StorageHost::start(&lab, n)).collect();
    for h in &hosts {
        lab.wait_connected(h.host).unwrap();
    }
    let dropped = || -> Vec<u64> {
        hosts
            .iter()
            .map(|h| lab.port_qdisc_dropped(h.host).unwrap())
            .collect()
    };
    let drops0 = dropped();
    let (o, disk) = run_cluster(&lab, &hosts, &dir);
    let drops: Vec<u64> = dropped().iter().zip(&drops0).map(|(a, b)| a - b).collect();
    support::print_outcome("cluster", &o);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(&o.record).unwrap()).expect("the record");
    let clients = record["clients"]
        .as_array()
        .expect("clients[] in the record");
    assert_eq!(clients.len(), HOSTS.len());
    let timeline: Vec<&str> = record["points"][0]["run"]["hosts"]
        .as_array()
        .expect("the analysis input's hosts")
        .iter()
        .map(|h| h["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(timeline, HOSTS, "every host on the record's one timeline");

    // All clients is the sum of the hosts, in the record and in fio's JSON.
    check_all_clients(&record);
    check_fio_json(&o.report);

    // Each host's writes are what its disk completed, exactly: the device's count covers
    // the whole job, so the ramp's writes too (a job drains its IOs in flight before it
    // reports). Its reads are the safety check's, and udev's if it probes the device after
    // the job closes it: printed, not compared.
    for ((h, c), (disk, drops)) in hosts.iter().zip(clients).zip(disk.iter().zip(&drops)) {
        assert_eq!(c["name"], h.host.name.as_str());
        let measured = over_points(c, |p| count(&p["merged"][1], "ios"));
        let ramp = over_points(c, |p| {
            p["jobs"]
                .as_array()
                .expect("jobs")
                .iter()
                .map(|j| j["ramp_ios"][1].as_u64().expect("ramp_ios"))
                .sum()
        });
        let verdict = o.analysis["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["host"] == h.host.name.as_str())
            .map(|v| &v["verdict"]);
        println!(
            "{}: {measured} writes measured + {ramp} in the ramp, /sys/block/{}/stat {} writes \
             ({} reads, {} safety-check reads); switch port drops toward it {drops}; its own \
             verdict {} at {} ({:.2})",
            h.host.name,
            h.disk.name(),
            disk.write_ios,
            disk.read_ios,
            c["result"]["safety_probe_reads"],
            verdict.map_or(&Value::Null, |v| &v["cause"]),
            verdict.map_or(&Value::Null, |v| &v["location"]),
            verdict
                .and_then(|v| v["confidence"].as_f64())
                .unwrap_or(0.0),
        );
        assert_eq!(
            disk.write_ios,
            measured + ramp,
            "{}: writes in /sys/block/{}/stat against loadgen's",
            h.host.name,
            h.disk.name()
        );
    }

    let starts: Vec<f64> = clients
        .iter()
        .map(|c| c["starts_unix_seconds"][0].as_f64().expect("a start"))
        .collect();
    let skew = starts.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - starts.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "start skew {}; the whole scenario {:.0} s",
        support::ms(skew),
        began.elapsed().as_secs_f64()
    );
    assert!(
        skew < MAX_SKEW_S,
        "the hosts started {} apart",
        support::ms(skew)
    );

    // The kernel's own count: only the shallow port dropped.
    let shallow = HOSTS.iter().position(|&n| n == SHALLOW).unwrap();
    for (i, d) in drops.iter().enumerate() {
        if i == shallow {
            assert!(*d > 0, "the shallow port toward {SHALLOW} dropped nothing");
        } else {
            assert_eq!(*d, 0, "the deep port toward {} dropped packets", HOSTS[i]);
        }
    }

    // The verdict: congestion on the path to c, on the host it chose and on each of the
    // hosts that write to c through its port. (c's own writes wait for answers that
    // cross its port too; its verdict names one of its replicas' paths.)
    let c = lab.host(SHALLOW).addr.to_string();
    let to_c = format!("path to replica {c}");
    support::assert_verdict(&o, "network_congestion", &to_c);
    for h in o.analysis["hosts"].as_array().expect("hosts") {
        if h["host"] != SHALLOW {
            let v = &h["verdict"];
            assert_eq!(
                (v["cause"].as_str(), v["location"].as_str()),
                (Some("network_congestion"), Some(to_c.as_str())),
                "host {}: {v:#}",
                h["host"]
            );
        }
    }
}
