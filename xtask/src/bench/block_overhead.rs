//! `cargo xtask bench block-overhead`: what block tracing costs the IO it watches.
//!
//! fio (io_uring, 4 KiB random reads, iodepth 32, 2 jobs, time based) runs on a loop device
//! over a file in /dev/shm, alternating three modes in rotated order each round: no tracing,
//! stornet-agent running, and a bpftrace biolatency over `block_rq_issue`/`block_rq_complete`
//! keyed by device and sector (what most tracers do). It prints each round's IOPS and the
//! median ratio of each mode against no tracing, then, in a separate run with BPF program
//! statistics on (they cost time themselves), the agent's run time per event and its RSS.
//!
//! `STORNET_BENCH_ROUNDS` (default 5, at least 3; 0 runs only the statistics pass) and
//! `STORNET_BENCH_SECONDS` (default 10) change the length.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use stornet_tests::metrics::http_get;

use super::median;
use crate::cmd;

const BIOLATENCY: &str = "tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; } \
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ { \
@usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000); \
delete(@start[args->dev, args->sector]); }";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    None,
    Agent,
    AgentNoStats,
    Bpftrace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "no tracing",
            Mode::Agent => "stornet-agent",
            Mode::AgentNoStats => "agent, no BPF stats",
            Mode::Bpftrace => "bpftrace biolatency",
        }
    }
}

fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

/// A loop device over a sparse file in /dev/shm, detached and deleted on drop.
struct Loop {
    dev: String,
    backing: PathBuf,
}

