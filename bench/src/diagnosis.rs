//! `cargo xtask bench diagnosis`: how often the verdict is right. Host a writes 64 KiB
//! blocks at 100 per second (open loop, up to 8 in flight, 24 s) to a loop device with a
//! queue of 4 requests, with every write replicated to hosts b and c through the lab switch
//! (200 Mbit/s ports, deep buffers, MTU 9000 throughout), stornet-agent watching. Each
//! case injects one fault 14 s into the measured part, so the run has a healthy baseline
//! longer than the fault (the analysis takes its baseline from the run) and an onset:
//!
//! - healthy: nothing; and healthy on a busy host (two CPU spinners and a direct-IO disk
//!   writer for the whole run);
//! - congestion: the switch port toward c gets a shallow buffer (three depths);
//! - network saturation: the switch port toward c gets a rate below the writes' 52 Mbit/s
//!   with a deep buffer (three rates): the writes queue and nothing drops;
//! - slow device: the client's disk is throttled below the write rate (three limits);
//! - loss: host c drops a share of the TCP segments it receives at random, with no queue
//!   behind the loss (nftables; three rates), as a bad cable or NIC would;
//! - MTU mismatch: the switch port toward c is set below the hosts' 9000 bytes (three
//!   MTUs, all below the last piece of a 64 KiB write, which leaves as a segment of its
//!   own); the bridge drops the larger frames, counts nothing and sends no ICMP;
//! - device saturation: the device behind the client's disk is throttled (three limits),
//!   so requests wait in the disk's short queue and more IOs are outstanding than it holds;
//! - slow replica device: the device behind c's disk (its replica directory is on ext4 on
//!   a disk of its own) is throttled (three limits): c's requests take long in service;
//! - replica CPU starvation: c's server shares a CPU limit (a cgroup quota, three sizes)
//!   with a spinner that uses it up, as a storage daemon's other work under its
//!   container's limit would.
//!
//! b and c are nodes: each has its own disk and its own agent (block and pressure, the
//! pressure of its server's cgroup), sampled with the client's.
//!
//! A fault case counts only if the client's write p99 after the onset is at least twice
//! its p99 before (impact validation); the others are listed with why they were dropped.
//! Printed: every case, the confusion matrix (true class × verdict), top-1 and top-2
//! accuracy, false positives on healthy runs, whether the culprit (the replica's path, the
//! device) was named, and the intervals from the onset to the first right live verdict.
//! Every run record is kept under `target/bench/diagnosis/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::Value;
use stornet_lab::lab::{
    Disk, DiskSpec, HostSpec, Lab, Node, ReplicatedRun, Shaping, Throttle, Workload, interrupt,
};

use super::{confusion, median};

