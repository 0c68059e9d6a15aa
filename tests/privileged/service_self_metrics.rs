//! The agent's own metrics against independent counts: probe runs against the probe's own
//! event count, map fill against the series it reports, CPU and RSS against /proc, and
//! scrape counts against the scrapes the test made (one request each: `scrape_once`).

use anyhow::ensure;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_writes};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

use crate::block_util::up_to_three_times;

fn total(samples: &[Sample], name: &str) -> f64 {
    sum(samples, name, &[])
}

#[test]
fn service_self_metrics_match_independent_counts() {
    if !require_root("service_self_metrics_match_independent_counts") {
        return;
    }
    const N: u64 = 3000;
    let agent = AgentProcess::with_config("[probes]\nrun_statistics = true\n", &[]).unwrap();
    let disk = LoopDevice::new("selfm", 64 << 20).unwrap();
    let probe = [("probe", "block_completion")];

    // Every run of the completion program counts one completion, on any device. The kernel
    // counts the runs it skips because the program was already active on that CPU (misses);
    // now and then it skips one without counting it (docs/metrics.md), hence the retries.
    let mut after = Vec::new();
    let mut scrapes = 0.0;
    up_to_three_times("self metrics: probe runs", || {
        scrapes += 2.0;
        let before = agent.scrape_once()?;
        direct_writes(&disk.dev, N, 4096)?;
        after = agent.scrape_once()?;
        let delta = |name: &str, labels: &[(&str, &str)]| {
            sum(&after, name, labels) - sum(&before, name, labels)
        };
        let runs = delta("stornet_agent_probe_runs_total", &probe);
        let misses = delta("stornet_agent_probe_misses_total", &probe);
        let ios = delta("stornet_block_io_size_bytes_count", &[]);
        let run_time = delta("stornet_agent_probe_run_seconds_total", &probe);
        println!("{N} writes: {runs} runs, {misses} misses of block_completion, {ios} IOs");
        ensure!(
            after
                .iter()
                .any(|s| s.name == "stornet_agent_probe_misses_total"
                    && s.label("probe") == Some("block_completion")),
            "no misses series for block_completion"
        );
        ensure!(
            runs + misses >= N as f64,
            "runs {runs} + misses {misses} < {N} writes"
        );
        ensure!(
            (runs - ios).abs() <= 0.01 * ios + 50.0,
            "program runs {runs} vs completions counted {ios}"
        );
        ensure!(run_time > 0.0 && run_time < 1.0, "run time {run_time} s");
        Ok(())
    });
    assert_eq!(total(&after, "stornet_agent_bpf_stats_enabled"), 1.0);

    // Every hash map the probes use is watched and within its capacity; the error map holds
    // one entry per error series the agent reports.
    for name in [
        "BLOCK_STATS",
        "BLOCK_STAMPS",
        "BLOCK_ERRORS",
        "NET_RETRANSMITS",
    ] {
        let map = [("map", name)];
        let max = sum(&after, "stornet_agent_map_max_entries", &map);
        let entries = sum(&after, "stornet_agent_map_entries", &map);
        assert!(max > 0.0, "{name}: no capacity reported");
        assert!(entries <= max, "{name}: {entries} entries > capacity {max}");
    }
    let error_series = after
        .iter()
        .filter(|s| s.name == "stornet_block_errors_total")
        .count() as f64;
    let errors = [("map", "BLOCK_ERRORS")];
    assert_eq!(
        sum(&after, "stornet_agent_map_entries", &errors),
        error_series
    );
    assert_eq!(
        sum(&after, "stornet_agent_map_max_entries", &errors),
        1024.0
    );

    // CPU and RSS as /proc reports them for the agent's pid.
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    let vm_rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let rss = total(&after, "process_resident_memory_bytes");
    assert!(
        (rss - vm_rss_kib * 1024.0).abs() < 0.25 * rss,
        "rss {rss} vs VmRSS {vm_rss_kib} KiB"
    );
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", agent.pid())).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu_now = (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tick;
    let cpu = total(&after, "process_cpu_seconds_total");
    assert!(cpu > 0.0 && cpu <= cpu_now, "cpu {cpu} vs /proc {cpu_now}");

    // The scrape histogram counts the scrapes before the current one: all of this test's.
    assert_eq!(
        total(&after, "stornet_agent_scrape_duration_seconds_count"),
        scrapes - 1.0
    );
    let third = agent.scrape_once().unwrap();
    assert_eq!(
        total(&third, "stornet_agent_scrape_duration_seconds_count"),
        scrapes
    );
    assert!(total(&third, "stornet_agent_scrape_duration_seconds_sum") > 0.0);
}

/// By default the agent keeps the kernel's BPF statistics off (the gauge then follows the
/// sysctl) and the probes still count every IO; it turns them on only for short windows in
/// which it measures each probe's cost per run.
#[test]
fn service_statistics_are_sampled_not_kept_on() {
    if !require_root("service_statistics_are_sampled_not_kept_on") {
        return;
    }
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap();
    let config = "[probes]\nsample_statistics_every_seconds = 2\nsample_statistics_seconds = 1\n";
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let agent = AgentProcess::with_config(config, &[]).unwrap();
    let disk = LoopDevice::new("nostats", 16 << 20).unwrap();
    let labels = [("device", disk.name.as_str()), ("op", "write")];
    up_to_three_times("probes count without run statistics", || {
        let before = agent.scrape_once()?;
        direct_writes(&disk.dev, 100, 4096)?;
        let after = agent.scrape_once()?;
        let ios = sum(&after, "stornet_block_io_size_bytes_count", &labels)
            - sum(&before, "stornet_block_io_size_bytes_count", &labels);
        ensure!(ios == 100.0, "{ios} writes counted of 100");
        Ok(())
    });

    // Writes for 7 s (more than two 3 s cycles), while watching whether the agent holds the
    // kernel's statistics file (`anon_inode:bpf-stats`) open.
    let (mut open, mut closed) = (0, 0);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(7) {
        direct_writes(&disk.dev, 20, 4096).unwrap();
        if holds_stats_fd(agent.pid()) {
            open += 1;
        } else {
            closed += 1;
        }
    }
    println!("statistics file held in {open} of {} looks", open + closed);
    assert!(open > 0, "the agent never turned statistics on");
    assert!(
        closed > open,
        "statistics on most of the time: {open} of {}",
        open + closed
    );

    let after = agent.scrape_once().unwrap();
    let completion = [("probe", "block_completion")];
    let per_run = sum(
        &after,
        "stornet_agent_probe_sampled_seconds_per_run",
        &completion,
    );
    let rate = sum(
        &after,
        "stornet_agent_probe_sampled_runs_per_second",
        &completion,
    );
    let end = total(&after, "stornet_agent_probe_sample_end_time_seconds");
    println!(
        "sampled: block_completion {rate:.0} runs/s, {:.0} ns per run",
        per_run * 1e9
    );
    assert!(rate > 0.0, "no runs in the sampling window");
    assert!(per_run > 0.0 && per_run < 100e-6, "{per_run} s per run");
    assert!(
        end > t0,
        "sample ended at {end}, before the agent started at {t0}"
    );
    // The gauge follows the sysctl unless a window is open.
    let gauge = total(&after, "stornet_agent_bpf_stats_enabled");
    if sysctl.trim() == "1" {
        assert_eq!(gauge, 1.0);
    }
}

/// Whether `pid` holds a BPF run-time statistics file descriptor.
fn holds_stats_fd(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok).any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy() == "anon_inode:bpf-stats")
            })
        })
        .unwrap_or(false)
}
