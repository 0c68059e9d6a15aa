//! Per-cgroup attribution (`[cgroups]`): each request counted for the cgroup v2 group of the
//! process that issued it, against what each group's processes wrote and /sys/block; labels
//! that stay bounded and leave with their group while groups come and go by the thousand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{Result, ensure};
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::cgroup::{Cgroup, UNIFIED_ROOT};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

use crate::block_util::{count, settled, up_to_three_times};

const IOS: &str = "stornet_block_cgroup_ios_total";
const BYTES: &str = "stornet_block_cgroup_bytes_total";
const SERVICE: &str = "stornet_block_cgroup_service_seconds_total";

/// The agent's configuration following the groups directly below `parent`.
fn config(parent: &Cgroup, max: usize) -> String {
    format!(
        "[cgroups]\npaths = [\"{}/*\"]\nmax_cgroups = {max}\n",
        parent.name()
    )
}

/// `n` direct 4 KiB writes to `dev` from block `seek` on, by a `dd` in the child group
/// `child` of `parent` (or in this process's own group).
fn writes_in(parent: Option<&Cgroup>, child: &str, dev: &Path, n: u64, seek: u64) -> Result<()> {
    let mut cmd = Command::new("dd");
    cmd.args([
        "if=/dev/zero".to_string(),
        format!("of={}", dev.display()),
        "bs=4096".into(),
        format!("count={n}"),
        format!("seek={seek}"),
        "oflag=direct".into(),
        "status=none".into(),
    ]);
    if let Some(parent) = parent {
        parent.enter_child_on_spawn(child, &mut cmd)?;
    }
    let status = cmd.status()?;
    ensure!(status.success(), "dd in {child}: {status}");
    Ok(())
}

/// The `cgroup` labels of each (device, op) in a scrape.
fn labels_by_device_op(s: &[Sample]) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for x in s.iter().filter(|x| x.name == IOS) {
        let key = (
            x.label("device").unwrap_or("").to_string(),
            x.label("op").unwrap_or("").to_string(),
        );
        out.entry(key)
            .or_default()
            .insert(x.label("cgroup").unwrap_or("").to_string());
    }
    out
}