/// The ramp of `Workload::paced_writes`.
const RAMP_S: u64 = 1;
const ONSET_S: u64 = 14;
/// A limit the disk never reaches: the throttle's cgroup exists, to be tightened later.
const UNLIMITED: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Healthy,
    Busy,
    /// The buffer (tbf limit) of the switch port toward c.
    Congestion(&'static str),
    /// The rate of the switch port toward c, below the writes' 52 Mbit/s, with a deep
    /// buffer: the link at its rate, nothing dropped.
    NetSaturation(&'static str),
    /// The client disk's write limit, IOs per second.
    SlowDevice(u64),
    /// Segments host c drops at random on receipt, per mille.
    Loss(u32),
    /// The MTU of the switch port toward c.
    Mtu(u32),
    /// The write limit of the device behind the client's disk, IOs per second.
    Saturation(u64),
    /// The write limit of the device behind c's disk, IOs per second.
    ReplicaDisk(u64),
    /// The CPU limit c's server shares with a spinner, per mille of a CPU.
    ReplicaCpu(u64),
}

impl Fault {
    const ALL: [Fault; 26] = [
        Fault::Healthy,
        Fault::Busy,
        Fault::Congestion("256kb"),
        Fault::Congestion("32kb"),
        Fault::Congestion("16kb"),
        Fault::NetSaturation("45mbit"),
        Fault::NetSaturation("35mbit"),
        Fault::NetSaturation("25mbit"),
        Fault::SlowDevice(150),
        Fault::SlowDevice(80),
        Fault::SlowDevice(40),
        Fault::Loss(10),
        Fault::Loss(30),
        Fault::Loss(100),
        Fault::Mtu(2500),
        Fault::Mtu(2000),
        Fault::Mtu(1500),
        Fault::Saturation(90),
        Fault::Saturation(60),
        Fault::Saturation(30),
        Fault::ReplicaDisk(80),
        Fault::ReplicaDisk(40),
        Fault::ReplicaDisk(20),
        Fault::ReplicaCpu(500),
        Fault::ReplicaCpu(250),
        Fault::ReplicaCpu(100),
    ];

    fn truth(self) -> &'static str {
        match self {
            Fault::Healthy | Fault::Busy => "none",
            Fault::Congestion(_) => "network_congestion",
            Fault::NetSaturation(_) => "network_saturation",
            Fault::SlowDevice(_) | Fault::ReplicaDisk(_) => "slow_device",
            Fault::ReplicaCpu(_) => "cpu",
            Fault::Loss(_) => "packet_loss",
            Fault::Mtu(_) => "mtu_mismatch",
            Fault::Saturation(_) => "device_saturation",
        }
    }

    fn label(self) -> String {
        match self {
            Fault::Healthy => "healthy".into(),
            Fault::Busy => "healthy, busy host".into(),
            Fault::Congestion(l) => format!("congestion, {l} buffer toward c"),
            Fault::NetSaturation(r) => format!("network saturation, {r} toward c"),
            Fault::SlowDevice(n) => format!("slow device, {n} writes/s"),
            Fault::Loss(n) => format!("loss, {:.1}% at c", f64::from(n) / 10.0),
            Fault::Mtu(n) => format!("mtu mismatch, port toward c at {n}"),
            Fault::Saturation(n) => format!("device saturation, {n} writes/s behind"),
            Fault::ReplicaDisk(n) => format!("slow replica device, c at {n} writes/s"),
            Fault::ReplicaCpu(n) => format!("replica cpu, c's limit {}%", n / 10),
        }
    }

    fn is_fault(self) -> bool {
        !matches!(self, Fault::Healthy | Fault::Busy)
    }

    /// The row of the confusion matrix.
    fn class(self) -> &'static str {
        match self {
            Fault::Healthy => "healthy",
            Fault::Busy => "healthy, busy host",
            Fault::Congestion(_) => "congestion",
            Fault::NetSaturation(_) => "network saturation",
            Fault::SlowDevice(_) => "slow device",
            Fault::Loss(_) => "loss",
            Fault::Mtu(_) => "mtu mismatch",
            Fault::Saturation(_) => "device saturation",
            Fault::ReplicaDisk(_) => "slow replica device",
            Fault::ReplicaCpu(_) => "replica cpu",
        }
    }

    /// A verdict that is not a false alarm on a healthy run: `none`, and on a busy host
    /// also `cpu` (its CPU was contended).
    fn acceptable(self, cause: &str) -> bool {
        cause == self.truth() || (self == Fault::Busy && cause == "cpu")
    }
}

/// The hosts' MTU (storage networks commonly run jumbo frames).
const MTU: u32 = 9000;
/// More IOs than the disk's queue holds, once the device slows.
const IODEPTH: u32 = 8;
const QUEUE: u32 = 4;

fn workload() -> Workload {
    Workload {
        iodepth: IODEPTH,
        extra: vec!["--replica_timeout=30s".into()],
        ..Workload::paced_writes("24s")
    }
}

/// What one case gave.
struct Case {
    fault: Fault,
    cause: String,
    /// The best-scoring other cause among the candidates, for top-2.
    second: Option<String>,
    location: String,
    culprit: bool,
    /// Write p99 after the onset over before.
    impact: Option<f64>,
    /// Why a fault case does not count; `None` when it does.
    dropped: Option<String>,
    /// Intervals from the onset to the first live verdict naming the true cause.
    to_correct: Option<usize>,
}

/// Work that keeps the host busy while it lives: CPU spinners and a direct-IO writer.
struct Busy(Vec<Child>);

impl Busy {
    fn start(dir: &Path) -> Result<Busy> {
        let mut children = Vec::new();
        for _ in 0..2 {
            children.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()?,
            );
        }
        let file = dir.join("busy-writer");
        children.push(
            Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "while :; do dd if=/dev/zero of={} bs=1M count=256 oflag=direct 2>/dev/null; done",
                    file.display()
                ))
                .stdout(Stdio::null())
                .spawn()?,
        );
        Ok(Busy(children))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Runs every case whose label contains `only` (all without it) `reps` times.
