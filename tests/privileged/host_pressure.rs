//! The `pressure` collector against the kernel's own count: `/proc/pressure/cpu` read just
//! before and just after a scrape brackets the agent's value. While two CPU spinners per CPU
//! run, the stall time grows by a large share of the wall time, and the agent sees it grow.
//! A cpu group's throttled time is bracketed by its `cpu.stat` the same way, while a spinner
//! in it runs against a quota of a tenth of a CPU.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::cgroup::CpuCgroup;
use stornet_lab::metrics::sum;
use stornet_lab::privilege::require_root;

const CPU: &str = "/proc/pressure/cpu";

/// `some` `total=` of /proc/pressure/cpu, in microseconds.
fn some_total() -> u64 {
    let text = std::fs::read_to_string(CPU).expect("/proc/pressure/cpu (a kernel with PSI)");
    text.lines()
        .find(|l| l.starts_with("some "))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
        .and_then(|v| v.parse().ok())
        .expect("a some line with total=")
}

struct Spinners(Vec<Child>);

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn host_pressure_brackets_the_kernels_stall_time() {
    if !require_root("host_pressure_brackets_the_kernels_stall_time") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let value = || {
        let samples = agent.scrape().expect("scrape");
        sum(
            &samples,
            "stornet_pressure_stalled_seconds_total",
            &[("resource", "cpu"), ("kind", "some")],
        )
    };
    let read = |f: &dyn Fn() -> f64| {
        let before = some_total();
        let v = f();
        let after = some_total();
        (before, v, after)
    };
    let (b0, v0, a0) = read(&value);
    assert!(
        (b0 as f64 / 1e6..=a0 as f64 / 1e6).contains(&v0),
        "agent {v0} s outside the kernel's {b0}..{a0} µs"
    );

    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners = Spinners(
        (0..2 * cpus)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .expect("a spinner")
            })
            .collect(),
    );
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let (b1, v1, a1) = read(&value);
    let wall = start.elapsed().as_secs_f64();
    drop(spinners);
    assert!(
        (b1 as f64 / 1e6..=a1 as f64 / 1e6).contains(&v1),
        "agent {v1} s outside the kernel's {b1}..{a1} µs"
    );
    let stalled = v1 - v0;
    println!(
        "cpu some stall: {stalled:.2} s in {wall:.2} s with {} spinners",
        2 * cpus
    );
    // Twice as many runnable spinners as CPUs: something waits nearly all the time.
    assert!(
        stalled >= 0.5 * wall,
        "{stalled:.2} s of stall in {wall:.2} s with two spinners per CPU"
    );
}

/// A spinner in a cpu group with a quota of a tenth of a CPU: the kernel throttles the group
/// (at least 0.3 s by its `cpu.stat`, however busy the machine), and the agent's
/// `stornet_cpu_throttled_seconds_total` lies between the `cpu.stat` read just before and
/// just after its scrape, as it does for a group that never ran (0).
#[test]
fn cpu_throttling_brackets_the_groups_cpu_stat() {
    if !require_root("cpu_throttling_brackets_the_groups_cpu_stat") {
        return;
    }
    let group = CpuCgroup::new("pressure-throttle").expect("a cpu cgroup");
    let config = format!(
        "[pressure]\ncpu_cgroup = {:?}\n",
        group.0.path.display().to_string()
    );
    let agent = AgentProcess::with_config(&config, &[]).expect("agent starts");
    let value = || {
        let samples = agent.scrape().expect("scrape");
        sum(&samples, "stornet_cpu_throttled_seconds_total", &[])
    };
    let read = || {
        let before = group.throttled().expect("cpu.stat").1;
        let v = value();
        let after = group.throttled().expect("cpu.stat").1;
        (before, v, after)
    };
    let (b0, v0, a0) = read();
    assert!(
        (b0..=a0).contains(&v0),
        "agent {v0} s outside cpu.stat's {b0}..{a0} s"
    );
    assert_eq!(v0, 0.0, "a group that never ran was throttled");

    group.limit(Some(100)).expect("a quota of a tenth of a CPU");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]);
    group
        .0
        .enter_on_spawn(&mut cmd)
        .expect("spawn into the group");
    let spinner = Spinners(vec![cmd.spawn().expect("a spinner")]);
    let start = Instant::now();
    // How much of each period the spinner is held off depends on how soon it gets its
    // 10 ms on a busy machine; what must hold is that the kernel throttled it at all, for
    // a good part of a second, and that the agent reads what the kernel counts.
    let (b1, v1, a1) = loop {
        std::thread::sleep(Duration::from_secs(1));
        let r = read();
        if r.0 - a0 >= 0.3 || start.elapsed() > Duration::from_secs(20) {
            break r;
        }
    };
    let wall = start.elapsed().as_secs_f64();
    drop(spinner);
    println!(
        "throttled {:.2} s in {wall:.2} s at a tenth of a CPU (cpu.stat {b1:.2}..{a1:.2} s)",
        v1 - v0
    );
    assert!(
        b1 - a0 >= 0.3,
        "the kernel throttled the group {:.2} s in {wall:.2} s",
        b1 - a0
    );
    assert!(
        (b1..=a1).contains(&v1),
        "agent {v1} s outside cpu.stat's {b1}..{a1} s"
    );
}
