//! `cargo xtask bench replication`: what replicating every write costs. `loadgen run` with
//! 4 KiB random writes at QD16 in one namespace, `loadgen serve` replicas in another, over
//! an unshaped veth; each round runs, in turn (the order rotates from round to round):
//!
//! - `local only`: the reference, no replica;
//! - `1 replica`: every write also to a replica that acknowledges after its O_DIRECT write;
//! - `1 replica, ack on receive`: the same, the replica acknowledging on receipt (what the
//!   network and the protocol cost without the replica's device);
//! - `2 replicas`: two servers, a write completes when the local device and both have.
//!
//! Printed: IOPS, p50 and p99 of the whole write, the p50 of its local leg and of its
//! slowest replica leg, loadgen's CPU per IO, medians over the rounds and ratios to local
//! only. Everything runs twice: on tmpfs (`/dev/shm`, the device costs almost nothing, so
//! the network path shows) and on the disk file system (`/tmp`), local target and replica
//! files alike.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stornet_lab::netns::HostPair;
use stornet_lab::replica::{ScratchDir, ServeProcess};

use super::median;
use crate::cmd;

const ROUNDS: usize = 3;
const RUNTIME_S: u32 = 5;
const SIZE: &str = "64M";

#[derive(Clone, Copy, Default)]
struct Sample {
    iops: f64,
    p50_us: f64,
    p99_us: f64,
    local_p50_us: f64,
    replica_p50_us: f64,
    cpu_per_io_us: f64,
    system_pct: f64,
}

/// One `loadgen run` in host a, writing `local` and replicating to `replicas`.
fn loadgen(pair: &HostPair, local: &Path, replicas: &[SocketAddr], args: &[&str]) -> Result<Value> {
    let bin = stornet_lab::bins::path("loadgen");
    let mut c = pair.a.command(bin.to_str().context("binary path")?);
    c.args([
        "run",
        "--name=bench",
        "--bs=4k",
        "--size",
        SIZE,
        "--eta=never",
    ])
    .arg(format!("--filename={}", local.display()))
    .args(replicas.iter().map(|r| format!("--replica={r}")))
    .args(args)
    .arg("--output-format=json")
    .stdin(Stdio::null())
    .stderr(Stdio::inherit());
    let out = c.output().context("running loadgen run")?;
    ensure!(out.status.success(), "loadgen run failed ({})", out.status);
    serde_json::from_slice(&out.stdout).context("loadgen JSON")
}

