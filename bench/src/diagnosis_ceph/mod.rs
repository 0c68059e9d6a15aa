//! `cargo xtask bench diagnosis-ceph`: how often the verdict is right on a real Ceph
//! cluster. One lab cluster (Debian's Ceph, 3 OSD hosts h1-h3 with an agent each, a
//! Prometheus scraping them and the mgr every 2 s) serves every case in turn: `rados bench`
//! writes 64 KiB objects, 16 in flight, 28 s healthy and then 20 s with the case's fault,
//! and `stornet analyze --prometheus --app-latency ceph` judges the window from the OSDs'
//! own op latency. Between cases the fault is lifted, the bench's objects removed and the
//! cluster left to settle. The cases:
//!
//! - healthy: nothing injected;
//! - network congestion: the switch port toward h1 (osd.0's host) gets a 16 KiB buffer at
//!   three rates;
//! - network saturation: the same port at three rates with a 4 MiB buffer, which drops
//!   nothing and holds the writes back. `network_saturation` weighs the round trip per IO
//!   to each replica, which Ceph 16.2's mgr does not export (`subop_w_latency` is below its
//!   export priority): this class shows what stornet says without it;
//! - slow device: osd.0's disk is throttled (three write rates);
//! - cpu: osd.1's daemon is capped at a share of a CPU (a cgroup quota, three sizes);
//! - judged from a client's own latency ([`client`]): loadgen on CephFS, healthy, and with
//!   an MTU mismatch at the port toward h1 at three MTUs below the network's 9000. A new
//!   client's ops never reach the OSD behind that port, so no OSD's op latency shows it:
//!   `stornet analyze` judges the client's run record. These cases run last in each
//!   repetition, and the network stays at MTU 9000 from the first of them on.
//!
//! A case is right when the verdict names the cause and its place: the path to h1, osd.0's
//! device on h1, the CPU of osd.1's host (for a healthy case, `none`). Printed: every case with the verdict, its place and confidence and
//! each OSD host's own verdict (and, for a wrong one, every host's best candidates), the
//! confusion matrix, the accuracy, and the machine's load average at the start and the end
//! (the bench takes no lock: the verdicts must hold on a busy machine). Every analysis is
//! kept under `target/bench/diagnosis-ceph/`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use stornet_lab::ceph::{CephLab, CephSpec, RadosBench};
use stornet_lab::cmd;
use stornet_lab::lab::{Shaping, interrupt};
use stornet_lab::promserver::now;

use super::confusion;

mod client;

