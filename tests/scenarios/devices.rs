//! Scenarios 4 and 5: the network is healthy (a deep-buffer switch) and the local disk is
//! the problem: throttled by its cgroup, or behind a short device queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use stornet_lab::lab::{DiskSpec, HostSpec, Lab, Shaping, Throttle, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir};

fn healthy_network(tag: &str) -> Lab {
    support::two_hosts(
        tag,
        HostSpec::new(CLIENT).shaped(Shaping::deep()),
        HostSpec::new(REPLICA).shaped(Shaping::deep()),
    )
}

fn workload(iodepth: u32) -> Workload {
    Workload {
        rw: "randwrite".into(),
        rwmixread: None,
        bs: "4k".into(),
        iodepth,
        numjobs: 1,
        rate_iops: None,
        size: "256m".into(),
        runtime: "15s".into(),
        ramp_time: Some("1s".into()),
        interval: "500ms".into(),
        extra: Vec::new(),
    }
}

/// No network candidate may be confirmed, and the evidence names no network signal.
fn assert_no_network_cause(o: &stornet_lab::lab::Outcome) {
    let confirmed = support::confirmed(o);
    assert!(
        !confirmed
            .iter()
            .any(|c| c.contains("network_congestion") || c.contains("mtu_mismatch")),
        "a network cause is confirmed: {confirmed:?}"
    );
    for e in o.evidence() {
        assert!(
            !["retransmit", "qdisc", "dropped", "MTU"]
                .iter()
                .any(|w| e.contains(w)),
            "network evidence: {e}"
        );
    }
}

#[test]
fn scenario_4_throttled_device_is_slow_device() {
    if !require_root("scenario_4_throttled_device_is_slow_device") {
        return;
    }
    let dir = RunDir::new("throttled");
    let lab = healthy_network("s4");
    // 300 writes per second, enforced by the blkio cgroup the load runs in.
    let disk = support::disk(
        "s4",
        DiskSpec::new(support::DISK_BYTES).throttle(Throttle::WriteIops(300)),
    );
    let before = disk.dev.stat().unwrap();
    let o = support::run(&lab, &disk, &workload(16), &dir, "throttled");
    let after = disk.dev.stat().unwrap();
    let writes = o.latency(0, "write");
    assert_eq!(o.cause(), "slow_device", "{:#}", o.analysis["verdict"]);
    let location = o.analysis["verdict"]["location"].as_str().unwrap_or("");
    assert!(
        location.contains(disk.name()),
        "the cause is placed on {}: {location}",
        disk.name()
    );
    assert_no_network_cause(&o);
    // The throttle held the load: the device completed at most its limit per second
    // (/sys/block/*/stat, ramp included), and the network stayed clean.
    let done = (after.write_ios - before.write_ios) as f64;
    assert!(
        done <= 300.0 * (o.seconds + 1.0),
        "{done} writes in {:.1} s through a 300 IOPS throttle",
        o.seconds
    );
    assert!(writes.iops <= 330.0, "{} IOPS", writes.iops);
    assert_eq!(o.qdisc_drops, 0);
}

/// Samples `/sys/block/<dev>/inflight` every 50 ms while `f` runs: (samples, samples with
/// at least `limit` requests in flight, the most seen).
fn sample_inflight<T>(dev: &str, limit: u64, f: impl FnOnce() -> T) -> (T, usize, usize, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let path = format!("/sys/block/{dev}/inflight");
    std::thread::scope(|s| {
        let st = stop.clone();
        let sampler = s.spawn(move || {
            let (mut n, mut full, mut max) = (0, 0, 0);
            while !st.load(Ordering::Relaxed) {
                if let Ok(t) = std::fs::read_to_string(&path) {
                    let v: u64 = t
                        .split_whitespace()
                        .filter_map(|x| x.parse::<u64>().ok())
                        .sum();
                    n += 1;
                    full += usize::from(v >= limit);
                    max = max.max(v);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (n, full, max)
        });
        let r = f();
        stop.store(true, Ordering::Relaxed);
        let (n, full, max) = sampler.join().expect("sampler");
        (r, n, full, max)
    })
}

#[test]
fn scenario_5_short_device_queue_is_device_saturation() {
    if !require_root("scenario_5_short_device_queue_is_device_saturation") {
        return;
    }
    let dir = RunDir::new("shortqueue");
    let lab = healthy_network("s5");
    // A queue of 31 requests (the homelab controller's) in front of a device that serves
    // 2,000 writes per second; 64 IOs outstanding.
    let disk = support::disk(
        "s5",
        DiskSpec::new(support::DISK_BYTES)
            .queue_depth(31)
            .slow_behind(Throttle::WriteIops(2000)),
    );
    assert_eq!(disk.nr_requests().unwrap(), 31);
    let (o, samples, full, max) = sample_inflight(disk.name(), 31, || {
        support::run(&lab, &disk, &workload(64), &dir, "shortqueue")
    });
    println!(
        "/sys/block/{}/inflight: at 31 in {full} of {samples} samples, at most {max}",
        disk.name()
    );
    assert_eq!(
        o.cause(),
        "device_saturation",
        "{:#}",
        o.analysis["verdict"]
    );
    let location = o.analysis["verdict"]["location"].as_str().unwrap_or("");
    assert!(
        location.contains(disk.name()),
        "the cause is placed on {}: {location}",
        disk.name()
    );
    // In flight pinned at the limit: by the kernel's own count, and in the agent's series.
    assert_eq!(
        max, 31,
        "never more requests in flight than the queue holds"
    );
    assert!(
        full * 2 >= samples,
        "at the limit in only {full} of {samples} samples"
    );
    let inflight = support::recorded(&o, &["devices", disk.name(), "inflight"]);
    let limit = support::recorded(&o, &["devices", disk.name(), "queue_limit"]);
    assert!(
        inflight > 0.0 && limit > 0.0,
        "the record holds in-flight and queue-limit series"
    );
    assert!(
        o.evidence()
            .iter()
            .any(|e| e.contains("queue limit (31 of 31)")),
        "the evidence names the limit: {:?}",
        o.evidence()
    );
}
