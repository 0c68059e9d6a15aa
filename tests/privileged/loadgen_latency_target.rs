use std::process::Stdio;

use stornet_lab::blockdev::LoopDevice;
use stornet_lab::cgroup::BlkioCgroup;
use stornet_lab::loadgen::{Run, command, num};
use stornet_lab::privilege::require_root;

/// `--latency_target` on a loop device capped at 500 read IOPS by a cgroup throttle, which
/// lets IOs through in 100 ms slices: a few IOs in flight mostly pass at once, while a queue
/// of depth 20 waits 40 ms on average (Little's law), so a 20 ms target at p90 is met at
/// depth 2 and out of reach at 20. The search finds a depth between, its last window meets
/// the target at about the cap's IOPS, a deeper depth it tried missed, and the JSON names
/// the depth found as fio's `latency_depth`.
#[test]
fn loadgen_latency_target_finds_the_depth_the_device_allows() {
    if !require_root("loadgen_latency_target_finds_the_depth_the_device_allows") {
        return;
    }
    const CAP: f64 = 500.0;
    let disk = LoopDevice::new("lglattarget", 64 << 20).expect("loop device");
    let cg = BlkioCgroup::new("lglattarget").expect("blkio cgroup");
    cg.throttle_iops(&disk.devnum().unwrap(), true, CAP as u64)
        .expect("throttle");
    let dev = disk.dev.to_str().unwrap();
    let mut cmd = command(&[
        "--name=lt",
        "--filename",
        dev,
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--latency_target=20ms",
        "--latency_window=500ms",
        "--latency_percentile=90",
        "--time_based",
        "--runtime=20",
        "--output-format=json",
    ]);
    cmd.stdin(Stdio::null());
    cg.enter_on_spawn(&mut cmd).unwrap();
    let r = Run::from_output(cmd.output().expect("loadgen runs"));
    drop(cg);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();
    let job = &j["jobs"][0];
    let search = &job["loadgen"]["latency_search"];
    let depth = search["depth"].as_u64().unwrap();
    let steps = search["steps"].as_array().unwrap();
    let table: Vec<(u64, u64, bool)> = steps
        .iter()
        .map(|s| {
            (
                s["depth"].as_u64().unwrap(),
                s["latency_ns"].as_u64().unwrap() / 1_000_000,
                s["met"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(
        search["finished"].as_bool().unwrap() && search["met"].as_bool().unwrap(),
        "{table:?}"
    );
    assert!((2..20).contains(&depth), "depth {depth}: {table:?}");
    assert_eq!(num(job, "latency_depth") as u64, depth);
    assert_eq!(num(job, "latency_target"), 20e6);
    assert_eq!(num(job, "latency_window"), 500_000.0, "fio's µs");
    let last = steps.last().unwrap();
    assert!(last["last"].as_bool().unwrap() && last["met"].as_bool().unwrap());
    assert!(num(last, "latency_ns") <= 20e6, "{table:?}");
    assert!(
        steps
            .iter()
            .any(|s| s["depth"].as_u64().unwrap() > depth && !s["met"].as_bool().unwrap()),
        "a deeper depth was tried and missed: {table:?}"
    );
    // The job's results are the last window's, at the depth found, near the cap.
    let iops = num(job, "read/iops");
    assert!(
        iops > CAP * 0.5 && iops < CAP * 1.15,
        "{iops} IOPS: {table:?}"
    );
    eprintln!(
        "latency target 20 ms at p90, cap {CAP} IOPS: depth {depth}, {iops:.0} IOPS; steps (depth, p90 ms, met) {table:?}"
    );
}