/// Seconds of load before the fault, with it, and the analysis' step: the healthy part is
/// the larger, so that the analysis' baseline is the healthy latency.
const HEALTHY_S: u64 = 28;
const FAULT_S: u64 = 20;
const STEP_S: u64 = 4;
/// Rest between one case's cleanup and the next case's load.
const SETTLE_S: u64 = 10;
/// The OSDs the faults act on: osd.0 (on h1) for the port and the disk, osd.1 for the CPU.
const DISK_OSD: u32 = 0;
const CPU_OSD: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Healthy,
    /// The rate of the switch port toward osd.0's host, with a 16 KiB buffer.
    Congestion(&'static str),
    /// The same port at a rate with a 4 MiB buffer: it holds the writes back, drops nothing.
    Deep(&'static str),
    /// osd.0's disk's write limit, IOs per second.
    SlowDevice(u64),
    /// osd.1's CPU limit, per mille of a CPU.
    Cpu(u32),
    /// loadgen on CephFS, nothing injected.
    ClientHealthy,
    /// loadgen on CephFS; the MTU of the switch port toward osd.0's host.
    Mtu(u32),
}

impl Fault {
    const ALL: [Fault; 17] = [
        Fault::Healthy,
        Fault::Congestion("200mbit"),
        Fault::Congestion("100mbit"),
        Fault::Congestion("50mbit"),
        Fault::Deep("200mbit"),
        Fault::Deep("100mbit"),
        Fault::Deep("50mbit"),
        Fault::SlowDevice(100),
        Fault::SlowDevice(50),
        Fault::SlowDevice(25),
        Fault::Cpu(100),
        Fault::Cpu(50),
        Fault::Cpu(25),
        Fault::ClientHealthy,
        Fault::Mtu(3000),
        Fault::Mtu(2000),
        Fault::Mtu(1500),
    ];

    fn truth(self) -> &'static str {
        match self {
            Fault::Healthy => "none",
            Fault::Congestion(_) => "network_congestion",
            Fault::Deep(_) => "network_saturation",
            Fault::SlowDevice(_) => "slow_device",
            Fault::Cpu(_) => "cpu",
            Fault::ClientHealthy => "none",
            Fault::Mtu(_) => "mtu_mismatch",
        }
    }

    /// Judged from loadgen's record on CephFS rather than the OSDs' op latency.
    fn client(self) -> bool {
        matches!(self, Fault::ClientHealthy | Fault::Mtu(_))
    }

    fn label(self) -> String {
        match self {
            Fault::Healthy => "healthy".into(),
            Fault::Congestion(r) => format!("congestion, {r} 16 KiB toward h1"),
            Fault::Deep(r) => format!("saturation, {r} 4 MiB toward h1"),
            Fault::SlowDevice(n) => format!("slow device, osd.0 at {n} writes/s"),
            Fault::Cpu(n) => format!("cpu, osd.1 at {}% of a CPU", f64::from(n) / 10.0),
            Fault::ClientHealthy => "healthy, CephFS client".into(),
            Fault::Mtu(m) => format!("mtu mismatch, port toward h1 at {m}"),
        }
    }

    /// The row of the confusion matrix.
    fn class(self) -> &'static str {
        match self {
            Fault::Healthy => "healthy",
            Fault::Congestion(_) => "congestion",
            Fault::Deep(_) => "saturation",
            Fault::SlowDevice(_) => "slow device",
            Fault::Cpu(_) => "cpu",
            Fault::ClientHealthy => "healthy, client",
            Fault::Mtu(_) => "mtu mismatch",
        }
    }

    fn inject(self, c: &CephLab) -> Result<()> {
        match self {
            Fault::Healthy => Ok(()),
            Fault::Congestion(rate) => c.shape_port(
                &c.osd(DISK_OSD).host,
                Some(&Shaping::new(rate, "32kb", "16kb")),
            ),
            Fault::Deep(rate) => c.shape_port(
                &c.osd(DISK_OSD).host,
                Some(&Shaping::new(rate, "32kb", "4mb")),
            ),
            Fault::SlowDevice(n) => c.slow_osd_disk(DISK_OSD, Some(n)),
            Fault::Cpu(n) => c.starve_osd_cpu(CPU_OSD, Some(n.into())),
            // The client cases inject their own, at their run's time.
            Fault::ClientHealthy | Fault::Mtu(_) => Ok(()),
        }
    }
}

/// Takes every fault the bench injects away.
fn heal(c: &CephLab) -> Result<()> {
    c.shape_port(&c.osd(DISK_OSD).host, None)?;
    c.slow_osd_disk(DISK_OSD, None)?;
    c.starve_osd_cpu(CPU_OSD, None)
}

/// Where each fault is: the path to osd.0's host (its address), osd.0's device on its host,
/// the CPU of osd.1's host.
struct Places {
    disk_host_addr: String,
    disk: String,
    cpu: String,
}

impl Places {
    fn of(c: &CephLab) -> Places {
        let o = c.osd(DISK_OSD);
        Places {
            disk_host_addr: c.lab.host(&o.host).addr.to_string(),
            disk: format!("{} on {}", o.disk.name(), o.host),
            cpu: format!("CPU of {}", c.osd(CPU_OSD).host),
        }
    }