pub fn run(only: Option<&str>, reps: usize) -> Result<()> {
    interrupt::install()?;
    let out = PathBuf::from("target/bench/diagnosis");
    std::fs::create_dir_all(&out)?;
    let host = |n| HostSpec::new(n).shaped(Shaping::deep()).mtu(MTU, MTU);
    let lab = Lab::new("dx", &[host("a"), host("b"), host("c")])?;
    // As storage hosts are commonly tuned (and as the MTU mismatch needs to show: with a
    // small window a write's tail leaves in pieces a 1500-byte port still passes).
    lab.host("c")
        .sysctl("net.ipv4.tcp_rmem", "4096 1048576 6291456")?;
    let disk = Disk::new(
        "dx",
        DiskSpec::new(1 << 30)
            .queue_depth(QUEUE)
            .throttle(Throttle::WriteIops(UNLIMITED))
            .slow_behind(Throttle::WriteIops(UNLIMITED)),
    )?;
    let rr = ReplicatedRun::start_nodes(&lab, "a", &["b", "c"])?;
    let c_addr = lab.host("c").addr.to_string();
    let faults: Vec<(usize, Fault)> = Fault::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, f)| only.is_none_or(|o| f.label().contains(o)))
        .collect();
    anyhow::ensure!(!faults.is_empty(), "no case's label contains {only:?}");
    println!(
        "diagnosis bench: {} cases x {reps} repetitions, faults {ONSET_S} s into 24 s runs; records in {}",
        faults.len(),
        out.display()
    );
    let mut cases = Vec::new();
    for rep in 1..=reps {
        for &(i, fault) in &faults {
            interrupt::check()?;
            let name = format!("case{i}-rep{rep}");
            let case = one(&lab, &rr, &disk, fault, &out, &name, &c_addr)?;
            print_case(&case, rep);
            cases.push(case);
        }
    }
    let summary = summarize(&cases);
    print!("{summary}");
    std::fs::write(out.join("summary.txt"), &summary)?;
    Ok(())
}

fn one(
    lab: &Lab,
    rr: &ReplicatedRun,
    disk: &Disk,
    fault: Fault,
    out: &Path,
    name: &str,
    c_addr: &str,
) -> Result<Case> {
    let c = lab.host("c");
    let node = &rr.nodes[1];
    heal(lab, disk, node)?;
    let _busy = (fault == Fault::Busy)
        .then(|| Busy::start(out))
        .transpose()?;
    let onset: Mutex<Option<f64>> = Mutex::new(None);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(RAMP_S + ONSET_S));
            let injected = match fault {
                Fault::Congestion(limit) => lab.reshape(c, &Shaping::new("200mbit", "32kb", limit)),
                Fault::NetSaturation(rate) => lab.reshape(c, &Shaping::new(rate, "32kb", "4mb")),
                Fault::SlowDevice(n) => disk.throttle_now(Throttle::WriteIops(n)),
                Fault::Loss(n) => lab.lose(c, n),
                Fault::Mtu(n) => lab.set_port_mtu(c, n),
                Fault::Saturation(n) => disk.throttle_behind_now(Throttle::WriteIops(n)),
                Fault::ReplicaDisk(n) => node.slow_disk(Some(n)),
                Fault::ReplicaCpu(n) => node.starve_cpu(Some(n)),
                Fault::Healthy | Fault::Busy => Ok(()),
            };
            match injected {
                Ok(()) => *onset.lock().unwrap() = Some(unix_now()),
                Err(e) => eprintln!("{name}: injecting {}: {e:#}", fault.label()),
            }
        });
        rr.run_to_end(disk, &workload(), out, name, None)
    })?;
    let lost = lab.lost(c)?;
    heal(lab, disk, node)?;
    if lost > 0 {
        println!("  {name}: host c dropped {lost} segments (nftables' count)");
    }

    let record: Value = serde_json::from_str(&std::fs::read_to_string(&outcome.record)?)
        .context("the run record")?;
    let point = &record["points"][0];
    let start = point["start_unix_seconds"].as_f64().unwrap_or(0.0);
    let interval = point["run"]["interval_seconds"].as_f64().unwrap_or(1.0);
    let onset = onset.lock().unwrap().context("no onset time")?;
    let onset_row = ((onset - start) / interval).floor().max(0.0) as usize;
    let p99: Vec<Option<f64>> = point["run"]["hosts"][0]["write"]["p99_seconds"]
        .as_array()
        .map(|a| a.iter().map(Value::as_f64).collect())
        .unwrap_or_default();
    let impact = impact(&p99, onset_row);
    let dropped = if !fault.is_fault() {
        None
    } else if outcome.failure.is_some() && impact.is_none() {
        Some("the run failed before its p99 could be compared".into())
    } else {
        match impact {
            Some(x) if x >= 2.0 => None,
            Some(x) => Some(format!("p99 moved {x:.1}x, under 2x")),
            None => Some("no p99 before or after the onset".into()),
        }
    };
    let v = &outcome.analysis["verdict"];
    let cause = v["cause"].as_str().unwrap_or("").to_string();
    let location = v["location"].as_str().unwrap_or("").to_string();
    let culprit = match fault {
        Fault::Congestion(_) | Fault::Loss(_) | Fault::Mtu(_) => {
            location.contains(&format!("replica {c_addr}"))
        }
        Fault::SlowDevice(_) | Fault::Saturation(_) => location.contains(disk.name()),
        Fault::ReplicaDisk(_) => location.contains(&format!("{} on {}", node.disk.name(), c.name)),
        Fault::ReplicaCpu(_) => location.starts_with(&format!("CPU of {}", c.name)),
        _ => true,
    };
    // From the record: a run that failed (a replica that never answered) has no report.
    let to_correct = record["result"]["points"][0]["timeline"]
        .as_array()
        .and_then(|rows| {
            rows.iter()
                .enumerate()
                .skip(onset_row)
                .find(|(_, r)| r["verdict"]["cause"] == fault.truth())
                .map(|(k, _)| k - onset_row)
        });
    Ok(Case {
        fault,
        second: second_cause(&outcome.analysis, &cause),
        cause,
        location,
        culprit,
        impact,
        dropped,
        to_correct,
    })
}

