use serde_json::Value;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::{at, num, run};
use stornet_lab::privilege::{require_root, require_tool};

fn loop_device(tag: &str) -> LoopDevice {
    let disk = LoopDevice::new(tag, 64 << 20).expect("loop device");
    // The block layer counts requests; with merging off, one IO is one request.
    disk.set_queue_attr("nomerges", "2").expect("nomerges");
    disk
}

fn ios(j: &Value, dir: &str) -> u64 {
    let jobs = at(j, "jobs").and_then(Value::as_array).expect("jobs[]");
    jobs.iter()
        .map(|job| num(job, &format!("{dir}/total_ios")) as u64)
        .sum()
}

/// loadgen's IO counts equal the device's own counts in /sys/block/loopX/stat exactly, for
/// reads, writes, a mix over two jobs, and large sequential IOs.
#[test]
fn loadgen_io_counts_match_sysfs() {
    if !require_root("loadgen_io_counts_match_sysfs") {
        return;
    }
    let disk = loop_device("lgcounts");
    let dev = disk.dev.to_str().unwrap();
    let cases: [(&str, &[&str]); 4] = [
        ("randread", &["--rw=randread", "--bs=4k", "--iodepth=16"]),
        ("randwrite", &["--rw=randwrite", "--bs=4k", "--iodepth=16"]),
        (
            "randrw",
            &[
                "--rw=randrw",
                "--rwmixread=70",
                "--bs=4k",
                "--iodepth=8",
                "--numjobs=2",
            ],
        ),
        ("read", &["--rw=read", "--bs=128k", "--iodepth=8"]),
    ];
    for (name, opts) in cases {
        let mut args = vec![
            "--name",
            name,
            "--filename",
            dev,
            "--size=32M",
            "--output-format=json",
        ];
        args.extend_from_slice(opts);
        let before = disk.stat().unwrap();
        let r = run(&args).unwrap();
        let after = disk.stat().unwrap();
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        let j = r.json().unwrap();
        let probe = num(&j, "loadgen/safety_probe_reads") as u64;
        let (reads, writes) = (ios(&j, "read"), ios(&j, "write"));
        assert!(reads + writes > 0, "{name}: no IO reported");
        assert_eq!(
            after.read_ios - before.read_ios,
            reads + probe,
            "{name}: reads in /sys/block/{}/stat vs loadgen ({probe} safety-check reads)",
            disk.name
        );
        assert_eq!(
            after.write_ios - before.write_ios,
            writes,
            "{name}: writes in /sys/block/{}/stat vs loadgen",
            disk.name
        );
    }
}

