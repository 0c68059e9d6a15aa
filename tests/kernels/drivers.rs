//! Each real block driver of the guest, against the kernel's own counts: exact reads, writes
//! and flushes against `/sys/block/<dev>/stat`, queue and service time for every one of them,
//! and the in-flight depth within the driver's tags (at them, where 64 outstanding IOs meet
//! a 31-deep device).

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{
    AlignedBuf, Disk, DiskStat, direct_reads, direct_writes, open_direct, settled,
};
use stornet_lab::metrics::{Sample, count, sum, total};

use stornet_lab::guest::{self, GuestDisk};

const WRITES: u64 = 1000;
const READS: u64 = 500;
const FLUSHES: u64 = 20;
const OUTSTANDING: usize = 64;
const SIZE: &str = "stornet_block_io_size_bytes";
const QUEUE: &str = "stornet_block_queue_seconds";
const SERVICE: &str = "stornet_block_service_seconds";
const DEPTH: &str = "stornet_block_inflight_at_issue";

/// The disk of `driver`, and the agent watching it.
fn setup(driver: &str) -> (GuestDisk, Disk, &'static AgentProcess) {
    let g = guest::disk(driver);
    let disk = Disk::existing(&g.name).expect("the guest's disk");
    (g, disk, crate::shared::agent())
}

/// `FLUSHES` times: one O_DIRECT write, then fdatasync (a cache flush where the device has a
/// volatile write cache).
fn write_and_flush(disk: &Disk) {
    let f = open_direct(&disk.dev, true).expect("open");
    let buf = AlignedBuf::new(4096, 0x5a);
    for i in 0..FLUSHES {
        f.write_all_at(buf.as_slice(), (1 << 20) + i * 4096)
            .expect("write");
        f.sync_data().expect("fdatasync");
    }
}

pub fn counts_match_sysfs(driver: &str) {
    let (_g, disk, agent) = setup(driver);
    let scrape = || agent.scrape();
    let (before, s0) = settled(&scrape, &disk);
    direct_writes(&disk.dev, WRITES, 4096).expect("writes");
    direct_reads(&disk.dev, READS, 16384).expect("reads");
    write_and_flush(&disk);
    let (after, s1) = settled(&scrape, &disk);
    let name = disk.name.as_str();
    let d = |f: &dyn Fn(&[Sample]) -> f64| (f(&after) - f(&before)) as u64;
    let sys = |f: fn(&DiskStat) -> u64| f(&s1) - f(&s0);

    // Nothing but this test touched the disk. With a write-back cache each fdatasync sends an
    // empty write that carries the flush down; the kernel counts it as a write (of no
    // sectors), the agent does not (it is no device IO: docs/metrics.md), and both count
    // the flush.
    let cache = disk.attr("queue/write_cache").unwrap_or_default();
    let flushes = sys(|s| s.flush_ios);
    let carriers = if cache == "write back" {
        assert_eq!(
            flushes, FLUSHES,
            "{name}: sysfs flushes with a write-back cache"
        );
        FLUSHES
    } else {
        assert_eq!(flushes, 0, "{name}: flushes on a {cache} device");
        0
    };
    assert_eq!(
        sys(|s| s.write_ios),
        WRITES + FLUSHES + carriers,
        "{name}: sysfs writes"
    );
    assert_eq!(sys(|s| s.read_ios), READS, "{name}: sysfs reads");
    for (op, ios, sectors) in [
        ("write", WRITES + FLUSHES, sys(|s| s.write_sectors)),
        ("read", READS, sys(|s| s.read_sectors)),
        ("flush", flushes, 0),
    ] {
        let l = [("device", name), ("op", op)];
        assert_eq!(
            d(&|s| count(s, SIZE, &l)),
            ios,
            "{name}: agent {op} requests vs sysfs"
        );
        if op != "flush" {
            assert_eq!(
                d(&|s| total(s, SIZE, &l)),
                sectors * 512,
                "{name}: agent {op} bytes vs sysfs"
            );
        }
        for m in [QUEUE, SERVICE] {
            assert_eq!(d(&|s| count(s, m, &l)), ios, "{name}: {m} count for {op}");
        }
        if ios > 0 {
            let spent = total(&after, SERVICE, &l) - total(&before, SERVICE, &l);
            assert!(spent > 0.0, "{name}: {op} service time");
        }
    }
    assert_eq!(
        sum(&after, "stornet_block_inflight", &[("device", name)]),
        0.0,
        "{name}: left in flight"
    );
    // The depth at dispatch is opt-in: the default configuration exports none.
    assert!(
        !after.iter().any(|s| s.name.starts_with(DEPTH)),
        "{name}: {DEPTH} exported by default"
    );
    // Every dispatch stamp the probes took was used: none is left in the map. (A stamp left
    // behind would mean the agent mispredicted whether the kernel stamps dispatches.)
    assert_eq!(
        sum(
            &after,
            "stornet_agent_map_entries",
            &[("map", "BLOCK_STAMPS")]
        ),
        0.0,
        "dispatch stamps left behind"
    );
}

