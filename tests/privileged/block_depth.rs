use std::os::unix::fs::FileExt;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{AlignedBuf, LoopDevice, open_direct};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

use crate::block_util::{assert_accounted, bucket, count, settled, total, unseen};

const THREADS: usize = 16;
const PER_THREAD: u64 = 400;
const DEPTH: &str = "stornet_block_inflight_at_issue";
/// The depth at dispatch is opt-in.
const DEPTH_ON: &str = "[block]\ninflight_at_issue = true\n";
const QUEUE: &str = "stornet_block_queue_seconds";
const SERVICE: &str = "stornet_block_service_seconds";

/// 16 threads keep one O_DIRECT 4 KiB read each in flight; returns the summed latency the
/// threads measured around each read.
fn sixteen_in_flight(disk: &LoopDevice) -> Duration {
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let (dev, barrier) = (disk.dev.clone(), barrier.clone());
            std::thread::spawn(move || {
                let f = open_direct(&dev, false).expect("open");
                let mut buf = AlignedBuf::new(4096, 0);
                let mut spent = Duration::ZERO;
                barrier.wait();
                for i in 0..PER_THREAD {
                    let offset = ((t * PER_THREAD + i) * 7919 % 16384) * 4096;
                    let start = Instant::now();
                    f.read_exact_at(buf.as_mut_slice(), offset).expect("read");
                    spent += start.elapsed();
                }
                spent
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// Runs the 16-in-flight load on a fresh loop device (scheduler `none`) and checks what the
/// agent behind `scrape` saw.
fn check(test: &str, scrape: &dyn Fn() -> anyhow::Result<Vec<Sample>>, stamps: &str) {
    let disk = LoopDevice::new(test, 64 << 20).expect("loop device");
    disk.set_queue_attr("scheduler", "none").unwrap();
    let dev = [("device", disk.name.as_str())];
    let reads = [("device", disk.name.as_str()), ("op", "read")];
    let (before, stat0) = settled(scrape, &disk);

    let app_latency = sixteen_in_flight(&disk).as_secs_f64();

    let (after, stat1) = settled(scrape, &disk);
    let delta = |m: &dyn Fn(&[Sample]) -> f64| m(&after) - m(&before);
    let n = THREADS as u64 * PER_THREAD;
    assert_eq!(stat1.read_ios - stat0.read_ios, n, "sysfs read delta");
    // Under load the kernel now and then skips a BPF program run, and counts what it skipped
    // (`stornet_agent_probe_misses_total`, docs/metrics.md): what the probe counted plus what
    // the kernel says it missed covers every read, and nothing is counted twice. (Other IO
    // on the machine can add misses, never counts.)
    let misses =
        |probe: &str| delta(&|s| sum(s, "stornet_agent_probe_misses_total", &[("probe", probe)]));
    let seen = |what: &str, got: f64, probes: &[&str]| {
        let missed: f64 = probes.iter().map(|p| misses(p)).sum();
        let probe = probes.join(" and ");
        assert!(
            got <= n as f64 && got + missed >= n as f64,
            "{what}: {got} of {n} reads, {missed} runs of {probe} missed"
        );
        if missed > 0.0 {
            eprintln!("{what}: {got} of {n} reads; the kernel skipped {missed} runs of {probe}");
        }
    };
    let timed = delta(&|s| count(s, SERVICE, &reads));
    // A read is timed when its completion is seen and (with probe stamps) its dispatch too.
    let timing: &[&str] = if stamps == "probe" {
        &["block_completion", "block_issue"]
    } else {
        &["block_completion"]
    };
    let missed: f64 = timing.iter().map(|p| misses(p)).sum();
    let unseen_here = unseen(&before, &after, &disk.name);
    assert_accounted("timed reads", timed, missed, unseen_here, n as f64);
    // Stamped where expected (other devices may add to the count, never take from it).
    let stamped = delta(&|s| {
        sum(
            s,
            "stornet_block_dispatch_stamps_total",
            &[("source", stamps)],
        )
    });
    assert!(stamped >= timed, "{stamped} dispatches stamped by {stamps}");

    // The depth each read met at dispatch: between 1 and 16, itself included. A completion
    // the probes did not see leaves its request counted until its driver tag is reused; such
    // stale marks are counted (`unseen_end`) and are the only way past 16.
    let issued = delta(&|s| count(s, DEPTH, &dev));
    seen("dispatches with a depth", issued, &["block_issue"]);
    let unseen = delta(&|s| {
        sum(
            s,
            "stornet_block_unrecorded_total",
            &[("reason", "unseen_end")],
        )
    });
    let limit = ((16.0 + unseen) as u64).next_power_of_two().to_string();
    assert_eq!(delta(&|s| bucket(s, DEPTH, &dev, "0")), 0.0, "depth 0");
    assert_eq!(
        delta(&|s| bucket(s, DEPTH, &dev, &limit)),
        issued,
        "depth above {limit} ({unseen} stale marks)"
    );
    let alone = delta(&|s| bucket(s, DEPTH, &dev, "1"));
    assert!(alone < issued, "no read ever met another in flight");
    let mean = delta(&|s| total(s, DEPTH, &dev)) / issued;
    assert!((1.0..=16.0).contains(&mean), "mean depth {mean}");
    let left = sum(&after, "stornet_block_inflight", &dev);
    assert!(
        left <= n as f64 - timed,
        "{left} left in flight, {} completions unseen",
        n as f64 - timed
    );

    // Device time is part of what the application waited for, and so is queue time.
    let service = delta(&|s| total(s, SERVICE, &reads));
    let queue = delta(&|s| total(s, QUEUE, &reads));
    assert!(service > 0.0);
    assert!(
        service <= app_latency,
        "service {service} s > application latency {app_latency} s"
    );
    assert!(
        queue + service <= app_latency,
        "queue {queue} s + service {service} s > application latency {app_latency} s"
    );
    eprintln!(
        "{test}: {n} reads ({timed} timed), mean depth {mean:.2}, service {service:.4} s, \
         queue {queue:.4} s, application {app_latency:.4} s"
    );
}

/// 16 concurrent O_DIRECT reads kept in flight: `inflight_at_issue` has all its mass between
/// 1 and 16, and the summed service time is at most the latency the threads measured.
#[test]
fn block_depth_and_service_time_with_kernel_stamps() {
    if !require_root("block_depth_and_service_time_with_kernel_stamps") {
        return;
    }
    let agent = AgentProcess::with_config(DEPTH_ON, &[]).expect("agent starts");
    check("block_depth_kernel", &|| agent.scrape(), "kernel");
}

/// The same with the issue probe's own dispatch stamps, the fallback for queues whose kernel
/// does not stamp dispatches.
#[test]
fn block_depth_and_service_time_with_probe_stamps() {
    if !require_root("block_depth_and_service_time_with_probe_stamps") {
        return;
    }
    let config = format!("{DEPTH_ON}dispatch_time = \"probe\"\n");
    let agent = AgentProcess::with_config(&config, &[]).unwrap();
    check("block_depth_probe", &|| agent.scrape(), "probe");
    let unrecorded = sum(
        &agent.scrape().unwrap(),
        "stornet_block_unrecorded_total",
        &[("reason", "stamp_map_full")],
    );
    assert_eq!(unrecorded, 0.0);
}
