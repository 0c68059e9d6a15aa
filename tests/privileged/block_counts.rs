use anyhow::ensure;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_reads, direct_writes};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

use crate::block_util::{bucket, count, settled, total, up_to_three_times};

const SIZE: &str = "stornet_block_io_size_bytes";

/// N direct IOs of `size` bytes on a fresh loop device, by `io`; checks the agent's ops,
/// bytes and size histogram against the delta of /sys/block/loopX/stat.
fn check(
    test: &str,
    op: &str,
    n: u64,
    size: u64,
    io: fn(&std::path::Path, u64, usize) -> anyhow::Result<()>,
) {
    if !require_root(test) {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let samples = agent.scrape().unwrap();
    for probe in ["block_issue", "block_completion", "block_requeue"] {
        let up = sum(&samples, "stornet_probe_up", &[("probe", probe)]);
        assert_eq!(up, 1.0, "{probe} probe must be up");
    }
    let disk = LoopDevice::new(test, 64 << 20).expect("loop device");
    let scrape = || agent.scrape();
    let labels = [("device", disk.name.as_str()), ("op", op)];
    up_to_three_times(test, || {
        let (before, stat0) = settled(&scrape, &disk);
        io(&disk.dev, n, size as usize)?;
        let (after, stat1) = settled(&scrape, &disk);
        let delta = |m: &dyn Fn(&[Sample]) -> f64| m(&after) - m(&before);
        let (sys_ios, sys_sectors) = match op {
            "read" => (
                stat1.read_ios - stat0.read_ios,
                stat1.read_sectors - stat0.read_sectors,
            ),
            _ => (
                stat1.write_ios - stat0.write_ios,
                stat1.write_sectors - stat0.write_sectors,
            ),
        };
        let name = &disk.name;
        ensure!(sys_ios == n, "/sys/block/{name}/stat {op} delta {sys_ios}");
        ensure!(
            sys_sectors * 512 == n * size,
            "/sys/block/{name}/stat sectors"
        );
        let ios = delta(&|s| count(s, SIZE, &labels)) as u64;
        let bytes = delta(&|s| total(s, SIZE, &labels)) as u64;
        ensure!(
            ios == sys_ios,
            "agent {op} ops on {name}: {ios}, sysfs {sys_ios}"
        );
        ensure!(
            bytes == sys_sectors * 512,
            "agent {op} bytes on {name}: {bytes}, sysfs {}",
            sys_sectors * 512
        );
        // All of them in the bucket of their size, none below.
        let le = size.to_string();
        let half = (size / 2).to_string();
        let at_size = delta(&|s| bucket(s, SIZE, &labels, &le)) as u64;
        ensure!(at_size == n, "{at_size} IOs at or below {le} bytes");
        ensure!(
            delta(&|s| bucket(s, SIZE, &labels, &half)) == 0.0,
            "IOs below {half} bytes"
        );
        // Each one timed from start to dispatch and from dispatch to completion.
        for metric in [
            "stornet_block_queue_seconds",
            "stornet_block_service_seconds",
        ] {
            let timed = delta(&|s| count(s, metric, &labels)) as u64;
            ensure!(timed == n, "{metric} count {timed}");
        }
        ensure!(delta(&|s| total(s, "stornet_block_service_seconds", &labels)) > 0.0);
        let inflight = sum(&after, "stornet_block_inflight", &[("device", name)]);
        ensure!(inflight == 0.0, "{inflight} left in flight on {name}");
        Ok(())
    });
}

/// N O_DIRECT 4 KiB writes to a loop device: exactly N write ops and N×4096 bytes for that
/// device, the same as the delta of /sys/block/loopX/stat.
#[test]
fn block_writes_match_sysfs() {
    check(
        "block_writes_match_sysfs",
        "write",
        2000,
        4096,
        direct_writes,
    );
}

/// The same for N O_DIRECT 16 KiB reads.
#[test]
fn block_reads_match_sysfs() {
    check("block_reads_match_sysfs", "read", 1500, 16384, direct_reads);
}

/// Pins the calling thread to the first CPU it may run on.
fn on_one_cpu() {
    // SAFETY: cpu_set_t is plain data; the calls take pointers to it and its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size_of_val(&set), &mut set), 0);
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU");
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(libc::sched_setaffinity(0, size_of_val(&set), &set), 0);
    }
}

/// Disks removed and others made in their place, with no scrape between: once the kernel
/// has freed the old disk's request queue (here, within two seconds of the removal), it hands
/// its id to the new disk, and with it the old disk's direct-mapped place in the agent's
/// per-CPU stats. Each new disk's reads are its own, equal to its /sys/block stat, and the
/// old disk leaves the export. (A completion probe that trusted a slot found by queue id
/// without checking its disk failed this in the second round, three runs of three.)
#[test]
fn a_disk_made_where_another_was_removed_counts_as_itself() {
    const ROUNDS: u32 = 4;
    let test = "a_disk_made_where_another_was_removed_counts_as_itself";
    if !require_root(test) {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let free = |from: u32| {
        (from..4096)
            .find(|n| !std::path::Path::new(&format!("/sys/block/loop{n}")).exists())
            .expect("a free loop device number")
    };
    let reads = |s: &[Sample], d: &LoopDevice| {
        count(s, SIZE, &[("device", d.name.as_str()), ("op", "read")]) as u64
    };
    // Every disk's IO from one CPU, where the stats of the one before are kept.
    on_one_cpu();
    let mut disk = LoopDevice::numbered(free(300), "disk-0", 16 << 20).expect("loop device");
    let mut gone: Option<String> = None;
    for round in 1..=ROUNDS {
        direct_reads(&disk.dev, 200, 4096).unwrap();
        disk.settle();
        let s = agent.scrape().unwrap();
        let kernel = disk.stat().unwrap().read_ios;
        assert_eq!(
            reads(&s, &disk),
            kernel,
            "round {round}: reads of {} by the agent and in /sys/block",
            disk.name
        );
        if let Some(gone) = &gone {
            assert!(
                !s.iter().any(|x| x.label("device") == Some(gone.as_str())),
                "{gone} is still exported after it was removed"
            );
        }
        let number: u32 = disk.name["loop".len()..].parse().unwrap();
        gone = Some(disk.name.clone());
        drop(disk);
        // The queue (and its id) is freed a moment after the removal returns.
        std::thread::sleep(std::time::Duration::from_secs(2));
        disk = LoopDevice::numbered(free(number + 1), &format!("disk-{round}"), 16 << 20)
            .expect("loop device");
    }
}
