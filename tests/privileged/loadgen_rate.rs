use std::process::Stdio;

use serde_json::Value;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::cgroup::BlkioCgroup;
use stornet_lab::loadgen::{Run, at, command, num};
use stornet_lab::privilege::require_root;

/// --rate_iops above what the device can do (a loop device capped at 400 read IOPS by a
/// cgroup blkio throttle): the achieved IOPS stay at the cap, and because latency is timed
/// from each IO's intended start, the reported p99 grows over the run as the backlog grows,
/// while the completion latency (what a coordinated-omission tool reports) does not.
#[test]
fn loadgen_open_loop_latency_grows_when_rate_exceeds_capacity() {
    if !require_root("loadgen_open_loop_latency_grows_when_rate_exceeds_capacity") {
        return;
    }
    const CAP: f64 = 400.0;
    let disk = LoopDevice::new("lgrate", 64 << 20).expect("loop device");
    let cg = BlkioCgroup::new("lgrate").expect("blkio cgroup");
    cg.throttle_iops(&disk.devnum().unwrap(), true, CAP as u64)
        .expect("throttle");
    let dev = disk.dev.to_str().unwrap();
    let mut cmd = command(&[
        "--filename",
        dev,
        "--rw=randread",
        "--bs=4k",
        "--iodepth=16",
        "--rate_iops=1200",
        "--time_based",
        "--runtime=5",
        "--output-format=json",
    ]);
    cmd.stdin(Stdio::null());
    cg.enter_on_spawn(&mut cmd).unwrap();
    let before = disk.stat().unwrap();
    let r = Run::from_output(cmd.output().expect("loadgen runs"));
    let after = disk.stat().unwrap();
    drop(cg);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();

    let iops = num(&j, "jobs/0/read/iops");
    assert!(iops < CAP * 1.15, "achieved {iops} IOPS, throttle {CAP}");
    assert!(iops > CAP * 0.5, "achieved {iops} IOPS, throttle {CAP}");
    let device = (after.read_ios - before.read_ios) as f64;
    assert!(
        device < CAP * 6.5,
        "the device completed {device} reads in ~5 s"
    );

    let rows = at(&j, "loadgen/points/0/timeline")
        .and_then(Value::as_array)
        .expect("timeline");
    assert!(rows.len() >= 4, "{} rows", rows.len());
    let p99: Vec<f64> = rows.iter().map(|r| num(r, "read/lat_ns/p99")).collect();
    let first = p99[0];
    let last = p99[rows.len() - 1];
    assert!(last > 2.0 * first, "p99 per interval {p99:?}");
    assert!(
        p99.windows(2).filter(|w| w[1] > w[0]).count() >= rows.len() - 2,
        "p99 grows over the run: {p99:?}"
    );
    let total = num(&j, "jobs/0/read/intended_lat_ns/percentile/99.000000");
    let clat = num(&j, "jobs/0/read/clat_ns/percentile/99.000000");
    assert!(
        total > 5.0 * clat,
        "open-loop p99 {total} vs completion p99 {clat}"
    );
}
