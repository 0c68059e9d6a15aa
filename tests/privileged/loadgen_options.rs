//! fio's options as loadgen runs them, checked against the kernel's own counts
//! (`/sys/block/*/stat`), the data on the device, and the agent.

use anyhow::ensure;
use serde_json::Value;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{DiskStat, LoopDevice, read_direct};
use stornet_lab::fs::TempDir;
use stornet_lab::loadgen::command;
use stornet_lab::loadgen::run;
use stornet_lab::privilege::{require_root, require_tool};

use crate::block_util::{count, settled, up_to_three_times};

fn disk(tag: &str, size: u64) -> LoopDevice {
    let d = LoopDevice::new(tag, size).expect("loop device");
    // With merging off, one IO is one request.
    d.set_queue_attr("nomerges", "2").expect("nomerges");
    d
}

/// Runs loadgen with JSON output; returns its JSON and the device's counter deltas.
fn measured(d: &LoopDevice, args: &[&str]) -> (Value, DiskStat) {
    let dev = format!("--filename={}", d.dev.display());
    let mut all = vec![
        "--name=opt",
        dev.as_str(),
        "--output-format=json",
        "--force-destroy-data",
    ];
    all.extend_from_slice(args);
    d.settle();
    let before = d.stat().unwrap();
    let r = run(&all).unwrap();
    assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
    let after = d.stat().unwrap();
    let delta = DiskStat {
        read_ios: after.read_ios - before.read_ios,
        read_sectors: after.read_sectors - before.read_sectors,
        write_ios: after.write_ios - before.write_ios,
        write_sectors: after.write_sectors - before.write_sectors,
        in_flight: 0,
        discard_ios: after.discard_ios - before.discard_ios,
        flush_ios: after.flush_ios - before.flush_ios,
    };
    (r.json().unwrap(), delta)
}

fn n(j: &Value, path: &str) -> u64 {
    stornet_lab::loadgen::num(j, path) as u64
}

/// Whether the 4 KiB blocks of `[from, to)` of the device are all zero (never written).
fn zero(d: &LoopDevice, from: u64, to: u64) -> bool {
    read_direct(&d.dev, from, (to - from) as usize)
        .unwrap()
        .iter()
        .all(|&b| b == 0)
}

/// `--offset`, `--offset_increment`, `--size`, `--io_size`, `--loops` and `--number_ios` hit
/// exactly the range and count asked: the device counts the IOs and sectors, and only the
/// region asked for holds data afterwards.
#[test]
fn loadgen_offsets_sizes_and_counts_are_exact() {
    if !require_root("loadgen_offsets_sizes_and_counts_are_exact") {
        return;
    }
    let d = disk("lgopts", 32 << 20);
    // Two clones: [8M, 12M) and [20M, 24M).
    let (j, k) = measured(
        &d,
        &[
            "--rw=write",
            "--bs=64k",
            "--offset=8M",
            "--offset_increment=12M",
            "--size=4M",
            "--numjobs=2",
            "--iodepth=4",
        ],
    );
    let writes: u64 = (0..2)
        .map(|i| n(&j, &format!("jobs/{i}/write/total_ios")))
        .sum();
    assert_eq!(writes, 2 * 64);
    assert_eq!(k.write_ios, writes, "writes in sysfs");
    assert_eq!(k.write_sectors, 8 << 20 >> 9, "sectors written");
    assert!(zero(&d, 0, 8 << 20), "nothing before the first offset");
    assert!(!zero(&d, 8 << 20, 9 << 20) && !zero(&d, 11 << 20, 12 << 20));
    assert!(
        zero(&d, 12 << 20, 20 << 20),
        "nothing between the clones' regions"
    );
    assert!(!zero(&d, 20 << 20, 21 << 20) && !zero(&d, 23 << 20, 24 << 20));
    assert!(
        zero(&d, 24 << 20, 32 << 20),
        "nothing after the second region"
    );

    let (j, k) = measured(&d, &["--rw=randread", "--number_ios=777", "--iodepth=8"]);
    assert_eq!(n(&j, "jobs/0/read/total_ios"), 777);
    assert_eq!(k.read_ios, 777, "reads in sysfs");

    // io_size beyond size goes over the region again; loops repeats it all.
    let (j, k) = measured(
        &d,
        &[
            "--rw=read",
            "--bs=128k",
            "--size=4M",
            "--io_size=6M",
            "--loops=2",
        ],
    );
    assert_eq!(n(&j, "jobs/0/read/io_bytes"), 12 << 20);
    assert_eq!(k.read_sectors, 12 << 20 >> 9, "sectors read");
    assert_eq!(k.read_ios, 96);
}