/// The smallest exported bucket bound of `metric` at or above `limit`.
fn bound_at_or_above(s: &[Sample], metric: &str, device: &str, limit: u64) -> String {
    let name = format!("{metric}_bucket");
    let mut les: Vec<f64> = s
        .iter()
        .filter(|x| x.name == name && x.label("device") == Some(device))
        .filter_map(|x| x.label("le")?.parse().ok())
        .filter(|&le: &f64| le >= limit as f64)
        .collect();
    les.sort_by(f64::total_cmp);
    let le = les
        .first()
        .unwrap_or_else(|| panic!("no {name} bound ≥ {limit}"));
    let text = s
        .iter()
        .filter(|x| x.name == name && x.label("device") == Some(device))
        .filter_map(|x| x.label("le"))
        .find(|l| l.parse::<f64>().ok() == Some(*le))
        .expect("bound");
    text.to_string()
}

/// In-flight counts sampled during a run: the agent's gauge and the kernel's own count
/// (`/sys/block/<dev>/inflight`). A scrape takes a while in an emulated guest and the count
/// moves meanwhile, so the two are compared with the limit, not with each other.
#[derive(Debug, Default)]
struct Samples {
    agent: Vec<u64>,
    kernel: Vec<u64>,
    /// Scrapes that did not answer in time.
    skipped: usize,
}

/// The middle sample: the agent reads its gauge while its own scrape holds one of the guest's
/// CPUs from the reader threads, so a single sample can fall short of the queue's real depth.
fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// `OUTSTANDING` threads keep one O_DIRECT 4 KiB read each in flight for `run`, while the
/// agent's and the kernel's in-flight counts are sampled. Returns the reads done.
/// In-flight samples taken during the reads, at the least.
const MIN_SAMPLES: usize = 9;