fn measure(pair: &HostPair, local: &Path, replicas: &[SocketAddr]) -> Result<Sample> {
    let (busy0, total0) = stornet_lab::host_cpu::ticks();
    let j = loadgen(
        pair,
        local,
        replicas,
        &[
            "--rw=randwrite",
            "--iodepth=16",
            "--time_based",
            &format!("--runtime={RUNTIME_S}"),
            "--ramp_time=1",
        ],
    )?;
    let (busy1, total1) = stornet_lab::host_cpu::ticks();
    let w = &j["jobs"][0]["write"];
    let p = |path: &[&str]| super::json_num(w, path) / 1e3;
    let legs = w["legs"].as_array().cloned().unwrap_or_default();
    let leg_p50 = |l: &Value| super::json_num(l, &["lat_ns", "percentile", "50.000000"]) / 1e3;
    Ok(Sample {
        iops: super::json_num(w, &["iops"]),
        p50_us: p(&["intended_lat_ns", "percentile", "50.000000"]),
        p99_us: p(&["intended_lat_ns", "percentile", "99.000000"]),
        // Without replicas an IO has one leg, the local one: its completion latency.
        local_p50_us: legs
            .first()
            .map_or(p(&["clat_ns", "percentile", "50.000000"]), leg_p50),
        replica_p50_us: legs.iter().skip(1).map(leg_p50).fold(f64::NAN, f64::max),
        cpu_per_io_us: super::json_num(&j["loadgen"]["points"][0], &["cpu", "per_io_us"]),
        system_pct: 100.0 * (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64,
    })
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("benchmark replication needs root (network namespaces)");
    }
    cmd::step("build loadgen", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "loadgen"]))
    })?;
    let pair = HostPair::new("bench-repl")?;
    let disk = ScratchDir::new("bench-repl")?;
    // Removed on drop like any scratch directory.
    let memory = ScratchDir {
        path: Path::new("/dev/shm").join(disk.path.file_name().context("scratch name")?),
    };
    std::fs::create_dir_all(&memory.path)?;
    println!(
        "link: veth between two namespaces, no shaping; {ROUNDS} rounds of {RUNTIME_S} s + 1 s ramp per setup, order rotating"
    );
    println!(
        "conditions: {} CPUs shared with other work, load average {}, kernel {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg(),
        cmd::output("uname", &["-r"]).unwrap_or_default().trim(),
    );
    for (store, dir, port) in [
        ("tmpfs (/dev/shm)", &memory, 7480),
        ("disk (/tmp)", &disk, 7490),
    ] {
        compare(&pair, store, dir, port)?;
    }
    println!("load average at the end: {}", loadavg());
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn compare(pair: &HostPair, store: &str, dir: &ScratchDir, port: u16) -> Result<()> {
    let server = |name: &str, port: u16, extra: &[&str]| -> Result<ServeProcess> {
        let root = dir.join(name);
        std::fs::create_dir_all(&root)?;
        ServeProcess::start(
            &pair.b,
            SocketAddr::new(pair.b_addr().into(), port),
            &root,
            extra,
        )
    };
    let s1 = server("r1", port, &[])?;
    let s2 = server("r2", port + 1, &[])?;
    let s3 = server("r3", port + 2, &["--ack-on-receive"])?;
    let local = dir.join("local");
    // Write every block of the local file and of each replica's volume once, so that no
    // measured run pays for allocating blocks.
    cmd::step(&format!("{store}: lay out the files"), || {
        loadgen(
            pair,
            &local,
            &[s1.addr, s2.addr, s3.addr],
            &["--rw=write", "--iodepth=16"],
        )
        .map(drop)
    })?;

    let setups: [(&str, Vec<SocketAddr>); 4] = [
        ("local only", vec![]),
        ("1 replica", vec![s1.addr]),
        ("1 replica, ack on receive", vec![s3.addr]),
        ("2 replicas", vec![s1.addr, s2.addr]),
    ];
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); setups.len()];
    for round in 0..ROUNDS {
        for k in 0..setups.len() {
            let i = (round + k) % setups.len();
            let (name, replicas) = &setups[i];
            let s = measure(pair, &local, replicas)?;
            println!(
                "  {store} round {} {name:<26} {:>8.0} IOPS  p50 {:>7.1} us  p99 {:>8.1} us  {:>5.1} us CPU/IO  system busy {:>3.0}%",
                round + 1,
                s.iops,
                s.p50_us,
                s.p99_us,
                s.cpu_per_io_us,
                s.system_pct
            );
            samples[i].push(s);
        }
    }
    let med = |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    let (ref_iops, ref_p50) = (med(&samples[0], |s| s.iops), med(&samples[0], |s| s.p50_us));
    println!(
        "\n{store}: 4 KiB random writes, QD16, one job; median of {ROUNDS} rounds; latency from the IO's start, legs from its submission"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>10} {:>12} {:>8} {:>9} {:>9}",
        "", "IOPS", "p50 us", "p99 us", "local p50", "replica p50", "CPU/IO", "IOPS/ref", "p50/ref"
    );
    for ((name, _), s) in setups.iter().zip(&samples) {
        let iops = med(s, |x| x.iops);
        let p50 = med(s, |x| x.p50_us);
        let replica = med(s, |x| x.replica_p50_us);
        println!(
            "{name:<26} {iops:>9.0} {p50:>9.1} {:>9.1} {:>10.1} {:>12} {:>8.1} {:>9.2} {:>9.2}",
            med(s, |x| x.p99_us),
            med(s, |x| x.local_p50_us),
            if replica.is_nan() {
                "-".to_string()
            } else {
                format!("{replica:.1}")
            },
            med(s, |x| x.cpu_per_io_us),
            iops / ref_iops,
            p50 / ref_p50
        );
    }
    println!();
    Ok(())
}
