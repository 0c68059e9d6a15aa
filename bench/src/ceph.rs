//! `cargo xtask bench ceph`: the cost of stornet-agent beside a real Ceph cluster. One lab
//! cluster (3 OSD hosts), `rados bench` writes of 4 KiB and 64 KiB, 16 in flight, from the
//! client host; each round runs without, with, without the agents (one per OSD host, every
//! collector, scraped every 2 s as Prometheus would) and compares the run with them to the
//! mean of the two around it, which cancels slow drifts of a shared machine. Besides IOPS,
//! the whole machine's CPU per write (/proc/stat), since Ceph on a small machine is bound by
//! CPU before anything else. The median of the rounds' ratios is the result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use stornet_lab::ceph::{CephLab, CephSpec, RadosBench};
use stornet_lab::host_cpu;

use super::median;
use crate::cmd;

const ROUNDS: usize = 5;
const SECONDS: u32 = 10;
const BLOCKS: [u32; 2] = [4 << 10, 64 << 10];

/// One bench: IOPS and the machine's CPU milliseconds per write.
struct Run {
    iops: f64,
    cpu_ms_per_write: f64,
}

fn bench(c: &CephLab, block: u32, scrape: bool) -> Result<Run> {
    let done = AtomicBool::new(false);
    let (r, busy) = std::thread::scope(|s| {
        if scrape {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    for o in &c.osds {
                        if let Some(a) = &o.agent {
                            let _ = a.scrape();
                        }
                    }
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
        }
        let (b0, _) = host_cpu::ticks();
        let r = c.rados_bench(&RadosBench::writes(SECONDS).block(block));
        let (b1, _) = host_cpu::ticks();
        done.store(true, Ordering::Relaxed);
        (r, b1 - b0)
    });
    let r = r?;
    c.cleanup_bench()?;
    // Clock ticks are 1/100 s (USER_HZ).
    Ok(Run {
        iops: r.iops,
        cpu_ms_per_write: busy as f64 * 10.0 / r.writes.max(1) as f64,
    })
}

fn agents(c: &mut CephLab, on: bool) -> Result<()> {
    for i in 0..c.osds.len() {
        if on {
            let name = c.osds[i].host.clone();
            c.osds[i].start_agent(c.lab.host(&name))?;
        } else {
            c.osds[i].agent = None;
        }
    }
    Ok(())
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("the Ceph bench needs root (namespaces, loop devices, cgroups, eBPF)");
    }
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let mut c = cmd::step("bring up the Ceph lab", || {
        CephLab::new("bench", CephSpec::bare())
    })?;
    println!(
        "rados bench writes, 16 in flight, {SECONDS} s per run, {ROUNDS} rounds of without/with/without the agents on {} OSD hosts",
        c.osds.len()
    );
    println!(
        "block   round  without (IOPS)  with agents  without  ratio  CPU ms/write without  with  ratio"
    );
    let mut summary = Vec::new();
    for block in BLOCKS {
        // A fresh cluster's first writes of a size are faster than the rest (empty
        // allocator, no placement groups to catch up): one unmeasured run first.
        bench(&c, block, false)?;
        let (mut iops, mut cpu) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let before = bench(&c, block, false)?;
            agents(&mut c, true)?;
            let with = bench(&c, block, true);
            agents(&mut c, false)?;
            let with = with?;
            let after = bench(&c, block, false)?;
            let iops_ratio = with.iops / ((before.iops + after.iops) / 2.0);
            let base_cpu = (before.cpu_ms_per_write + after.cpu_ms_per_write) / 2.0;
            let cpu_ratio = with.cpu_ms_per_write / base_cpu;
            iops.push(iops_ratio);
            cpu.push(cpu_ratio);
            println!(
                "{:>3} KiB {:>5}  {:>14.0}  {:>11.0}  {:>7.0}  {iops_ratio:>5.3}  {base_cpu:>19.3}  {:>4.3}  {cpu_ratio:>5.3}",
                block >> 10,
                round + 1,
                before.iops,
                with.iops,
                after.iops,
                with.cpu_ms_per_write
            );
        }
        summary.push((block, median(&iops), median(&cpu)));
    }
    println!();
    for (block, iops, cpu) in summary {
        println!(
            "{:>3} KiB writes: IOPS with the agents / without = {iops:.3} (median of {ROUNDS}), CPU per write with / without = {cpu:.3}",
            block >> 10
        );
    }
    Ok(())
}