impl Loop {
    fn new() -> Result<Loop> {
        let backing = PathBuf::from(format!("/dev/shm/stornet-bench-{}.img", std::process::id()));
        std::fs::File::create(&backing)?.set_len(1 << 30)?;
        let out = cmd::output(
            "losetup",
            &["--show", "-f", "--direct-io=on", path(&backing)],
        );
        let Some(dev) = out.map(|s| s.trim().to_string()) else {
            let _ = std::fs::remove_file(&backing);
            bail!("losetup failed on {}", backing.display());
        };
        let name = dev.trim_start_matches("/dev/");
        std::fs::write(format!("/sys/block/{name}/queue/scheduler"), "none")
            .with_context(|| format!("setting the scheduler of {dev}"))?;
        Ok(Loop { dev, backing })
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.backing);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// fio's read IOPS over `seconds` on `dev`.
fn fio(dev: &str, seconds: u64) -> Result<f64> {
    let out = Command::new("fio")
        .args([
            "--name=blockbench",
            "--ioengine=io_uring",
            "--rw=randread",
            "--bs=4k",
        ])
        .args(["--iodepth=32", "--numjobs=2", "--direct=1", "--time_based"])
        .args(["--group_reporting", "--output-format=json"])
        .arg(format!("--filename={dev}"))
        .arg(format!("--runtime={seconds}"))
        .stderr(Stdio::null())
        .output()
        .context("running fio")?;
    ensure!(out.status.success(), "fio failed ({})", out.status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("fio's JSON")?;
    v["jobs"][0]["read"]["iops"]
        .as_f64()
        .context("no jobs[0].read.iops in fio's JSON")
}

/// A child process stopped (by signal, then killed) and reaped on drop.
struct Running {
    child: Child,
    signal: i32,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, self.signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Agent {
    run: Running,
    addr: SocketAddr,
}

impl Agent {
    /// The agent with its default configuration, BPF run-time statistics on or off.
    fn start(run_statistics: bool) -> Result<Agent> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let bin = cmd::workspace_root().join("target/release/stornet-agent");
        let config = std::env::temp_dir().join(format!(
            "stornet-bench-agent-{}-{run_statistics}.toml",
            std::process::id()
        ));
        std::fs::write(
            &config,
            format!("[probes]\nrun_statistics = {run_statistics}\n"),
        )?;
        let child = Command::new(bin)
            .arg(format!("--web.listen-address={addr}"))
            .arg(format!("--config.file={}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting stornet-agent")?;
        let mut agent = Agent {
            run: Running {
                child,
                signal: libc::SIGTERM,
            },
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(http_get(addr, "/-/healthy"), Ok((200, _))) {
            if let Some(status) = agent.run.child.try_wait()? {
                bail!("stornet-agent exited during start-up: {status}");
            }
            ensure!(Instant::now() < deadline, "stornet-agent did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let (_, metrics) = http_get(addr, "/metrics")?;
        for probe in ["block_issue", "block_completion", "block_requeue"] {
            ensure!(
                metrics.contains(&format!("stornet_probe_up{{probe=\"{probe}\"}} 1")),
                "probe {probe} is not up"
            );
        }
        // In-flight tracking starts 50 ms after the probes attach.
        std::thread::sleep(Duration::from_millis(100));
        Ok(agent)
    }

    fn pid(&self) -> u32 {
        self.run.child.id()
    }

    /// Reads the agent counted on `device` (`stornet_block_io_size_bytes_count`).
    fn reads(&self, device: &str) -> Result<f64> {
        let (_, metrics) = http_get(self.addr, "/metrics")?;
        let want = format!("stornet_block_io_size_bytes_count{{device=\"{device}\",op=\"read\"}} ");
        Ok(metrics
            .lines()
            .find_map(|l| l.strip_prefix(&want))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0))
    }
}

fn bpftrace() -> Result<Running> {
    // bpftrace needs a higher RLIMIT_MEMLOCK than the default to load its maps.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -l 8192; exec bpftrace -e '{BIOLATENCY}'"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting bpftrace")?;
    let mut out = BufReader::new(child.stdout.take().context("bpftrace stdout")?);
    let run = Running {
        child,
        signal: libc::SIGINT,
    };
    let mut line = String::new();
    while !line.starts_with("Attaching") {
        line.clear();
        ensure!(
            out.read_line(&mut line)? > 0,
            "bpftrace exited before attaching"
        );
    }
    // Keep draining: it prints its histogram when stopped.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    // It says "Attaching" before it loads: wait for both programs.
    let deadline = Instant::now() + Duration::from_secs(20);
    while program_ids(run.child.id())?.len() < 2 {
        ensure!(
            Instant::now() < deadline,
            "bpftrace did not attach its programs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(run)
}

/// One measurement: starts the mode's tracer, runs fio, stops the tracer.
fn measure(mode: Mode, disk: &Loop, seconds: u64) -> Result<f64> {
    let _tracer: Option<Box<dyn std::any::Any>> = match mode {
        Mode::None => None,
        Mode::Agent => Some(Box::new(Agent::start(true)?)),
        Mode::AgentNoStats => Some(Box::new(Agent::start(false)?)),
        Mode::Bpftrace => Some(Box::new(bpftrace()?)),
    };
    fio(&disk.dev, seconds)
}

/// `VmRSS` and `VmHWM` of a process, in bytes.
fn rss(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        Ok(kb * 1024)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// Ids of the BPF programs a process holds (from its fds' fdinfo).
fn program_ids(pid: u32) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let text = std::fs::read_to_string(fd?.path()).unwrap_or_default();
        if let Some(id) = text.lines().find_map(|l| l.strip_prefix("prog_id:")) {
            ids.push(id.trim().parse()?);
        }
    }
    Ok(ids)
}

/// Run count and run time of the given programs, by id, with their names.
fn program_stats(ids: &[u32]) -> Result<BTreeMap<u32, (String, u64, Duration)>> {
    let mut out = BTreeMap::new();
    for info in aya::programs::loaded_programs() {
        let info = info?;
        if ids.contains(&info.id()) {
            let name = info.name_as_str().unwrap_or("?").to_string();
            out.insert(info.id(), (name, info.run_count(), info.run_time()));
        }
    }
    Ok(out)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Run time per program run and per IO of the BPF programs `pid` holds, over one fio run
/// with BPF run-time statistics on. Returns the IOPS fio reached.
fn program_costs(
    who: &str,
    ids: &[u32],
    disk: &Loop,
    seconds: u64,
    reads: &dyn Fn() -> Result<f64>,
) -> Result<()> {
    ensure!(!ids.is_empty(), "found no BPF programs of {who}");
    let stats_fd = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("enabling BPF run-time statistics")?;
    let before = program_stats(ids)?;
    let reads_before = reads()?;
    let iops = fio(&disk.dev, seconds)?;
    let after = program_stats(ids)?;
    drop(stats_fd);
    let ios = iops * seconds as f64;
    let counted = reads()? - reads_before;
    println!("\n{who} with BPF statistics on ({seconds} s, {iops:.0} IOPS):");
    // Per IO each program runs once (dispatch, completion), so the sum of the times per run
    // is the cost per IO, whatever other devices on the machine add to the run counts.
    let mut per_io = 0.0;
    let mut total = Duration::ZERO;
    for (id, (name, runs, time)) in &after {
        let (_, runs0, time0) = before.get(id).cloned().unwrap_or_default();
        let (runs, time) = (runs - runs0, *time - time0);
        total += time;
        let per = if runs > 0 {
            time.as_nanos() as f64 / runs as f64
        } else {
            0.0
        };
        if runs as f64 > ios / 2.0 {
            per_io += per;
        }
        println!("  {name:<20} {runs:>10} runs  {per:>7.0} ns per run");
    }
    println!(
        "  per IO {per_io:.0} ns; all runs {:.2}% of {} CPUs",
        100.0 * total.as_secs_f64() / (seconds as f64 * num_cpus() as f64),
        num_cpus()
    );
    if counted > 0.0 {
        println!(
            "  the agent counted {counted:.0} reads on {}, fio did about {ios:.0}",
            disk.name()
        );
    }
    Ok(())
}

/// The agent and bpftrace once more each, with BPF run-time statistics on (they cost time
/// themselves, so not during the IOPS rounds): time per run, and the agent's RSS.
fn costs(disk: &Loop, seconds: u64) -> Result<()> {
    let agent = Agent::start(true)?;
    let ids = program_ids(agent.pid())?;
    program_costs("stornet-agent", &ids, disk, seconds, &|| {
        agent.reads(disk.name())
    })?;
    let (rss, hwm) = rss(agent.pid())?;
    println!(
        "  agent RSS {:.1} MiB (peak {:.1} MiB)",
        rss as f64 / 1048576.0,
        hwm as f64 / 1048576.0
    );
    drop(agent);
    let tracer = bpftrace()?;
    let ids = program_ids(tracer.child.id())?;
    program_costs("bpftrace biolatency", &ids, disk, seconds, &|| Ok(0.0))
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn run() -> Result<()> {
    ensure!(
        cmd::is_root(),
        "block-overhead needs root (BPF, loop devices)"
    );
    for tool in ["fio", "bpftrace", "losetup"] {
        ensure!(
            cmd::output("sh", &["-c", &format!("command -v {tool}")]).is_some(),
            "{tool} is missing (cargo xtask setup installs it)"
        );
    }
    let rounds = match env_u64("STORNET_BENCH_ROUNDS", 5)? {
        0 => 0,
        n => n.max(3),
    };
    let seconds = env_u64("STORNET_BENCH_SECONDS", 10)?.max(2);
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let disk = Loop::new()?;
    println!(
        "fio io_uring 4k randread iodepth 32 x 2 jobs on {} (1 GiB in /dev/shm, scheduler none), \
         {rounds} rounds of {seconds} s per mode, {} CPUs, load average {}",
        disk.dev,
        num_cpus(),
        loadavg()
    );
    fio(&disk.dev, 2)?; // warm-up
    let modes = [Mode::None, Mode::Agent, Mode::AgentNoStats, Mode::Bpftrace];
    let mut iops: BTreeMap<Mode, Vec<f64>> = BTreeMap::new();
    for round in 0..rounds as usize {
        let mut line = format!("round {}:", round + 1);
        for i in 0..modes.len() {
            let mode = modes[(round + i) % modes.len()];
            let v = measure(mode, &disk, seconds)?;
            iops.entry(mode).or_default().push(v);
            line.push_str(&format!("  {} {v:.0}", mode.name()));
        }
        println!("{line}");
    }
    if rounds == 0 {
        return costs(&disk, seconds);
    }
    let base = &iops[&Mode::None];
    println!("\nmedian IOPS, and the median of each round's ratio to no tracing:");
    for mode in modes {
        let v = &iops[&mode];
        let ratios: Vec<f64> = v.iter().zip(base).map(|(a, b)| a / b).collect();
        println!(
            "  {:<20} {:>9.0} IOPS  ratio {:.3}  (rounds {})",
            mode.name(),
            median(v),
            median(&ratios),
            ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    costs(&disk, seconds)?;
    println!("\nload average at the end: {}", loadavg());
    Ok(())
}
