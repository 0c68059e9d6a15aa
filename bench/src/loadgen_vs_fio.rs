//! `cargo xtask bench loadgen-vs-fio`: the same jobs on the same target (a loop device on a
//! file in /dev/shm), alternating fio and loadgen with the same command line: random and
//! sequential IO on io_uring (registered files and buffers), the etcd check's shape (sync
//! engine, fdatasync after every write) and a mixed `--bssplit` job. Prints medians over the
//! rounds and loadgen/fio ratios.
//!
//! CPU per IO is measured the same way for both: user+sys of the child and everything it
//! waited for (getrusage RUSAGE_CHILDREN, which includes io_uring's worker threads), divided
//! by the requests the device completed (/sys/block/*/stat). The user part of it (the tool's
//! own code, without the kernel's submission and completion path) is printed beside it.

use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use stornet_lab::blockdev::LoopDevice;

use super::median;
use crate::cmd;

const ROUNDS: usize = 5;
const RUNTIME_S: u32 = 5;

struct Case {
    name: &'static str,
    /// The engine's options, the same for both tools.
    engine: &'static [&'static str],
    args: &'static [&'static str],
}

/// fio's io_uring with registered files and buffers, the way loadgen always runs.
const URING: &[&str] = &["--ioengine=io_uring", "--registerfiles", "--fixedbufs"];

const CASES: &[Case] = &[
    Case {
        name: "4k randread QD32",
        engine: URING,
        args: &["--rw=randread", "--bs=4k", "--iodepth=32"],
    },
    Case {
        name: "4k randwrite QD32",
        engine: URING,
        args: &["--rw=randwrite", "--bs=4k", "--iodepth=32"],
    },
    Case {
        name: "128k read QD8",
        engine: URING,
        args: &["--rw=read", "--bs=128k", "--iodepth=8"],
    },
    // The etcd disk check's shape: one write at a time, each followed by fdatasync.
    Case {
        name: "sync+fdatasync",
        engine: &["--ioengine=sync"],
        args: &["--rw=write", "--bs=4k", "--fdatasync=1"],
    },
    // Without a random map: fio's map clips IOs to the blocks not yet touched, which skews
    // the sizes away from the shares asked (loadgen has no map).
    Case {
        name: "bssplit randrw QD16",
        engine: URING,
        args: &[
            "--rw=randrw",
            "--bssplit=4k/50:16k/30:64k/20",
            "--norandommap",
            "--iodepth=16",
        ],
    },
];

#[derive(Default, Clone, Copy)]
struct Sample {
    iops: f64,
    cpu_per_io_us: f64,
    user_per_io_us: f64,
    p50_us: f64,
    p99_us: f64,
    system_pct: f64,
}

/// User and system CPU seconds of the children so far.
fn children_cpu_s() -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn run_one(tool: &str, disk: &LoopDevice, case: &Case) -> Result<Sample> {
    let loadgen = cmd::workspace_root().join("target/release/loadgen");
    let mut c = if tool == "fio" {
        Command::new("fio")
    } else {
        let mut c = Command::new(&loadgen);
        c.arg("run");
        c
    };
    c.args([
        "--name=bench",
        &format!("--filename={}", disk.dev.display()),
        "--direct=1",
        "--numjobs=1",
        "--time_based",
        &format!("--runtime={RUNTIME_S}"),
        "--ramp_time=1",
        "--group_reporting",
        "--output-format=json",
    ])
    .args(case.engine)
    .args(case.args)
    .stdin(Stdio::null())
    .stderr(Stdio::inherit());
    if tool == "loadgen" {
        // The scratch device may hold anything fio wrote; it is ours to overwrite.
        c.arg("--force-destroy-data");
    }
    let before = disk.stat()?;
    let (busy0, total0) = stornet_lab::host_cpu::ticks();
    let cpu0 = children_cpu_s();
    let out = c.output().with_context(|| format!("running {tool}"))?;
    let cpu1 = children_cpu_s();
    let (user, cpu) = (cpu1.0 - cpu0.0, cpu1.0 + cpu1.1 - cpu0.0 - cpu0.1);
    let (busy1, total1) = stornet_lab::host_cpu::ticks();
    let after = disk.stat()?;
    if !out.status.success() {
        bail!("{tool} failed ({})", out.status);
    }
    let j: Value =
        serde_json::from_slice(&out.stdout).with_context(|| format!("{tool} printed no JSON"))?;
    let job = &j["jobs"][0];
    // IOPS of both directions; latency of the one with more IOs.
    let ios = |d: &str| super::json_num(job, &[d, "total_ios"]);
    let dir = if ios("write") > ios("read") {
        "write"
    } else {
        "read"
    };
    // Requests the device completed, flushes included (fdatasync), for CPU per IO.
    let requests = (after.read_ios - before.read_ios)
        + (after.write_ios - before.write_ios)
        + (after.flush_ios - before.flush_ios);
    Ok(Sample {
        iops: super::json_num(job, &["read", "iops"]) + super::json_num(job, &["write", "iops"]),
        cpu_per_io_us: cpu * 1e6 / requests.max(1) as f64,
        user_per_io_us: user * 1e6 / requests.max(1) as f64,
        p50_us: super::json_num(job, &[dir, "clat_ns", "percentile", "50.000000"]) / 1e3,
        p99_us: super::json_num(job, &[dir, "clat_ns", "percentile", "99.000000"]) / 1e3,
        system_pct: 100.0 * (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64,
    })
}

fn med(s: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    median(&s.iter().map(f).collect::<Vec<_>>())
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("loadgen-vs-fio needs root (it makes a loop device)");
    }
    if cmd::output("fio", &["--version"]).is_none() {
        bail!("fio is missing (cargo xtask setup installs it)");
    }
    cmd::step("build loadgen", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "loadgen"]))
    })?;
    let disk = LoopDevice::new("bench-loadgen-fio", 1 << 30)?;
    print_conditions(&disk);
    let rows = rounds(&disk)?;
    let ok = report(&rows);
    println!(
        "\n{}",
        if ok {
            "all targets met"
        } else {
            "some targets missed (the machine is shared: compare the system-busy column)"
        }
    );
    Ok(())
}