/// Takes every fault the bench injects away: c's port deep and at the hosts' MTU, no loss
/// at c, the disk and the device behind it unthrottled, c's disk and CPU unlimited.
fn heal(lab: &Lab, disk: &Disk, node: &Node) -> Result<()> {
    node.slow_disk(None)?;
    node.starve_cpu(None)?;
    let c = lab.host("c");
    lab.reshape(c, &Shaping::deep())?;
    lab.set_port_mtu(c, MTU)?;
    lab.lose(c, 0)?;
    disk.throttle_now(Throttle::WriteIops(UNLIMITED))?;
    disk.throttle_behind_now(Throttle::WriteIops(UNLIMITED))
}

/// Median write p99 from two intervals after the onset to the end, over the median
/// before it (the first interval left out: connections still warming).
fn impact(p99: &[Option<f64>], onset_row: usize) -> Option<f64> {
    let take = |from: usize, to: usize| -> Vec<f64> {
        p99.get(from..to.min(p99.len()))
            .unwrap_or_default()
            .iter()
            .flatten()
            .copied()
            .collect()
    };
    let before = take(1, onset_row);
    let after = take(onset_row + 2, p99.len());
    if before.is_empty() || after.is_empty() {
        return None;
    }
    Some(median(&after) / median(&before))
}

/// The best-scoring candidate of another cause than `first`, in the verdict's host and
/// direction.
fn second_cause(analysis: &Value, first: &str) -> Option<String> {
    let v = &analysis["verdict"];
    let host = analysis["hosts"]
        .as_array()?
        .iter()
        .find(|h| h["name"] == v["host"])?;
    let dir = host["directions"]
        .as_array()?
        .iter()
        .find(|d| d["direction"] == v["direction"])?;
    let mut c: Vec<(&str, f64)> = dir["candidates"]
        .as_array()?
        .iter()
        .filter_map(|c| Some((c["cause"].as_str()?, c["score"].as_f64()?)))
        .filter(|(cause, score)| *cause != first && *score > 0.0)
        .collect();
    c.sort_by(|a, b| b.1.total_cmp(&a.1));
    c.first().map(|(cause, _)| cause.to_string())
}

fn print_case(c: &Case, rep: usize) {
    let impact = c.impact.map_or("-".into(), |x| format!("{x:.1}x"));
    let counted = match &c.dropped {
        None => "counted".to_string(),
        Some(why) => format!("dropped: {why}"),
    };
    let when = c
        .to_correct
        .map_or("-".into(), |k| format!("{k} intervals"));
    println!(
        "  {:<34} rep {rep}: verdict {} {}| p99 {impact} | {counted} | right live verdict after {when}",
        c.fault.label(),
        c.cause,
        if c.location.is_empty() {
            String::new()
        } else {
            format!("at {} ", c.location)
        },
    );
}

