//! `cargo xtask bench block-overhead`: what block tracing costs the IO it watches.
//!
//! fio (io_uring, 4 KiB random reads, iodepth 32, 2 jobs, time based) on a loop device over a
//! file in /dev/shm, under six modes alternated in rotated order each round: no tracing; the
//! floor (empty programs on the agent's dispatch and completion hooks, from the agent's own
//! object, so the hook and program type are the agent's); the clock program (the empty
//! program plus one `bpf_ktime_get_ns()` on the completion hook: the cheapest probe that
//! times IO); the agent in its default configuration; the agent with every option on (every
//! block option and per-cgroup counts); bpftrace's biolatency (two classic tracepoints and a
//! start map keyed by device and sector, as most tracers do). Three passes:
//!
//! 1. BPF time per IO: the kernel's run-time statistics, turned on by the bench only for
//!    this pass, summed over the mode's programs and divided by the IOs the device completed
//!    (/sys/block), with each program's runs per IO and its size (`bpf_prog_info`: translated
//!    instructions). The floor's time per program run is what statistics and the hook cost
//!    any program; a mode's work is its time per IO minus the floor per run times its runs
//!    per IO, and beyond the one clock reading a service time needs, that minus the clock
//!    program's work.
//! 2. CPU time per IO at a fixed rate (60% of the median no-tracing IOPS of pass 3): all
//!    CPUs' busy time from /proc/stat over the IOs done, which also shows the cost outside
//!    the programs (tracepoint dispatch, cache misses), as the median over rounds of each
//!    round's ratio to no tracing.
//! 3. IOPS at saturation, as a ratio to no tracing in the same round.
//!
//! Then the default agent's RSS and scrape time. `STORNET_BENCH_ROUNDS` (default 5, at least
//! 3) and `STORNET_BENCH_SECONDS` (default 10) change the length. `STORNET_BENCH_AGENT_BEFORE`,
//! the path of another stornet-agent binary (an earlier build), adds its default
//! configuration as one more mode, alternated with the others, and the difference of the two
//! builds' BPF time per IO round by round: a change to the probes judged within one run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf};

use stornet_lab::metrics::http_get;

use super::median;
use stornet_lab::cmd;

const BIOLATENCY: &str = "tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; } \
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ { \
@usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000); \
delete(@start[args->dev, args->sector]); }";

/// Every option of the agent on: the depth at dispatch, the issue probe's own dispatch
/// stamps, fine histograms, and per-cgroup counts (every top-level cgroup followed: the
/// issuer probe and the per-cgroup counters).
const ALL_OPTIONS: &str = "[block]\ninflight_at_issue = true\ndispatch_time = \"probe\"\n\
histogram = \"fine\"\n[cgroups]\npaths = [\"*\"]\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    None,
    Floor,
    Clock,
    Agent,
    Before,
    AgentAll,
    Bpftrace,
}