    fn right(&self, fault: Fault, location: &str) -> bool {
        match fault {
            Fault::Healthy | Fault::ClientHealthy => true,
            Fault::Congestion(_) | Fault::Deep(_) | Fault::Mtu(_) => {
                location.contains(&self.disk_host_addr)
            }
            Fault::SlowDevice(_) => location.contains(&self.disk),
            Fault::Cpu(_) => location.starts_with(&self.cpu),
        }
    }
}

/// What one case gave.
struct Case {
    fault: Fault,
    cause: String,
    location: String,
    confidence: f64,
    /// The verdict names the true cause and its place.
    right: bool,
}

impl Case {
    /// The case of `fault` whose verdict (stornet's JSON) is `v`.
    fn judged(fault: Fault, v: &Value, places: &Places) -> Case {
        let cause = v["cause"].as_str().unwrap_or("").to_string();
        let location = v["location"].as_str().unwrap_or("").to_string();
        let right = cause == fault.truth() && places.right(fault, &location);
        Case {
            fault,
            right,
            confidence: v["confidence"].as_f64().unwrap_or(0.0),
            cause,
            location,
        }
    }

    /// `congestion, … case1-rep1: right network_congestion at path … (0.41)`.
    fn head(&self, name: &str) -> String {
        format!(
            "{:<38} {name}: {} {} at {} ({:.2})",
            self.fault.label(),
            if self.right { "right" } else { "WRONG" },
            self.cause,
            if self.location.is_empty() {
                "-"
            } else {
                &self.location
            },
            self.confidence
        )
    }
}