fn outstanding_reads(disk: &Disk, agent: &AgentProcess, run: Duration) -> (u64, Samples) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..OUTSTANDING as u64)
        .map(|t| {
            let (dev, stop, done) = (disk.dev.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let f = open_direct(&dev, false).expect("open");
                let mut buf = AlignedBuf::new(4096, 0);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let offset = ((t * 1_000_003 + i * 7919) % 32768) * 4096;
                    f.read_exact_at(buf.as_mut_slice(), offset).expect("read");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    let mut samples = Samples::default();
    // Let every thread get its first read in.
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    // At least a few samples, however slowly a starved guest answers.
    while start.elapsed() < run || samples.agent.len() < MIN_SAMPLES {
        // A starved guest can take longer than the scrape timeout: that sample is skipped.
        let Ok(s) = agent.scrape() else {
            samples.skipped += 1;
            assert!(samples.skipped < 10, "no scrape answered during the run");
            continue;
        };
        let k: u64 = disk
            .attr("inflight")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse::<u64>().ok())
            .sum();
        samples
            .agent
            .push(sum(&s, "stornet_block_inflight", &[("device", &disk.name)]) as u64);
        samples.kernel.push(k);
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("reader");
    }
    (done.load(Ordering::Relaxed), samples)
}

/// In-flight depth under 64 outstanding reads, against the driver's tags. With `saturates`
/// (fewer tags than outstanding IOs), the depth must sit at the limit.
pub fn inflight_within_tags(driver: &str, saturates: bool) {
    let (g, disk, _) = setup(driver);
    let agent = crate::shared::agent_with_depth();
    disk.set_queue_attr("scheduler", "none")
        .expect("scheduler none");
    let name = disk.name.clone();
    let nr_requests: u64 = disk.attr("queue/nr_requests").unwrap().parse().unwrap();
    assert_eq!(
        nr_requests, g.tags,
        "{name}: nr_requests without a scheduler is the driver's tag count"
    );
    let hw_queues = disk.hw_queues().unwrap() as u64;
    assert!(
        hw_queues >= g.queues,
        "{name}: {hw_queues} hardware queues, {} configured",
        g.queues
    );
    let limit = g.tags * g.queues;
    let scrape = || agent.scrape();
    let (before, s0) = settled(&scrape, &disk);
    let (reads, samples) = outstanding_reads(&disk, agent, Duration::from_secs(3));
    let (after, s1) = settled(&scrape, &disk);
    let l = [("device", name.as_str())];
    let d = |f: &dyn Fn(&[Sample]) -> f64| f(&after) - f(&before);
    assert_eq!(
        s1.read_ios - s0.read_ios,
        reads,
        "{name}: sysfs reads vs the test's"
    );
    // What the issue probe recorded, and the runs the kernel says it skipped (a program run
    // that would nest in another of its runs on the same CPU), add up to every read.
    let n = d(&|s| count(s, DEPTH, &l));
    let missed = d(&|s| {
        sum(
            s,
            "stornet_agent_probe_misses_total",
            &[("probe", "block_issue")],
        )
    });
    assert_eq!(
        (n + missed) as u64,
        reads,
        "{name}: depths recorded ({n}) and issue runs missed ({missed})"
    );
    let depth_mean = d(&|s| total(s, DEPTH, &l)) / n;
    let le = bound_at_or_above(&after, DEPTH, &name, limit);
    let within = d(&|s| {
        sum(
            s,
            &format!("{DEPTH}_bucket"),
            &[("device", &name), ("le", &le)],
        )
    });
    let agent_max = samples.agent.iter().copied().max().unwrap_or(0);
    let kernel_max = samples.kernel.iter().copied().max().unwrap_or(0);
    let (agent_median, kernel_median) = (median(&samples.agent), median(&samples.kernel));
    eprintln!(
        "{name}: {reads} reads, {} tags x {} queues; depth at issue mean {depth_mean:.1}; \
         in flight sampled {} times ({} scrapes timed out): agent {:?} median {agent_median}, \
         kernel {:?} median {kernel_median}; issue runs missed {missed}",
        g.tags,
        g.queues,
        samples.agent.len(),
        samples.skipped,
        samples.agent,
        samples.kernel,
    );
    assert_eq!(within, n, "{name}: depths above le={le} (limit {limit})");
    assert!(
        depth_mean <= limit as f64,
        "{name}: mean depth {depth_mean} above {limit}"
    );
    assert!(
        (1..=limit).contains(&agent_max),
        "{name}: agent in flight {agent_max}, limit {limit}"
    );
    assert!(kernel_max <= limit, "{name}: kernel in flight {kernel_max}");
    assert_eq!(
        sum(
            &after,
            "stornet_block_queue_limit",
            &[("device", &name), ("limit", "nr_requests")]
        ),
        g.tags as f64,
        "{name}: exported nr_requests"
    );
    if saturates {
        assert!(
            agent_median as f64 >= 0.9 * limit as f64 && kernel_median as f64 >= 0.9 * limit as f64,
            "{name}: {OUTSTANDING} outstanding on {limit} tags, in flight median {agent_median} \
             (kernel {kernel_median})"
        );
        assert_eq!(agent_max, limit, "{name}: agent in flight at the limit");
    }
}

/// One module per driver, so that a failure names the driver (and the tier names the kernel).
macro_rules! driver {
    ($driver:ident, saturates: $saturates:expr) => {
        mod $driver {
            #[test]
            fn counts_match_sysfs() {
                super::counts_match_sysfs(stringify!($driver));
            }

            #[test]
            fn inflight_within_tags() {
                super::inflight_within_tags(stringify!($driver), $saturates);
            }
        }
    };
}

driver!(nvme, saturates: false);
driver!(virtio_blk, saturates: false);
driver!(ahci, saturates: false);
driver!(null_blk, saturates: true);