const MODES: [Mode; 6] = [
    Mode::None,
    Mode::Floor,
    Mode::Clock,
    Mode::Agent,
    Mode::AgentAll,
    Mode::Bpftrace,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "no tracing",
            Mode::Floor => "floor (empty programs)",
            Mode::Clock => "clock program",
            Mode::Agent => "stornet-agent default",
            Mode::Before => "reference build, default",
            Mode::AgentAll => "agent, every option",
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
        let disk = Loop { dev, backing };
        std::fs::write(
            format!("/sys/block/{}/queue/scheduler", disk.name()),
            "none",
        )
        .with_context(|| format!("setting the scheduler of {}", disk.dev))?;
        Ok(disk)
    }

    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }

    /// Reads and writes the device completed so far (/sys/block/<dev>/stat).
    fn ios(&self) -> Result<u64> {
        let stat = std::fs::read_to_string(format!("/sys/block/{}/stat", self.name()))?;
        let f: Vec<u64> = stat
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        ensure!(f.len() >= 5, "short /sys/block stat: {stat:?}");
        Ok(f[0] + f[4])
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

/// fio's read IOPS over `seconds` on `dev`; `rate` caps the total IOPS (split over the jobs).
fn fio(dev: &str, seconds: u64, rate: Option<u64>) -> Result<f64> {
    let mut c = Command::new("fio");
    c.args([
        "--name=blockbench",
        "--ioengine=io_uring",
        "--rw=randread",
        "--bs=4k",
    ])
    .args(["--iodepth=32", "--numjobs=2", "--direct=1", "--time_based"])
    .args(["--group_reporting", "--output-format=json"])
    .arg(format!("--filename={dev}"))
    .arg(format!("--runtime={seconds}"));
    if let Some(r) = rate {
        c.arg(format!("--rate_iops={}", (r / 2).max(1)));
    }
    let out = c.stderr(Stdio::null()).output().context("running fio")?;
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
    /// This build's agent with `config`.
    fn start(config: &str) -> Result<Agent> {
        Agent::start_binary(
            &cmd::workspace_root().join("target/release/stornet-agent"),
            config,
        )
    }

    fn start_binary(bin: &Path, config: &str) -> Result<Agent> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let file = std::env::temp_dir().join(format!(
            "stornet-bench-agent-{}-{port}.toml",
            std::process::id()
        ));
        // Statistics are the bench's to turn on, never the agent's.
        std::fs::write(
            &file,
            format!("[probes]\nsample_statistics_every_seconds = 0\n{config}"),
        )?;
        let child = Command::new(bin)
            .arg(format!("--web.listen-address={addr}"))
            .arg(format!("--config.file={}", file.display()))
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
        let _ = std::fs::remove_file(&file);
        let (_, metrics) = http_get(addr, "/metrics")?;
        for probe in ["block_issue", "block_completion", "block_requeue"] {
            ensure!(
                metrics.contains(&format!("stornet_probe_up{{probe=\"{probe}\"}} 1")),
                "probe {probe} is not up"
            );
        }
        Ok(agent)
    }

    fn pid(&self) -> u32 {
        self.run.child.id()
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
    while programs_of(run.child.id())?.len() < 2 {
        ensure!(
            Instant::now() < deadline,
            "bpftrace did not attach its programs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(run)
}

/// The agent's eBPF object as the last release build of stornet-agent embedded it.
fn agent_object() -> Result<PathBuf> {
    let build = cmd::workspace_root().join("target/release/build");
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(&build).with_context(|| format!("{}", build.display()))? {
        let e = e?;
        if !e
            .file_name()
            .to_string_lossy()
            .starts_with("stornet-agent-")
        {
            continue;
        }
        let obj = e.path().join("out/stornet");
        if let Ok(m) = obj.metadata() {
            found.push((m.modified()?, obj));
        }
    }
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .context("no eBPF object under target/release/build/stornet-agent-*/out")
}

/// The floor's empty programs, on the dispatch and completion hooks.
const FLOOR: [(&str, &str); 2] = [
    ("stornet_floor_block_rq_issue", "block_rq_issue"),
    ("stornet_floor_block_rq_complete", "block_rq_complete"),
];

/// The clock program, on the completion hook.
const CLOCK: [(&str, &str); 1] = [("stornet_clock_block_rq_complete", "block_rq_complete")];

/// Reference programs of the agent's object (the floor or the clock program), attached to
/// the block hooks.
struct Reference {
    _ebpf: Ebpf,
    /// Program ids, with the tracepoint each is on.
    programs: BTreeMap<u32, Option<String>>,
}

impl Reference {
    fn attach(programs: &[(&str, &str)]) -> Result<Reference> {
        let bytes = std::fs::read(agent_object()?)?;
        let mut ebpf = Ebpf::load(&bytes).context("loading the agent's eBPF object")?;
        let btf = Btf::from_sys_fs().context("kernel BTF")?;
        let mut ids = BTreeMap::new();
        for &(program, event) in programs {
            let p: &mut BtfTracePoint = ebpf
                .program_mut(program)
                .with_context(|| format!("{program} missing from the object"))?
                .try_into()?;
            p.load(event, &btf)
                .with_context(|| format!("loading {program}"))?;
            p.attach().with_context(|| format!("attaching {program}"))?;
            ids.insert(p.info()?.id(), Some(event.to_string()));
        }
        Ok(Reference {
            _ebpf: ebpf,
            programs: ids,
        })
    }
}

/// Whatever a mode runs while fio does: kept alive, then dropped to stop it.
enum Tracer {
    None,
    Reference(Reference),
    Agent(Agent),
    Bpftrace(Running),
}

impl Tracer {
    fn start(mode: Mode) -> Result<Tracer> {
        Ok(match mode {
            Mode::None => Tracer::None,
            Mode::Floor => Tracer::Reference(Reference::attach(&FLOOR)?),
            Mode::Clock => Tracer::Reference(Reference::attach(&CLOCK)?),
            Mode::Agent => Tracer::Agent(Agent::start("")?),
            Mode::Before => Tracer::Agent(Agent::start_binary(&before_binary()?, "")?),
            Mode::AgentAll => Tracer::Agent(Agent::start(ALL_OPTIONS)?),
            Mode::Bpftrace => Tracer::Bpftrace(bpftrace()?),
        })
    }

    /// The programs it holds, by id, with the tracepoint each is attached to (where known).
    fn programs(&self) -> Result<BTreeMap<u32, Option<String>>> {
        match self {
            Tracer::None => Ok(BTreeMap::new()),
            Tracer::Reference(r) => Ok(r.programs.clone()),
            Tracer::Agent(a) => programs_of(a.pid()),
            Tracer::Bpftrace(r) => programs_of(r.child.id()),
        }
    }
}

/// `VmRSS` of a process, in bytes.
fn rss(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kb * 1024)
}

/// Ids of the BPF programs a process holds (from its fds' fdinfo), each with the tracepoint
/// a link of the process attaches it to, if any (a program's name is cut to 15 characters:
/// the hook tells the agent's programs apart).
fn programs_of(pid: u32) -> Result<BTreeMap<u32, Option<String>>> {
    let mut out: BTreeMap<u32, Option<String>> = BTreeMap::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let text = std::fs::read_to_string(fd?.path()).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        if let Some(id) = field("prog_id:") {
            let hook = out.entry(id.parse()?).or_default();
            if let Some(tp) = field("tp_name:") {
                *hook = Some(tp);
            }
        }
    }
    Ok(out)
}

/// What the kernel says of one loaded program (`bpf_prog_info`).
#[derive(Clone, Debug, Default)]
struct ProgramStats {
    name: String,
    /// The tracepoint it is attached to, where known.
    hook: Option<String>,
    runs: u64,
    run_ns: u64,
    /// Instructions after the verifier's rewrites (`xlated_prog_len / 8`).
    insns: u32,
    /// Bytes of machine code the JIT made of them.
    jited: u32,
}

/// Statistics of the given programs, by id.
fn program_stats(ids: &BTreeMap<u32, Option<String>>) -> Result<BTreeMap<u32, ProgramStats>> {
    let mut out = BTreeMap::new();
    for info in aya::programs::loaded_programs() {
        let info = info?;
        if let Some(hook) = ids.get(&info.id()) {
            out.insert(
                info.id(),
                ProgramStats {
                    name: info.name_as_str().unwrap_or("?").to_string(),
                    hook: hook.clone(),
                    runs: info.run_count(),
                    run_ns: info.run_time().as_nanos() as u64,
                    insns: info.size_translated().unwrap_or(0) / 8,
                    jited: info.size_jitted(),
                },
            );
        }
    }
    Ok(out)
}

/// Busy and total jiffies of all CPUs (/proc/stat's first line).
fn cpu_jiffies() -> Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("empty /proc/stat")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    ensure!(f.len() >= 5, "short /proc/stat cpu line");
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let idle = f[3] + f[4];
    let total: u64 = f.iter().take(8).sum();
    Ok((total - idle, total))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One program over one pass-1 run of a mode.
#[derive(Clone, Debug)]
struct ProgramCost {
    name: String,
    hook: String,
    runs_per_io: f64,
    ns_per_run: f64,
    insns: u32,
    jited: u32,
}

/// Pass 1, one mode: BPF ns per IO, program runs per IO, and each program that ran.
struct BpfCost {
    per_io: f64,
    runs_per_io: f64,
    programs: Vec<ProgramCost>,
}

fn bpf_cost(mode: Mode, disk: &Loop, seconds: u64) -> Result<BpfCost> {
    let tracer = Tracer::start(mode)?;
    let ids = tracer.programs()?;
    ensure!(!ids.is_empty(), "{}: no BPF programs found", mode.name());
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("enabling BPF run-time statistics")?;
    let before = program_stats(&ids)?;
    let ios0 = disk.ios()?;
    fio(&disk.dev, seconds, None)?;
    let ios = (disk.ios()? - ios0).max(1) as f64;
    // Again: a program attached on demand meanwhile has a link now.
    let mut ids = ids;
    for (id, hook) in tracer.programs()? {
        if hook.is_some() {
            ids.insert(id, hook);
        }
    }
    let after = program_stats(&ids)?;
    drop(stats);
    drop(tracer);
    let mut cost = BpfCost {
        per_io: 0.0,
        runs_per_io: 0.0,
        programs: Vec::new(),
    };
    for (id, p) in &after {
        let p0 = before.get(id).cloned().unwrap_or_default();
        let (runs, ns) = (p.runs - p0.runs, p.run_ns - p0.run_ns);
        cost.per_io += ns as f64 / ios;
        cost.runs_per_io += runs as f64 / ios;
        cost.programs.push(ProgramCost {
            name: p.name.clone(),
            hook: p.hook.clone().unwrap_or_else(|| "-".into()),
            runs_per_io: runs as f64 / ios,
            ns_per_run: ns as f64 / runs.max(1) as f64,
            insns: p.insns,
            jited: p.jited,
        });
    }
    Ok(cost)
}

/// Pass 2, one mode: CPU ns per IO at a fixed rate.
fn cpu_per_io(mode: Mode, disk: &Loop, seconds: u64, rate: u64) -> Result<f64> {
    let tracer = Tracer::start(mode)?;
    // SAFETY: sysconf has no preconditions.
    let ticks = 1e9 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let (busy0, _) = cpu_jiffies()?;
    let ios0 = disk.ios()?;
    fio(&disk.dev, seconds, Some(rate))?;
    let ios = (disk.ios()? - ios0).max(1) as f64;
    let (busy1, _) = cpu_jiffies()?;
    drop(tracer);
    Ok((busy1 - busy0) as f64 * ticks / ios)
}

/// Pass 3, one mode: IOPS at saturation.
fn iops(mode: Mode, disk: &Loop, seconds: u64) -> Result<f64> {
    let _tracer = Tracer::start(mode)?;
    fio(&disk.dev, seconds, None)
}

/// Runs `measure` for every mode in `modes`, `rounds` times in rotated order.
fn rounds(
    what: &str,
    modes: &[Mode],
    n: usize,
    mut measure: impl FnMut(Mode) -> Result<f64>,
) -> Result<BTreeMap<Mode, Vec<f64>>> {
    let mut out: BTreeMap<Mode, Vec<f64>> = BTreeMap::new();
    for round in 0..n {
        let mut line = format!("  {what} round {}:", round + 1);
        for i in 0..modes.len() {
            let mode = modes[(round + i) % modes.len()];
            let v = measure(mode)?;
            out.entry(mode).or_default().push(v);
            line.push_str(&format!("  {v:.0}"));
        }
        println!("{line}");
    }
    Ok(out)
}

/// "min–max" of `v` with `decimals` digits.
fn spread(v: &[f64], decimals: usize) -> String {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.decimals$}–{max:.decimals$}")
}

