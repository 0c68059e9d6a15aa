use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, types};
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{AlignedBuf, LoopDevice, open_direct};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

use crate::block_util::{assert_accounted, bucket, count, settled, total, unseen};

const IN_FLIGHT: usize = 16;
const READS: u64 = 6400;
const DEPTH: &str = "stornet_block_inflight_at_issue";
/// The depth at dispatch is opt-in.
const DEPTH_ON: &str = "[block]\ninflight_at_issue = true\n";
const QUEUE: &str = "stornet_block_queue_seconds";
const SERVICE: &str = "stornet_block_service_seconds";

/// One io_uring keeps 16 O_DIRECT 4 KiB reads in flight: the first 16 go to the device in
/// one submission, and each read that completes is replaced in the next. Returns the summed
/// latency of the reads, from queueing each to reaping its completion.
///
/// (Threads with one blocking read each need not overlap: a loop device serves a read in
/// microseconds, and on a 2-CPU machine busy with other work, threads that get a CPU one at
/// a time may never meet another read in flight. Reads submitted together do.)
fn sixteen_in_flight(disk: &LoopDevice) -> Duration {
    let file = open_direct(&disk.dev, false).expect("open");
    let fd = types::Fd(file.as_raw_fd());
    let mut ring = IoUring::new(2 * IN_FLIGHT as u32).expect("io_uring");
    let mut bufs: Vec<AlignedBuf> = (0..IN_FLIGHT).map(|_| AlignedBuf::new(4096, 0)).collect();
    let mut queued = [Instant::now(); IN_FLIGHT];
    let (mut next, mut done, mut spent) = (0u64, 0u64, Duration::ZERO);
    let mut queue = |ring: &mut IoUring, slot: usize, i: u64, at: &mut Instant| {
        let offset = (i * 7919 % 16384) * 4096;
        let buf = bufs[slot].as_mut_slice();
        let read = opcode::Read::new(fd, buf.as_mut_ptr(), buf.len() as u32)
            .offset(offset)
            .build()
            .user_data(slot as u64);
        *at = Instant::now();
        // SAFETY: the buffer outlives the read (it is reaped before this function returns)
        // and is not touched until its completion is reaped.
        unsafe {
            ring.submission()
                .push(&read)
                .expect("a free submission slot")
        };
    };
    for (slot, at) in queued.iter_mut().enumerate() {
        queue(&mut ring, slot, next, at);
        next += 1;
    }
    while done < READS {
        ring.submit_and_wait(1).expect("io_uring_enter");
        let reaped: Vec<(usize, i32)> = ring
            .completion()
            .map(|c| (c.user_data() as usize, c.result()))
            .collect();
        for (slot, result) in reaped {
            assert_eq!(result, 4096, "read into slot {slot}");
            spent += queued[slot].elapsed();
            done += 1;
            if next < READS {
                queue(&mut ring, slot, next, &mut queued[slot]);
                next += 1;
            }
        }
    }
    spent
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
    let n = READS;
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
    assert!(
        alone < issued,
        "no read ever met another in flight ({alone} of {issued} dispatches alone)"
    );
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
/// 1 and 16, and the summed service time is at most the latency the application measured.
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