/// Runs `body` while another thread scrapes the agent back to back (20 ms apart), handing
/// each scrape to `observe`; returns what `body` returned and how many scrapes there were.
fn scraping(
    agent: &AgentProcess,
    observe: impl Fn(&[Sample]) + Sync,
    body: impl FnOnce() -> Result<()>,
) -> (Result<()>, usize) {
    let stop = AtomicBool::new(false);
    let scrapes = AtomicUsize::new(0);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                observe(&agent.scrape_once().expect("scrape"));
                scrapes.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let result = body();
        stop.store(true, Ordering::Relaxed);
        result
    });
    (result, scrapes.into_inner())
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("agent status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

#[test]
fn block_io_of_two_cgroups_counts_for_each_and_adds_up_to_sysfs() {
    let test = "block_io_of_two_cgroups_counts_for_each_and_adds_up_to_sysfs";
    if !require_root(test) {
        return;
    }
    // Off by default: no issuer probe, no per-cgroup series.
    let plain = AgentProcess::start(&[]).expect("agent starts");
    let s = plain.scrape().unwrap();
    assert!(
        !s.iter()
            .any(|x| x.label("probe") == Some("block_issuer") || x.name == IOS),
        "without [cgroups] the issuer probe must not be attached"
    );
    drop(plain);

    let parent = Cgroup::new(UNIFIED_ROOT, "cgroup.procs", "cgsplit").expect("a v2 cgroup");
    parent.child("a").unwrap();
    parent.child("b").unwrap();
    let agent = AgentProcess::with_config(&config(&parent, 8), &[]).expect("agent starts");
    let up = sum(
        &agent.scrape().unwrap(),
        "stornet_probe_up",
        &[("probe", "block_issuer")],
    );
    assert_eq!(up, 1.0, "the issuer probe must be up with [cgroups]");
    let disk = LoopDevice::new(test, 64 << 20).expect("loop device");
    let name = parent.name();
    let (a, b) = (format!("{name}/a"), format!("{name}/b"));
    let scrape = || agent.scrape();
    up_to_three_times(test, || {
        let (before, stat0) = settled(&scrape, &disk);
        writes_in(Some(&parent), "a", &disk.dev, 300, 0)?;
        writes_in(Some(&parent), "b", &disk.dev, 200, 300)?;
        let (after, stat1) = settled(&scrape, &disk);
        let dev = disk.name.as_str();
        let delta = |metric: &str, labels: &[(&str, &str)]| {
            sum(&after, metric, labels) - sum(&before, metric, labels)
        };
        let sys = stat1.write_ios - stat0.write_ios;
        ensure!(
            sys == 500,
            "/sys/block/{dev}/stat: {sys} writes, 500 issued"
        );
        let in_a = delta(IOS, &[("device", dev), ("op", "write"), ("cgroup", &a)]);
        let in_b = delta(IOS, &[("device", dev), ("op", "write"), ("cgroup", &b)]);
        ensure!(in_a == 300.0, "{a}: {in_a} writes counted, 300 issued");
        ensure!(in_b == 200.0, "{b}: {in_b} writes counted, 200 issued");
        let bytes_a = delta(BYTES, &[("device", dev), ("op", "write"), ("cgroup", &a)]);
        ensure!(bytes_a == 300.0 * 4096.0, "{a}: {bytes_a} bytes");
        // Every cgroup (and `other`) together: the device's writes, as sysfs and the block
        // family count them.
        let all = delta(IOS, &[("device", dev), ("op", "write")]);
        let block = count(
            &after,
            "stornet_block_io_size_bytes",
            &[("device", dev), ("op", "write")],
        ) - count(
            &before,
            "stornet_block_io_size_bytes",
            &[("device", dev), ("op", "write")],
        );
        ensure!(
            all == sys as f64 && block == sys as f64,
            "all cgroups: {all} writes, the block family {block}, sysfs {sys}"
        );
        let service_a = delta(SERVICE, &[("device", dev), ("op", "write"), ("cgroup", &a)]);
        ensure!(service_a > 0.0, "{a}: no service time");
        Ok(())
    });
    // A group that goes away leaves the export at the next scrape; the other stays.
    std::fs::remove_dir(parent.path.join("a")).expect("removing group a");
    let s = agent.scrape().unwrap();
    let seen: BTreeSet<&str> = s
        .iter()
        .filter(|x| x.name == IOS)
        .filter_map(|x| x.label("cgroup"))
        .collect();
    assert!(!seen.contains(a.as_str()), "{a} still exported: {seen:?}");
    assert!(seen.contains(b.as_str()), "{b} gone: {seen:?}");
}

#[test]
fn block_cgroup_churn_keeps_labels_bounded_and_the_agent_small() {
    let test = "block_cgroup_churn_keeps_labels_bounded_and_the_agent_small";
    if !require_root(test) {
        return;
    }
    const CAP: usize = 8;
    const ROUNDS: usize = 50;
    const ALIVE: usize = 20;
    const WRITES: u64 = 2;
    let parent = Cgroup::new(UNIFIED_ROOT, "cgroup.procs", "cgchurn").expect("a v2 cgroup");
    // One malloc arena: with one per thread, the RSS steps by megabytes when another of the
    // agent's threads first serves a scrape, whenever that happens; what is measured here is
    // what the agent keeps for cgroups.
    // SAFETY: the tests of this binary run one at a time (`--test-threads=1`), and nothing
    // else reads the environment meanwhile; the agent started next inherits it.
    unsafe { std::env::set_var("MALLOC_ARENA_MAX", "1") };
    let agent = AgentProcess::with_config(&config(&parent, CAP), &[]).expect("agent starts");
    // SAFETY: as above.
    unsafe { std::env::remove_var("MALLOC_ARENA_MAX") };
    let disk = LoopDevice::new(test, 64 << 20).expect("loop device");
    let dev = disk.name.clone();
    let other = [
        ("device", dev.as_str()),
        ("op", "write"),
        ("cgroup", "other"),
    ];
    // Groups come and go, `ALIVE` at a time, each writing `WRITES` blocks.
    let churn = |rounds: std::ops::Range<usize>| -> Result<()> {
        for round in rounds {
            let names: Vec<String> = (0..ALIVE).map(|i| format!("c{round}-{i}")).collect();
            for n in &names {
                parent.child(n)?;
            }
            for (i, n) in names.iter().enumerate() {
                writes_in(Some(&parent), n, &disk.dev, WRITES, (i as u64) * WRITES)?;
            }
            for n in &names {
                std::fs::remove_dir(parent.path.join(n))?;
            }
        }
        Ok(())
    };
    // The base: the agent after the same load on a smaller scale (200 groups), which takes
    // its allocator to where it stays (the first hierarchy walks and label tables); what is
    // checked is that 1,000 groups more do not move it from there.
    let (warm, _) = scraping(&agent, |_| {}, || churn(ROUNDS..ROUNDS + 10));
    warm.expect("the warm-up");
    agent.scrape().unwrap();
    let base = agent.scrape().unwrap();
    let other0 = sum(&base, IOS, &other);
    let rss0 = rss_bytes(agent.pid());

    let most = AtomicUsize::new(0);
    // The most writes each labelled group was seen with.
    let labelled: std::sync::Mutex<BTreeMap<String, f64>> = Default::default();
    let observe = |s: &[Sample]| {
        let widest = labels_by_device_op(s)
            .values()
            .map(BTreeSet::len)
            .max()
            .unwrap_or(0);
        most.fetch_max(widest, Ordering::Relaxed);
        let mut labelled = labelled.lock().unwrap();
        for x in s.iter().filter(|x| {
            x.name == IOS
                && x.label("device") == Some(dev.as_str())
                && x.label("op") == Some("write")
                && x.label("cgroup") != Some("other")
        }) {
            let seen = labelled
                .entry(x.label("cgroup").unwrap_or("").to_string())
                .or_insert(0.0);
            *seen = f64::max(*seen, x.value);
        }
    };
    let (churned, scrapes) = scraping(&agent, observe, || churn(0..ROUNDS));
    churned.expect("the churn");
    let most = most.into_inner();
    assert!(scrapes >= 10, "only {scrapes} scrapes during the churn");
    assert!(
        most <= CAP + 1,
        "{most} cgroup labels on one device and op, the cap is {CAP} (+ other)"
    );
    // One scrape after the churn: no label of a removed group is left.
    let after = agent.scrape().unwrap();
    let left: Vec<String> = labels_by_device_op(&after)
        .into_values()
        .flatten()
        .filter(|l| l != "other")
        .collect();
    assert!(left.is_empty(), "labels of removed groups left: {left:?}");
    // At most CAP of each round's groups had a label; the writes of the others stay in
    // `other`, which never goes down. The writes seen under a label left with it: they
    // are not in `other` too.
    let other1 = sum(&after, IOS, &other);
    let floor = ((ALIVE - CAP) * ROUNDS) as f64 * WRITES as f64;
    let all = (ALIVE * ROUNDS) as f64 * WRITES as f64;
    let labelled: f64 = labelled.into_inner().unwrap().values().sum();
    assert!(
        labelled > 0.0,
        "no group was ever seen with a label of its own"
    );
    assert!(
        other1 - other0 >= floor && other1 - other0 + labelled <= all,
        "other grew by {} writes and {labelled} were seen under labels; expected at least {floor} in other, {all} in all",
        other1 - other0
    );
    let full = sum(
        &after,
        "stornet_block_unrecorded_total",
        &[("reason", "cgroup_map_full")],
    );
    assert_eq!(full, 0.0, "the cgroup map filled up");
    for _ in 0..5 {
        agent.scrape().unwrap();
    }
    let rss1 = rss_bytes(agent.pid());
    assert!(
        (rss1 as f64) <= rss0 as f64 * 1.10,
        "the agent's RSS went from {rss0} to {rss1} bytes with the churn"
    );
    eprintln!(
        "{test}: {} groups, {scrapes} scrapes, at most {most} labels per device and op, {labelled} writes seen under labels, other +{} writes, RSS {rss0} -> {rss1} bytes",
        ROUNDS * ALIVE,
        other1 - other0
    );
}