/// The default agent's RSS and scrape time while fio runs.
fn agent_footprint(disk: &Loop) -> Result<()> {
    let agent = Agent::start("")?;
    let dev = disk.dev.clone();
    let load = std::thread::spawn(move || fio(&dev, 6, None));
    std::thread::sleep(Duration::from_secs(1));
    let mut times = Vec::new();
    for _ in 0..40 {
        let t = Instant::now();
        http_get(agent.addr, "/metrics")?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = load.join();
    times.sort_by(f64::total_cmp);
    println!(
        "\nagent (default configuration) during fio: RSS {:.1} MiB; /metrics scrape p50 {:.2} ms, \
         max {:.2} ms of {} scrapes",
        rss(agent.pid())? as f64 / 1048576.0,
        median(&times),
        times.last().copied().unwrap_or(0.0),
        times.len()
    );
    Ok(())
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
    let modes = modes()?;
    let n = env_u64("STORNET_BENCH_ROUNDS", 5)?.max(3) as usize;
    let seconds = env_u64("STORNET_BENCH_SECONDS", 10)?.max(2);
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    ensure!(
        std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
            .is_ok_and(|s| s.trim() == "0"),
        "BPF run-time statistics are on (sysctl kernel.bpf_stats_enabled): the IOPS and CPU \
         passes need them off"
    );
    let disk = Loop::new()?;
    println!(
        "fio io_uring 4k randread iodepth 32 x 2 jobs on {} (1 GiB in /dev/shm, scheduler none), \
         {n} rounds of {seconds} s per mode and pass, {} CPUs, load average {}",
        disk.dev,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        loadavg()
    );
    println!(
        "modes, in each round's order: {}",
        modes
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    fio(&disk.dev, 2, None)?; // warm-up

    println!("\npass 3 first (its no-tracing IOPS set pass 2's rate): IOPS at saturation");
    let sat = rounds("IOPS", &modes, n, |m| iops(m, &disk, seconds))?;
    let base = &sat[&Mode::None];
    let rate = (median(base) * 0.6) as u64;
    println!("\npass 2: CPU ns per IO at {rate} IOPS (60% of no tracing)");
    let cpu = rounds("CPU ns/IO", &modes, n, |m| {
        cpu_per_io(m, &disk, seconds, rate)
    })?;
    println!("\npass 1: BPF ns per IO with run-time statistics on");
    let traced = &modes[1..];
    let mut costs: BTreeMap<Mode, Vec<BpfCost>> = BTreeMap::new();
    rounds("BPF ns/IO", traced, n, |m| {
        let c = bpf_cost(m, &disk, seconds.min(5))?;
        let v = c.per_io;
        costs.entry(m).or_default().push(c);
        Ok(v)
    })?;
    report(n, &modes, &sat, &cpu, &costs);
    agent_footprint(&disk)?;
    println!("\nload average at the end: {}", loadavg());
    Ok(())
}

/// The floor's cost per program run: its time over its runs, per round.
fn floor_per_run(costs: &[BpfCost]) -> f64 {
    let per_run: Vec<f64> = costs
        .iter()
        .map(|c| c.per_io / c.runs_per_io.max(1e-9))
        .collect();
    median(&per_run)
}

/// The results table (the one docs/metrics.md shows) and each program's runs, time and size.
fn report(
    n: usize,
    modes: &[Mode],
    sat: &BTreeMap<Mode, Vec<f64>>,
    cpu: &BTreeMap<Mode, Vec<f64>>,
    costs: &BTreeMap<Mode, Vec<BpfCost>>,
) {
    let floor = floor_per_run(&costs[&Mode::Floor]);
    // The clock program's work above the floor: one clock reading.
    let clock: Vec<f64> = costs[&Mode::Clock]
        .iter()
        .map(|c| c.per_io - floor * c.runs_per_io)
        .collect();
    let clock = median(&clock);
    let base_cpu = &cpu[&Mode::None];
    let base_iops = &sat[&Mode::None];
    println!(
        "\nresults (medians of {n} rounds, spread min–max): the floor is {floor:.1} ns per program \
         run, one clock reading {clock:.1} ns"
    );
    println!(
        "  {:<24} {:>14} {:>8} {:>14} {:>18} {:>20} {:>16} {:>16}",
        "mode",
        "BPF ns/IO",
        "runs/IO",
        "above floor",
        "beyond floor+clock",
        "CPU ns/IO",
        "CPU added",
        "IOPS ratio"
    );
    for &mode in modes {
        let (bpf, runs, above, beyond) = match costs.get(&mode) {
            Some(c) => {
                let per_io: Vec<f64> = c.iter().map(|c| c.per_io).collect();
                let runs: Vec<f64> = c.iter().map(|c| c.runs_per_io).collect();
                let above: Vec<f64> = c.iter().map(|c| c.per_io - floor * c.runs_per_io).collect();
                let beyond: Vec<f64> = above.iter().map(|a| a - clock).collect();
                (
                    format!("{:.0} ({})", median(&per_io), spread(&per_io, 0)),
                    format!("{:.2}", median(&runs)),
                    format!("{:.0} ({})", median(&above), spread(&above, 0)),
                    match mode {
                        Mode::Floor | Mode::Clock => "-".to_string(),
                        _ => format!("{:.0} ({})", median(&beyond), spread(&beyond, 0)),
                    },
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let c = &cpu[&mode];
        // Each round against no tracing in the same round, then the median of the rounds.
        let added: Vec<f64> = c
            .iter()
            .zip(base_cpu)
            .map(|(a, b)| 100.0 * (a - b) / b)
            .collect();
        let ratios: Vec<f64> = sat[&mode]
            .iter()
            .zip(base_iops)
            .map(|(a, b)| a / b)
            .collect();
        println!(
            "  {:<24} {:>14} {:>8} {:>14} {:>18} {:>20} {:>16} {:>16}",
            mode.name(),
            bpf,
            runs,
            above,
            beyond,
            format!("{:.0} ({})", median(c), spread(c, 0)),
            if mode == Mode::None {
                "-".to_string()
            } else {
                format!("{:+.1}% ({})", median(&added), spread(&added, 1))
            },
            format!("{:.3} ({})", median(&ratios), spread(&ratios, 3)),
        );
    }
    println!(
        "\neach program (pass 1, medians over rounds; hook \"-\": loaded, not attached; insns: \
         instructions after the verifier)"
    );
    println!(
        "  {:<24} {:<16} {:<20} {:>8} {:>10} {:>7} {:>11}",
        "mode", "program", "hook", "runs/IO", "ns/run", "insns", "JIT bytes"
    );
    for (mode, c) in costs {
        let mut names: Vec<(&str, &str)> = c
            .iter()
            .flat_map(|c| {
                c.programs
                    .iter()
                    .map(|p| (p.name.as_str(), p.hook.as_str()))
            })
            .collect();
        names.sort();
        names.dedup();
        for (name, hook) in names {
            let of: Vec<&ProgramCost> = c
                .iter()
                .flat_map(|c| {
                    c.programs
                        .iter()
                        .filter(|p| p.name == name && p.hook == hook)
                })
                .collect();
            let runs: Vec<f64> = of.iter().map(|p| p.runs_per_io).collect();
            let ns: Vec<f64> = of.iter().map(|p| p.ns_per_run).collect();
            println!(
                "  {:<24} {:<16} {:<20} {:>8.3} {:>10.1} {:>7} {:>11}",
                mode.name(),
                name,
                hook,
                median(&runs),
                median(&ns),
                of[0].insns,
                of[0].jited
            );
        }
    }
    let agent = &costs[&Mode::Agent];
    let above: Vec<f64> = agent
        .iter()
        .map(|c| c.per_io - floor * c.runs_per_io - clock)
        .collect();
    let runs: Vec<f64> = agent.iter().map(|c| c.runs_per_io).collect();
    let added: Vec<f64> = cpu[&Mode::Agent]
        .iter()
        .zip(base_cpu)
        .map(|(a, b)| 100.0 * (a - b) / b)
        .collect();
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    println!(
        "\ntargets, default configuration: {:.0} ns per IO beyond the floor and one clock reading \
         (at most 20: {}); {:.2} program runs per IO (at most 2: {}); CPU per IO {:+.1}% (at most \
         1%: {})",
        median(&above),
        verdict(median(&above) <= 20.0),
        median(&runs),
        verdict(median(&runs) <= 2.05),
        median(&added),
        verdict(median(&added) <= 1.0)
    );
    if let Some(before) = costs.get(&Mode::Before) {
        // Round by round: the two builds ran in the same round, one after the other.
        let d: Vec<f64> = agent
            .iter()
            .zip(before)
            .map(|(a, b)| a.per_io - b.per_io)
            .collect();
        println!(
            "this build minus the reference build, BPF ns per IO in each round: median {:+.1} \
             ({}), rounds {}",
            median(&d),
            spread(&d, 1),
            d.iter()
                .map(|d| format!("{d:+.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// The modes of this run: [`MODES`], and the reference build after this build's agent when
/// `STORNET_BENCH_AGENT_BEFORE` names one.
fn modes() -> Result<Vec<Mode>> {
    let mut modes = MODES.to_vec();
    if std::env::var_os(BEFORE).is_some() {
        before_binary()?;
        let at = modes.iter().position(|m| *m == Mode::Agent).unwrap_or(0) + 1;
        modes.insert(at, Mode::Before);
    }
    Ok(modes)
}

const BEFORE: &str = "STORNET_BENCH_AGENT_BEFORE";

/// The reference build's binary, which must exist.
fn before_binary() -> Result<PathBuf> {
    let path = PathBuf::from(std::env::var_os(BEFORE).context(BEFORE)?);
    ensure!(
        path.is_file(),
        "{BEFORE}={} is not a file (the path of a stornet-agent binary)",
        path.display()
    );
    Ok(path)
}