/// `--bssplit=4k/70:64k/30` over 10,000 writes: the device's own counts of requests and
/// sectors give the number of each size, within 2% of the shares asked.
#[test]
fn loadgen_bssplit_shares_match_the_device() {
    if !require_root("loadgen_bssplit_shares_match_the_device") {
        return;
    }
    let d = disk("lgbssplit", 64 << 20);
    let (j, k) = measured(
        &d,
        &[
            "--rw=randwrite",
            "--bssplit=4k/70:64k/30",
            "--io_size=10g",
            "--number_ios=10000",
            "--iodepth=16",
        ],
    );
    assert_eq!(n(&j, "jobs/0/write/total_ios"), 10_000);
    assert_eq!(k.write_ios, 10_000);
    let bytes = k.write_sectors * 512;
    assert_eq!(bytes, n(&j, "jobs/0/write/io_bytes"));
    // n4 + n64 = 10,000 and 4k·n4 + 64k·n64 = bytes.
    let n64 = (bytes - 4096 * 10_000) / (65536 - 4096);
    let share = n64 as f64 / 10_000.0;
    assert!((share - 0.30).abs() <= 0.02, "64k share {share}");
    eprintln!("bssplit 4k/70:64k/30: the device saw {n64} of 10000 writes of 64k");
}

/// `--fdatasync=1`: a flush after every write but the last (as fio: the job ends with the
/// write that completes its size), counted by the kernel (`/sys/block/*/stat`) and by the
/// agent (`op="flush"`). The empty write that carries each flush is in the kernel's write
/// count too. With `--ioengine=psync` as well (the etcd disk check), and `--end_fsync` adds
/// one flush at the end.
#[test]
fn loadgen_fdatasync_flushes_once_per_write() {
    let test = "loadgen_fdatasync_flushes_once_per_write";
    if !require_root(test) {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let d = disk("lgfdsync", 16 << 20);
    let labels = [("device", d.name.as_str()), ("op", "flush")];
    let scrape = || agent.scrape();
    for (engine, end) in [("io_uring", false), ("psync", true)] {
        up_to_three_times(test, || {
            let (before, _) = settled(&scrape, &d);
            let eng = format!("--ioengine={engine}");
            let mut args = vec!["--rw=write", "--bs=4k", "--size=1M", "--fdatasync=1", &eng];
            if end {
                args.push("--end_fsync");
            }
            let (j, k) = measured(&d, &args);
            let (after, _) = settled(&scrape, &d);
            let writes = n(&j, "jobs/0/write/total_ios");
            let syncs = n(&j, "jobs/0/sync/total_ios");
            ensure!(writes == 256, "{engine}: {writes} writes");
            ensure!(syncs == 255, "{engine}: {syncs} syncs");
            let flushes = syncs + u64::from(end);
            ensure!(
                k.flush_ios == flushes,
                "{engine}: sysfs flushes {}, loadgen {flushes}",
                k.flush_ios
            );
            ensure!(
                k.write_ios == writes + flushes,
                "{engine}: sysfs writes {}",
                k.write_ios
            );
            let agent_flushes = count(&after, "stornet_block_io_size_bytes", &labels)
                - count(&before, "stornet_block_io_size_bytes", &labels);
            ensure!(
                agent_flushes as u64 == flushes,
                "{engine}: the agent counted {agent_flushes} flushes, sysfs {flushes}"
            );
            ensure!(n(&j, "jobs/0/sync/lat_ns/N") == syncs);
            Ok(())
        });
    }
}

/// `--filename=a:b` takes turns between the files, each with half of `--size`;
/// `--ioengine=sync` counts what the device counts; a zoned distribution puts every write
/// in its zone.
#[test]
fn loadgen_files_engines_and_zones() {
    if !require_root("loadgen_files_engines_and_zones") {
        return;
    }
    let (a, b) = (disk("lgfilea", 16 << 20), disk("lgfileb", 16 << 20));
    let files = format!("--filename={}:{}", a.dev.display(), b.dev.display());
    let (sa, sb) = (a.stat().unwrap(), b.stat().unwrap());
    let r = run(&[
        "--name=two",
        &files,
        "--rw=randwrite",
        "--bs=4k",
        "--size=8M",
        "--iodepth=4",
        "--force-destroy-data",
        "--output-format=json",
    ])
    .unwrap();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();
    let (da, db) = (
        a.stat().unwrap().write_ios - sa.write_ios,
        b.stat().unwrap().write_ios - sb.write_ios,
    );
    assert_eq!(n(&j, "jobs/0/write/total_ios"), 2048, "8M in 4k");
    assert_eq!((da, db), (1024, 1024), "each file gets its turn");
    assert!(
        zero(&a, 4 << 20, 16 << 20),
        "each file's region is half the size"
    );

    let (j, k) = measured(
        &a,
        &["--rw=randread", "--ioengine=sync", "--number_ios=500"],
    );
    assert_eq!((n(&j, "jobs/0/read/total_ios"), k.read_ios), (500, 500));
    assert_eq!(
        n(&j, "jobs/0/read/slat_ns/N"),
        0,
        "no slat with a sync engine, as fio"
    );

    // All writes in the first 25% of the region.
    let (_, k) = measured(
        &b,
        &[
            "--rw=randwrite",
            "--offset=8M",
            "--size=8M",
            "--random_distribution=zoned:100/25:0/75",
            "--number_ios=300",
        ],
    );
    assert_eq!(k.write_ios, 300);
    assert!(
        zero(&b, 10 << 20, 16 << 20),
        "no write outside the hot zone"
    );
}

/// The `to_submit` argument of every `io_uring_enter` in an strace log.
fn submissions(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|l| {
            l.split_once("io_uring_enter(")?
                .1
                .split(", ")
                .nth(1)?
                .parse()
                .ok()
        })
        .collect()
}