/// `h1 slow_device at device loop1 on h1 (0.80)` for each OSD host.
fn host_verdicts(json: &Value, hosts: &[String]) -> String {
    hosts
        .iter()
        .map(|h| {
            let v = json["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["host"] == h.as_str())
                .map_or(&Value::Null, |x| &x["verdict"]);
            format!(
                "{h} {} at {} ({:.2})",
                v["cause"].as_str().unwrap_or("-"),
                v["location"].as_str().unwrap_or("-"),
                v["confidence"].as_f64().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every host's three best-scoring candidates, for a wrong verdict to be read.
fn candidates(json: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for h in json["hosts"].as_array().into_iter().flatten() {
        for d in h["directions"].as_array().into_iter().flatten() {
            let mut c: Vec<&Value> = d["candidates"].as_array().into_iter().flatten().collect();
            c.sort_by(|a, b| {
                let score = |v: &Value| v["score"].as_f64().unwrap_or(0.0);
                score(b).total_cmp(&score(a))
            });
            let best: Vec<String> = c
                .iter()
                .take(3)
                .map(|c| {
                    format!(
                        "{} at {} {:.3}{}",
                        c["cause"].as_str().unwrap_or("-"),
                        c["location"].as_str().unwrap_or("-"),
                        c["score"].as_f64().unwrap_or(0.0),
                        if c["requirement_met"] == true {
                            ""
                        } else {
                            " (requirement not met)"
                        }
                    )
                })
                .collect();
            lines.push(format!(
                "{} {} ({}): {}",
                h["host"].as_str().unwrap_or("-"),
                d["direction"].as_str().unwrap_or("-"),
                d["state"].as_str().unwrap_or("-"),
                best.join("; ")
            ));
        }
    }
    lines
}

/// The machine's load averages over 1, 5 and 15 minutes.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unreadable ({e})"))
}

/// Runs every case whose label contains `only` (all without it) `reps` times on one cluster.
pub fn run(only: Option<&str>, reps: usize) -> Result<()> {
    if !cmd::is_root() {
        bail!("the Ceph diagnosis bench needs root (namespaces, loop devices, cgroups, eBPF)");
    }
    let faults: Vec<(usize, Fault)> = Fault::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, f)| only.is_none_or(|o| f.label().contains(o)))
        .collect();
    anyhow::ensure!(!faults.is_empty(), "no case's label contains {only:?}");
    cmd::step("build stornet-agent and stornet", || {
        cmd::run(cmd::cargo().args([
            "build",
            "--release",
            "-p",
            "stornet-agent",
            "-p",
            "stornet-diagnose",
            "-p",
            "loadgen",
        ]))
    })?;
    interrupt::install()?;
    let out = PathBuf::from("target/bench/diagnosis-ceph");
    std::fs::create_dir_all(&out)?;
    let began = Instant::now();
    let load_start = loadavg();
    let mut c = cmd::step("bring up the Ceph lab", || {
        CephLab::new(
            "dxc",
            CephSpec {
                stats_period_s: 2,
                ..CephSpec::default()
            },
        )
    })?;
    if faults.iter().any(|(_, f)| f.client()) {
        cmd::step("start CephFS", || c.start_cephfs())?;
    }
    let c = c;
    let hosts: Vec<String> = c.osds.iter().map(|o| o.host.clone()).collect();
    let places = Places::of(&c);
    println!(
        "Ceph diagnosis bench: {} cases x {reps} repetitions, rados bench 64 KiB writes {HEALTHY_S} s healthy then \
         {FAULT_S} s with the fault; HEALTH_OK after {:.1} s; load average at the start {load_start}; analyses in {}",
        faults.len(),
        c.bringup_s,
        out.display()
    );
    // A fresh cluster's first writes are faster than the rest (an empty allocator): one
    // unmeasured run first.
    c.rados_bench(&RadosBench::writes(10))?;
    c.cleanup_bench()?;
    let mut cases = Vec::new();
    // Started at the first client case: from then on, the network is at MTU 9000.
    let mut client: Option<client::Client> = None;
    for rep in 1..=reps {
        for &(i, fault) in &faults {
            interrupt::check()?;
            let name = format!("case{i}-rep{rep}");
            let result = if fault.client() {
                if client.is_none() {
                    client = Some(cmd::step("mount CephFS at MTU 9000", || {
                        client::Client::start(&c)
                    })?);
                }
                let cl = client.as_ref().expect("started above");
                one_client(&c, cl, fault, &places, &out, &name)
            } else {
                one(&c, fault, &places, &hosts, &out, &name)
            };
            let case = match result {
                Ok(case) => case,
                Err(e) => {
                    println!("  {:<38} rep {rep}: failed: {e:#}", fault.label());
                    heal(&c)?;
                    let _ = c.cleanup_bench();
                    Case {
                        fault,
                        cause: "failed".into(),
                        location: String::new(),
                        confidence: 0.0,
                        right: false,
                    }
                }
            };
            cases.push(case);
            std::thread::sleep(Duration::from_secs(SETTLE_S));
        }
    }
    let summary = summarize(&cases, &load_start, began.elapsed());
    print!("{summary}");
    std::fs::write(out.join("summary.txt"), &summary)?;
    Ok(())
}

fn one(
    c: &CephLab,
    fault: Fault,
    places: &Places,
    hosts: &[String],
    out: &Path,
    name: &str,
) -> Result<Case> {
    let start = now().floor();
    let b = RadosBench::writes((HEALTHY_S + FAULT_S) as u32)
        .limit(Duration::from_secs(HEALTHY_S + FAULT_S + 90));
    let (bench, health, injected) = std::thread::scope(|s| {
        let load = s.spawn(|| c.rados_bench(&b));
        std::thread::sleep(Duration::from_secs(HEALTHY_S));
        let injected = fault.inject(c);
        let bench = load.join().expect("the rados bench thread");
        let health = c.health().unwrap_or_else(|e| format!("{e:#}"));
        (bench, health, injected)
    });
    heal(c)?;
    injected.with_context(|| format!("injecting {}", fault.label()))?;
    let bench = bench?;
    // The last reports reach the mgr and Prometheus.
    std::thread::sleep(Duration::from_secs(2 * STEP_S));
    let end = start + ((now() - start) / STEP_S as f64).floor() * STEP_S as f64;
    let analysis = c.analyze(start, end, STEP_S, "json")?;
    std::fs::write(out.join(format!("{name}.json")), &analysis)?;
    let json: Value = serde_json::from_str(&analysis).context("stornet's JSON")?;
    c.cleanup_bench()?;

    let case = Case::judged(fault, &json["verdict"], places);
    println!(
        "  {} | {} | rados bench {:.0} IOPS, mean {:.0} ms, max {:.0} ms; Ceph: {health}",
        case.head(name),
        host_verdicts(&json, hosts),
        bench.iops,
        bench.mean_latency_s * 1e3,
        bench.max_latency_s * 1e3,
    );
    if !case.right {
        for l in candidates(&json) {
            println!("      {l}");
        }
    }
    Ok(case)
}

/// A case judged from loadgen's record on CephFS.
fn one_client(
    c: &CephLab,
    cl: &client::Client,
    fault: Fault,
    places: &Places,
    out: &Path,
    name: &str,
) -> Result<Case> {
    let mtu = match fault {
        Fault::Mtu(m) => Some(m),
        _ => None,
    };
    let r = cl.run(c, &c.osd(DISK_OSD).host, mtu, out, name)?;
    let case = Case::judged(fault, &r.outcome.analysis["verdict"], places);
    let w = r.outcome.latency(0, "write");
    println!(
        "  {} | loadgen {:.0} IOPS; {}; /proc/net/snmp: {} retransmits from the client; Ceph: {}{}",
        case.head(name),
        w.iops,
        r.outcome.evidence().first().map_or("-", String::as_str),
        r.outcome.retransmits,
        r.health,
        r.outcome
            .failure
            .as_deref()
            .map(|f| format!("; loadgen: {f}"))
            .unwrap_or_default(),
    );
    if !case.right {
        for e in r.outcome.evidence() {
            println!("      {e}");
        }
    }
    Ok(case)
}

fn summarize(cases: &[Case], load_start: &str, took: Duration) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nCeph diagnosis bench at commit {}, {} cases in {:.1} min; load average at the start {load_start}, at the end {}",
        confusion::commit(),
        cases.len(),
        took.as_secs_f64() / 60.0,
        loadavg()
    );
    let pairs: Vec<(&str, &str)> = cases
        .iter()
        .map(|c| (c.fault.class(), c.cause.as_str()))
        .collect();
    confusion::matrix(
        &mut s,
        &[
            "healthy",
            "congestion",
            "slow device",
            "cpu",
            "healthy, client",
            "mtu mismatch",
        ],
        &[
            "none",
            "network_congestion",
            "slow_device",
            "cpu",
            "mtu_mismatch",
        ],
        &pairs,
    );
    let faults: Vec<&Case> = cases.iter().filter(|c| c.fault.truth() != "none").collect();
    let healthy: Vec<&Case> = cases.iter().filter(|c| c.fault.truth() == "none").collect();
    let cause_right = faults.iter().filter(|c| c.cause == c.fault.truth()).count();
    let right = faults.iter().filter(|c| c.right).count();
    let _ = writeln!(
        s,
        "\naccuracy (fault cases, cause and place right): {}",
        confusion::ratio(right, faults.len())
    );
    let _ = writeln!(
        s,
        "cause right, place aside: {}",
        confusion::ratio(cause_right, faults.len())
    );
    let _ = writeln!(
        s,
        "false positives, healthy: {}",
        confusion::ratio(
            healthy.iter().filter(|c| c.cause != "none").count(),
            healthy.len()
        )
    );
    for c in cases.iter().filter(|c| !c.right) {
        let _ = writeln!(
            s,
            "  wrong: {}: {} at {} ({:.2})",
            c.fault.label(),
            c.cause,
            if c.location.is_empty() {
                "-"
            } else {
                &c.location
            },
            c.confidence
        );
    }
    s
}