/// The target and what else runs on the machine, for reading the numbers.
fn print_conditions(disk: &LoopDevice) {
    println!(
        "target: {} (loop, direct IO, 1 GiB file in /dev/shm); {} rounds of {RUNTIME_S} s + 1 s ramp per tool and case, alternating",
        disk.dev.display(),
        ROUNDS
    );
    println!(
        "conditions: {} CPUs, load average {}, kernel {}, {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        cmd::output("uname", &["-r"]).unwrap_or_default().trim(),
        cmd::output("fio", &["--version"])
            .unwrap_or_default()
            .trim()
    );
}

/// Per case: its name, fio's samples and loadgen's.
type Rows = Vec<(&'static str, Vec<Sample>, Vec<Sample>)>;

/// Every case, `ROUNDS` rounds of both tools, alternating which goes first.
fn rounds(disk: &LoopDevice) -> Result<Rows> {
    let mut rows = Vec::new();
    for case in CASES {
        let (mut fio, mut lg) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let order = if round % 2 == 0 {
                ["fio", "loadgen"]
            } else {
                ["loadgen", "fio"]
            };
            for tool in order {
                let s = run_one(tool, disk, case)?;
                println!(
                    "  {:<18} round {} {:<7} {:>9.0} IOPS {:>6.2} us CPU/IO ({:.2} user)  p50 {:>7.1} us  p99 {:>8.1} us  system busy {:>3.0}%",
                    case.name,
                    round + 1,
                    tool,
                    s.iops,
                    s.cpu_per_io_us,
                    s.user_per_io_us,
                    s.p50_us,
                    s.p99_us,
                    s.system_pct
                );
                if tool == "fio" { &mut fio } else { &mut lg }.push(s);
            }
        }
        rows.push((case.name, fio, lg));
    }
    Ok(rows)
}

/// The medians side by side, as ratios, and whether loadgen met its targets in every case.
fn report(rows: &Rows) -> bool {
    println!();
    println!(
        "{:<18} {:>10} {:>10} {:>6} {:>8} {:>8} {:>6} {:>8} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "case (medians)",
        "fio IOPS",
        "lg IOPS",
        "ratio",
        "fio CPU",
        "lg CPU",
        "ratio",
        "fio usr",
        "lg usr",
        "ratio",
        "fio p50",
        "lg p50",
        "fio p99",
        "lg p99",
        "fio best",
        "lg best"
    );
    let mut ok = true;
    for (name, fio, lg) in rows {
        let iops = (med(fio, |s| s.iops), med(lg, |s| s.iops));
        let cpu = (med(fio, |s| s.cpu_per_io_us), med(lg, |s| s.cpu_per_io_us));
        let user = (
            med(fio, |s| s.user_per_io_us),
            med(lg, |s| s.user_per_io_us),
        );
        let p50 = (med(fio, |s| s.p50_us), med(lg, |s| s.p50_us));
        let p99 = (med(fio, |s| s.p99_us), med(lg, |s| s.p99_us));
        // Best round: the least disturbed by other load on a shared machine.
        let best = |v: &[Sample]| v.iter().map(|s| s.iops).fold(0.0, f64::max);
        println!(
            "{:<18} {:>10.0} {:>10.0} {:>6.2} {:>6.2}us {:>6.2}us {:>6.2} {:>6.2}us {:>6.2}us {:>6.2} {:>7.1}us {:>7.1}us {:>7.1}us {:>7.1}us {:>10.0} {:>10.0}",
            name,
            iops.0,
            iops.1,
            iops.1 / iops.0,
            cpu.0,
            cpu.1,
            cpu.1 / cpu.0,
            user.0,
            user.1,
            user.1 / user.0,
            p50.0,
            p50.1,
            p99.0,
            p99.1,
            best(fio),
            best(lg)
        );
        // At the same depth, more IOPS means a shorter wait (Little's law): only a p50 above
        // fio's counts against loadgen.
        let p50_over = (p50.1 - p50.0) / p50.0;
        let met = iops.1 / iops.0 >= 1.0 && cpu.1 <= 0.8 * cpu.0 && p50_over <= 0.10;
        ok &= met;
        println!(
            "{:<18} targets: IOPS ratio >= 1.0 {}, CPU/IO <= 0.8x fio {}, p50 at most 10% above {} ({:+.0}%)",
            "",
            yes(iops.1 / iops.0 >= 1.0),
            yes(cpu.1 <= 0.8 * cpu.0),
            yes(p50_over <= 0.10),
            100.0 * (p50.1 - p50.0) / p50.0
        );
    }
    ok
}

fn yes(b: bool) -> &'static str {
    if b { "met" } else { "MISSED" }
}