/// `--iodepth_batch_submit=N` (fio's default 1) submits at most N IOs per `io_uring_enter`,
/// counted by strace from the system calls themselves (one timer may go with the last
/// batch); 0 submits the whole depth at once. Every IO is submitted once: the sum of the
/// calls' counts is the device's request count plus the few interval timers.
#[test]
fn loadgen_submits_in_fio_batches() {
    let test = "loadgen_submits_in_fio_batches";
    if !require_root(test) || !require_tool(test, "strace") {
        return;
    }
    let d = disk("lgbatch", 64 << 20);
    let dir = TempDir::new("lgbatch").unwrap();
    let ios = 20_000u64;
    for (batch, depth) in [(1u64, 32u64), (8, 32), (0, 32)] {
        let log = dir.path.join(format!("strace-{batch}"));
        let dev = format!("--filename={}", d.dev.display());
        let b = format!("--iodepth_batch_submit={batch}");
        let n = format!("--number_ios={ios}");
        let q = format!("--iodepth={depth}");
        let lg = command(&[
            "--name=batch",
            &dev,
            "--rw=randread",
            "--bs=4k",
            &q,
            &n,
            &b,
            // Ends at --number_ios, not at the end of the device.
            "--time_based",
            "--runtime=60",
            "--output-format=json",
        ]);
        d.settle();
        let before = d.stat().unwrap();
        let out = std::process::Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=io_uring_enter", "-o"])
            .arg(&log)
            .arg(lg.get_program())
            .args(lg.get_args())
            .output()
            .expect("strace runs");
        assert!(
            out.status.success(),
            "batch {batch}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let reads = d.stat().unwrap().read_ios - before.read_ios;
        assert_eq!(reads, ios, "batch {batch}: the device's reads");
        let calls = submissions(&std::fs::read_to_string(&log).unwrap());
        let sum: u64 = calls.iter().sum();
        let max = calls.iter().copied().max().unwrap_or(0);
        assert!(
            (ios..ios + 100).contains(&sum),
            "batch {batch}: {sum} submitted for {ios} IOs"
        );
        let cap = if batch == 0 { depth } else { batch };
        assert!(
            max <= cap + 1,
            "batch {batch}: one call submitted {max} (at most {cap} IOs and a timer)"
        );
        // The first fill of the depth happens before anything can complete.
        assert!(
            max >= cap,
            "batch {batch}: no call submitted {cap}, at most {max}"
        );
        let calls_with_ios = calls.iter().filter(|&&c| c > 0).count() as u64;
        assert!(
            calls_with_ios >= ios / (cap + 1),
            "batch {batch}: {calls_with_ios} submitting calls for {ios} IOs"
        );
    }
}