/// loadgen's JSON has the fields fio tooling reads, at the same paths and of the same types
/// as fio's own JSON for the same job, and both moved the same number of bytes.
#[test]
fn loadgen_json_reads_like_fio() {
    if !require_root("loadgen_json_reads_like_fio")
        || !require_tool("loadgen_json_reads_like_fio", "fio")
    {
        return;
    }
    let disk = loop_device("lgjson");
    let dev = disk.dev.to_str().unwrap();
    let job = [
        "--name=fiocompat",
        "--ioengine=io_uring",
        "--direct=1",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=8",
        "--size=16M",
        "--output-format=json",
    ];
    let file = format!("--filename={dev}");
    let mut args = job.to_vec();
    args.push(&file);
    let lg = run(&args).unwrap();
    assert_eq!(lg.code, Some(0), "{}", lg.stderr);
    let lg = lg.json().unwrap();
    let out = std::process::Command::new("fio")
        .args(&args)
        .output()
        .expect("fio runs");
    assert!(
        out.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fio: Value = serde_json::from_slice(&out.stdout).expect("fio JSON");

    let paths = [
        "fio version",
        "timestamp",
        "jobs/0/jobname",
        "jobs/0/groupid",
        "jobs/0/job options/bs",
        "jobs/0/job options/rw",
        "jobs/0/job options/iodepth",
        "jobs/0/read/io_bytes",
        "jobs/0/read/io_kbytes",
        "jobs/0/read/bw",
        "jobs/0/read/bw_bytes",
        "jobs/0/read/iops",
        "jobs/0/read/runtime",
        "jobs/0/read/total_ios",
        "jobs/0/read/slat_ns/mean",
        "jobs/0/read/clat_ns/mean",
        "jobs/0/read/clat_ns/stddev",
        "jobs/0/read/clat_ns/max",
        "jobs/0/read/clat_ns/percentile/50.000000",
        "jobs/0/read/clat_ns/percentile/99.000000",
        "jobs/0/read/clat_ns/percentile/99.990000",
        "jobs/0/read/lat_ns/mean",
        "jobs/0/read/lat_ns/min",
        "jobs/0/read/bw_mean",
        "jobs/0/read/iops_mean",
        "jobs/0/write/io_bytes",
        "jobs/0/write/iops",
        "jobs/0/write/clat_ns/N",
        "jobs/0/job_runtime",
        "jobs/0/usr_cpu",
        "jobs/0/sys_cpu",
    ];
    for p in paths {
        let (a, b) = (at(&lg, p), at(&fio, p));
        assert!(b.is_some(), "fio itself has no {p}: the path list is wrong");
        let a = a.unwrap_or_else(|| panic!("loadgen JSON lacks {p}"));
        let b = b.unwrap();
        assert_eq!(a.is_number(), b.is_number(), "{p}: loadgen {a}, fio {b}");
        assert_eq!(a.is_string(), b.is_string(), "{p}: loadgen {a}, fio {b}");
    }
    assert_eq!(at(&lg, "jobs/0/jobname").unwrap(), "fiocompat");
    assert_eq!(at(&lg, "jobs/0/job options/bs").unwrap(), "4k");
    assert_eq!(num(&lg, "jobs/0/read/io_bytes"), (16 << 20) as f64);
    assert_eq!(
        num(&lg, "jobs/0/read/io_bytes"),
        num(&fio, "jobs/0/read/io_bytes")
    );
    assert_eq!(num(&lg, "jobs/0/read/total_ios"), 4096.0);
    let p50 = num(&lg, "jobs/0/read/clat_ns/percentile/50.000000");
    let p99 = num(&lg, "jobs/0/read/clat_ns/percentile/99.000000");
    assert!(p50 > 0.0 && p50 <= p99, "p50 {p50} p99 {p99}");
    // loadgen's own keys sit beside fio's.
    assert!(at(&lg, "jobs/0/read/intended_lat_ns/percentile/99.000000").is_some());
    assert!(at(&lg, "loadgen/points/0/timeline/0/read/lat_ns/p99").is_some());
    assert!(num(&lg, "loadgen/points/0/cpu/per_io_us") > 0.0);
}

/// `ioengine=null` does no IO: a job of 8,192 writes "to" a loop device leaves its
/// /sys/block stat unchanged (and loadgen makes no safety-check reads of a device it does
/// not open), while the same job with psync moves the counts by its writes.
#[test]
fn ioengine_null_does_no_device_io() {
    if !require_root("ioengine_null_does_no_device_io") {
        return;
    }
    let disk = loop_device("lgnull");
    let dev = disk.dev.to_str().unwrap();
    for (engine, size, counted) in [("null", "32M", false), ("psync", "1M", true)] {
        let engine_arg = format!("--ioengine={engine}");
        let size_arg = format!("--size={size}");
        let args = [
            "--name=n",
            "--filename",
            dev,
            &engine_arg,
            &size_arg,
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--output-format=json",
        ];
        let before = disk.stat().unwrap();
        let r = run(&args).unwrap();
        let after = disk.stat().unwrap();
        assert_eq!(r.code, Some(0), "{engine}: {}", r.stderr);
        let j = r.json().unwrap();
        let writes = ios(&j, "write");
        let device = (
            after.read_ios - before.read_ios,
            after.write_ios - before.write_ios,
        );
        let probe = num(&j, "loadgen/safety_probe_reads") as u64;
        if counted {
            assert_eq!(
                device,
                (probe, writes),
                "{engine}: /sys/block/{}/stat",
                disk.name
            );
        } else {
            assert_eq!(writes, 8192, "{engine}: size / bs");
            assert_eq!(device, (0, 0), "{engine}: /sys/block/{}/stat", disk.name);
        }
    }
}
