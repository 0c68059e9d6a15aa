//! `cargo xtask bench multi-host`: what coordinating a cluster run costs. Three hosts in
//! namespaces behind the lab switch, each with `loadgen serve --jobs-listen` over a
//! directory of its own; each round runs, in turn (the order rotates):
//!
//! - `independent`: the reference, three `loadgen run`s of the job, one per host, started
//!   together by this process (what an operator does by hand);
//! - `coordinated`: one `loadgen run --client a --client b --client c` from host a, the
//!   hosts started at one instant by the job service.
//!
//! Both with local writes only and with every write replicated to the other two hosts (the
//! HCI pattern). Printed: total IOPS of each, their ratio (target >= 0.95), and the
//! coordinated run's start skew between hosts (goal < 5 ms) and clock estimates.

use std::net::SocketAddr;
use std::process::Stdio;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use stornet_lab::lab::{Host, HostSpec, Lab, Shaping};
use stornet_lab::replica::{ScratchDir, ServeProcess};

use super::{json_num, median};
use crate::cmd;

const ROUNDS: usize = 5;
const RUNTIME_S: u32 = 5;
const REPLICATION_PORT: u16 = 7480;
const JOBS_PORT: u16 = 7481;

fn job(replicas: &[SocketAddr]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--name=bench",
        "--rw=randwrite",
        "--bs=4k",
        "--size=64M",
        "--iodepth=8",
        "--time_based",
        "--ramp_time=1",
        "--eta=never",
        "--output-format=json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("--runtime={RUNTIME_S}"));
    v.extend(replicas.iter().map(|r| format!("--replica={r}")));
    v
}

fn loadgen(host: &Host) -> Result<std::process::Command> {
    let bin = stornet_lab::bins::path("loadgen");
    let mut c = host.ns.command(bin.to_str().context("binary path")?);
    c.arg("run").stdin(Stdio::null()).stderr(Stdio::inherit());
    Ok(c)
}

/// Three `loadgen run`s at once, one per host, each on its own directory: total IOPS.
fn independent(lab: &Lab, dirs: &ScratchDir, replicated: bool) -> Result<f64> {
    let mut children = Vec::new();
    for h in &lab.hosts {
        let others: Vec<SocketAddr> = lab
            .hosts
            .iter()
            .filter(|o| replicated && o.name != h.name)
            .map(|o| o.socket(REPLICATION_PORT))
            .collect();
        let mut c = loadgen(h)?;
        c.args(job(&others))
            .arg(format!("--directory={}", dirs.join(&h.name).display()))
            .stdout(Stdio::piped());
        children.push(c.spawn().context("starting loadgen run")?);
    }
    let mut total = 0.0;
    for c in children {
        let out = c.wait_with_output()?;
        ensure!(
            out.status.success(),
            "an independent loadgen run failed ({})",
            out.status
        );
        let j: Value = serde_json::from_slice(&out.stdout).context("loadgen JSON")?;
        total += json_num(&j["jobs"][0]["write"], &["iops"]);
    }
    Ok(total)
}

/// One coordinated run from host a: total IOPS ("All clients"), start skew in ms, and each
/// host's clock offset and round trip.
fn coordinated(lab: &Lab, replicated: bool) -> Result<(f64, f64, String)> {
    let mut c = loadgen(&lab.hosts[0])?;
    for h in &lab.hosts {
        c.arg(format!("--client={}={}", h.name, h.socket(JOBS_PORT)));
    }
    let all: Vec<SocketAddr> = lab
        .hosts
        .iter()
        .filter(|_| replicated)
        .map(|h| h.socket(REPLICATION_PORT))
        .collect();
    c.args(job(&all)).stdout(Stdio::piped());
    let out = c.output().context("running the controller")?;
    ensure!(
        out.status.success(),
        "the coordinated run failed ({})",
        out.status
    );
    let j: Value = serde_json::from_slice(&out.stdout).context("the controller's JSON")?;
    let stats = j["client_stats"].as_array().context("client_stats")?;
    let all = stats
        .iter()
        .find(|e| e["jobname"] == "All clients")
        .context("no All clients entry")?;
    let skew = j["loadgen"]["start_skew_ms"][0]
        .as_f64()
        .unwrap_or(f64::NAN);
    let clocks = j["loadgen"]["hosts"]
        .as_array()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    format!(
                        "{} {:+.3}/{:.3} ms",
                        h["name"].as_str().unwrap_or("?"),
                        h["clock_offset_ms"].as_f64().unwrap_or(f64::NAN),
                        h["rtt_ms"].as_f64().unwrap_or(f64::NAN)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Ok((json_num(&all["write"], &["iops"]), skew, clocks))
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("benchmark multi-host needs root (network namespaces)");
    }
    cmd::step("build loadgen", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "loadgen"]))
    })?;
    let specs: Vec<HostSpec> = ["a", "b", "c"]
        .iter()
        .map(|n| HostSpec::new(n).shaped(Shaping::deep()))
        .collect();
    let lab = Lab::new("bench-mh", &specs)?;
    let dirs = ScratchDir::new("bench-mh")?;
    let mut servers = Vec::new();
    for h in &lab.hosts {
        let dir = dirs.join(&h.name);
        std::fs::create_dir_all(&dir)?;
        let jobs = h.socket(JOBS_PORT).to_string();
        servers.push(ServeProcess::start(
            &h.ns,
            h.socket(REPLICATION_PORT),
            &dir,
            &["--jobs-listen", &jobs],
        )?);
    }
    for h in &lab.hosts {
        lab.wait_connected(h)?;
    }
    println!(
        "3 hosts behind the lab switch (deep ports), {} CPUs shared, kernel {}; {ROUNDS} rounds of {RUNTIME_S} s + 1 s ramp, order rotating",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cmd::output("uname", &["-r"]).unwrap_or_default().trim(),
    );
    println!(
        "job per host: 4 KiB random writes, QD8, one job, on a 64 MiB file in its own directory"
    );
    // The files laid out once, so no measured run pays for allocating blocks.
    cmd::step("lay out the files", || {
        independent(&lab, &dirs, false).map(drop)
    })?;
    for replicated in [false, true] {
        let label = if replicated {
            "every write also to the two other hosts"
        } else {
            "local writes"
        };
        let (mut ind, mut co, mut skews) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            for k in 0..2 {
                if (round + k) % 2 == 0 {
                    let t = independent(&lab, &dirs, replicated)?;
                    println!("  {label}, round {}: independent {t:>8.0} IOPS", round + 1);
                    ind.push(t);
                } else {
                    let (t, skew, clocks) = coordinated(&lab, replicated)?;
                    println!(
                        "  {label}, round {}: coordinated {t:>8.0} IOPS, start skew {skew:.3} ms (clock offset/round trip: {clocks})",
                        round + 1
                    );
                    co.push(t);
                    skews.push(skew);
                }
            }
        }
        let (i, c) = (median(&ind), median(&co));
        println!(
            "\n{label}: median of {ROUNDS} rounds: independent {i:.0} IOPS, coordinated {c:.0} IOPS, ratio {:.3} (target >= 0.95); start skew median {:.3} ms, max {:.3} ms (goal < 5 ms)\n",
            c / i,
            median(&skews),
            skews.iter().copied().fold(0.0, f64::max)
        );
    }
    drop(servers);
    Ok(())
}