fn summarize(cases: &[Case]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let commit = confusion::commit();
    let _ = writeln!(
        s,
        "\ndiagnosis bench at commit {commit}, {} cases",
        cases.len()
    );
    let kept = impact_validation(&mut s, cases);
    let healthy: Vec<&Case> = cases.iter().filter(|c| !c.fault.is_fault()).collect();
    let judged: Vec<&Case> = healthy.iter().chain(kept.iter()).copied().collect();
    confusion_matrix(&mut s, &judged);
    accuracy(&mut s, &healthy, &kept);
    s
}

/// The fault cases whose fault moved the write p99 enough to judge them, said with those
/// dropped and why.
fn impact_validation<'a>(s: &mut String, cases: &'a [Case]) -> Vec<&'a Case> {
    use std::fmt::Write;
    let faults: Vec<&Case> = cases.iter().filter(|c| c.fault.is_fault()).collect();
    let kept: Vec<&Case> = faults
        .iter()
        .copied()
        .filter(|c| c.dropped.is_none())
        .collect();
    let _ = writeln!(
        s,
        "impact validation: {} of {} fault cases moved the write p99 at least 2x",
        kept.len(),
        faults.len()
    );
    for c in faults.iter().filter(|c| c.dropped.is_some()) {
        let _ = writeln!(
            s,
            "  dropped: {} ({})",
            c.fault.label(),
            c.dropped.as_deref().unwrap_or("")
        );
    }
    kept
}

/// True class against verdict, over the healthy cases and the fault cases kept.
fn confusion_matrix(s: &mut String, judged: &[&Case]) {
    let classes = [
        "healthy",
        "healthy, busy host",
        "congestion",
        "network saturation",
        "slow device",
        "loss",
        "mtu mismatch",
        "device saturation",
        "slow replica device",
        "replica cpu",
    ];
    let verdicts = [
        "none",
        "network_congestion",
        "network_saturation",
        "packet_loss",
        "mtu_mismatch",
        "device_saturation",
        "slow_device",
        "cpu",
    ];
    let pairs: Vec<(&str, &str)> = judged
        .iter()
        .map(|c| (c.fault.class(), c.cause.as_str()))
        .collect();
    confusion::matrix(s, &classes, &verdicts, &pairs);
}

/// Top-1 and top-2 accuracy, false positives, culprits named and time to a right verdict.
fn accuracy(s: &mut String, healthy: &[&Case], kept: &[&Case]) {
    use std::fmt::Write;
    let ratio = confusion::ratio;
    let right: Vec<&Case> = kept
        .iter()
        .copied()
        .filter(|c| c.cause == c.fault.truth())
        .collect();
    let top2 = kept
        .iter()
        .filter(|c| c.cause == c.fault.truth() || c.second.as_deref() == Some(c.fault.truth()))
        .count();
    let _ = writeln!(
        s,
        "\ntop-1 accuracy (fault cases kept): {}",
        ratio(right.len(), kept.len())
    );
    let _ = writeln!(
        s,
        "top-2 accuracy (fault cases kept): {}",
        ratio(top2, kept.len())
    );
    for (label, f) in [
        ("healthy", Fault::Healthy),
        ("healthy, busy host", Fault::Busy),
    ] {
        let runs: Vec<&&Case> = healthy.iter().filter(|c| c.fault == f).collect();
        let wrong = runs
            .iter()
            .filter(|c| !c.fault.acceptable(&c.cause))
            .count();
        let _ = writeln!(s, "false positives, {label}: {}", ratio(wrong, runs.len()));
    }
    let named = right.iter().filter(|c| c.culprit).count();
    let _ = writeln!(
        s,
        "culprit named right in correct verdicts: {}",
        ratio(named, right.len())
    );
    let times: Vec<f64> = right
        .iter()
        .filter_map(|c| c.to_correct.map(|k| k as f64))
        .collect();
    if !times.is_empty() {
        let max = times.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "onset to the first right live verdict: median {} intervals, at most {max} ({} of {} correct cases had one)",
            median(&times),
            times.len(),
            right.len()
        );
    }
}
