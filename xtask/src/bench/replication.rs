//! `cargo xtask bench replication`: the replica target alone. 4 KiB sequential writes at 16
//! outstanding, over an unshaped veth between two namespaces, against the same writes by
//! fio straight to the file system the replica writes to (the device is the reference: a
//! replica cannot acknowledge faster than it writes). Each round runs, in turn:
//!
//! - `fio`: io_uring, O_DIRECT, QD16, on a file in the replica's directory;
//! - `replica`: `loadgen serve` acknowledging after its O_DIRECT write completes;
//! - `replica-ack-on-receive`: the same server acknowledging on receipt (network and
//!   protocol only).
//!
//! The client is `loadgen replica-client` (one connection, blocking socket, round trip timed
//! from the send of a write to its ack). Everything runs twice: on a disk file system
//! (`/tmp`) and on tmpfs (`/dev/shm`), where the device no longer limits the replica.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stornet_tests::netns::HostPair;
use stornet_tests::replica::{ScratchDir, ServeProcess};

use super::median;
use crate::cmd;

const ROUNDS: usize = 3;
const COUNT: u64 = 20_000;
const BS: u64 = 4096;
const IODEPTH: u32 = 16;

/// One measurement: IOs per second and latency percentiles in microseconds.
#[derive(Clone, Copy, Default)]
struct Sample {
    iops: f64,
    p50_us: f64,
    p99_us: f64,
}

fn fio(dir: &Path, round: usize) -> Result<Sample> {
    let file = dir.join(format!("fio-{round}"));
    let out = Command::new("fio")
        .args([
            "--name=ref",
            "--ioengine=io_uring",
            "--direct=1",
            "--rw=write",
            &format!("--bs={BS}"),
            &format!("--iodepth={IODEPTH}"),
            &format!("--size={}", COUNT * BS),
            "--lat_percentiles=1",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", file.display()))
        .output()
        .context("running fio")?;
    let _ = std::fs::remove_file(&file);
    ensure!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).context("fio JSON")?;
    let w = &v["jobs"][0]["write"];
    let pct = |p: &str| w["lat_ns"]["percentile"][p].as_f64().unwrap_or(f64::NAN) / 1000.0;
    Ok(Sample {
        iops: w["iops"].as_f64().context("fio iops")?,
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
    })
}

fn replica_client(pair: &HostPair, server: SocketAddr, volume: &str) -> Result<Sample> {
    let bin = stornet_tests::bins::path("loadgen");
    let out = pair
        .a
        .command(bin.to_str().context("binary path")?)
        .args(["replica-client", "--connect", &server.to_string()])
        .args(["--volume", volume, "--count", &COUNT.to_string()])
        .args(["--bs", &BS.to_string(), "--iodepth", &IODEPTH.to_string()])
        .output()
        .context("running loadgen replica-client")?;
    ensure!(
        out.status.success(),
        "replica-client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).context("replica-client JSON")?;
    Ok(Sample {
        iops: v["acks_per_second"].as_f64().context("acks_per_second")?,
        p50_us: v["rtt_us"]["p50"].as_f64().context("p50")?,
        p99_us: v["rtt_us"]["p99"].as_f64().context("p99")?,
    })
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("benchmark replication needs root (network namespaces)");
    }
    if cmd::output("fio", &["--version"]).is_none() {
        bail!("benchmark replication needs fio (cargo xtask setup installs it)");
    }
    cmd::step("build loadgen", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "loadgen"]))
    })?;
    let pair = HostPair::new("bench-repl")?;
    // The same runs on a disk file system and on tmpfs: with the device out of the way, the
    // second shows what the network path and the server cost.
    let disk = ScratchDir::new("bench-repl")?;
    let memory = ScratchDir {
        path: Path::new("/dev/shm").join(disk.path.file_name().context("scratch name")?),
    };
    std::fs::create_dir_all(&memory.path)?;
    for (store, dir, port) in [
        ("disk (/tmp)", &disk, 7480),
        ("tmpfs (/dev/shm)", &memory, 7482),
    ] {
        compare(&pair, store, dir, port)?;
    }
    Ok(())
}

fn compare(pair: &HostPair, store: &str, dir: &ScratchDir, port: u16) -> Result<()> {
    let (after_write, on_receive) = (dir.join("after-write"), dir.join("on-receive"));
    std::fs::create_dir_all(&after_write)?;
    std::fs::create_dir_all(&on_receive)?;
    let a = SocketAddr::new(pair.b_addr().into(), port);
    let b = SocketAddr::new(pair.b_addr().into(), port + 1);
    let _s1 = ServeProcess::start(&pair.b, a, &after_write, &[])?;
    let _s2 = ServeProcess::start(&pair.b, b, &on_receive, &["--ack-on-receive"])?;

    let names = ["fio (local device)", "replica", "replica-ack-on-receive"];
    let mut samples: [Vec<Sample>; 3] = Default::default();
    for round in 0..ROUNDS {
        samples[0].push(fio(&after_write, round)?);
        samples[1].push(replica_client(pair, a, &format!("r{round}"))?);
        let _ = std::fs::remove_file(after_write.join(format!("r{round}")));
        samples[2].push(replica_client(pair, b, &format!("r{round}"))?);
        let _ = std::fs::remove_file(on_receive.join(format!("r{round}")));
        println!("{store}: round {}/{ROUNDS} done", round + 1);
    }
    let med = |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    let reference = (med(&samples[0], |s| s.iops), med(&samples[0], |s| s.p50_us));
    println!(
        "\n{store}: 4 KiB sequential writes, QD{IODEPTH}, {COUNT} per run, median of {ROUNDS} alternating rounds"
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "", "IOPS", "p50 us", "p99 us", "IOPS/fio", "p50/fio"
    );
    for (name, s) in names.iter().zip(&samples) {
        let (iops, p50, p99) = (
            med(s, |x| x.iops),
            med(s, |x| x.p50_us),
            med(s, |x| x.p99_us),
        );
        println!(
            "{name:<26} {iops:>10.0} {p50:>10.0} {p99:>10.0} {:>10.2} {:>10.2}",
            iops / reference.0,
            p50 / reference.1
        );
    }
    println!();
    Ok(())
}
