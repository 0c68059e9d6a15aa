use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, Zram, direct_reads, direct_writes};
use stornet_lab::metrics::sum;
use stornet_lab::privilege::require_root;

use crate::block_util::{count, settled};

/// With the dispatch probes off, the completion probe alone still counts and times every
/// request from the kernel's own stamps; only the depth at dispatch is missing.
#[test]
fn block_completion_probe_works_alone() {
    if !require_root("block_completion_probe_works_alone") {
        return;
    }
    let disk = LoopDevice::new("blockalone", 16 << 20).expect("loop device");
    let config = format!(
        "[probes]\ndisable = [\"block_issue\", \"block_requeue\"]\n[block]\ndevices_include = [{:?}]\n",
        disk.name
    );
    let agent = AgentProcess::with_config(&config, &[]).unwrap();
    let s = agent.scrape().unwrap();
    assert_eq!(
        sum(&s, "stornet_probe_up", &[("probe", "block_completion")]),
        1.0
    );
    direct_reads(&disk.dev, 400, 4096).unwrap();
    disk.settle();
    let s = agent.scrape().unwrap();
    let labels = [("device", disk.name.as_str()), ("op", "read")];
    let reads = count(&s, "stornet_block_io_size_bytes", &labels);
    let timed = count(&s, "stornet_block_service_seconds", &labels);
    assert!((392.0..=400.0).contains(&reads), "{reads} reads");
    assert_eq!(timed, reads, "every read timed from the kernel's stamps");
    assert_eq!(
        count(
            &s,
            "stornet_block_inflight_at_issue",
            &[("device", &disk.name)]
        ),
        0.0,
        "no depth without the issue probe"
    );
}

/// `stornet_probe_attached{probe}`.
fn attached(s: &[stornet_lab::metrics::Sample], probe: &str) -> f64 {
    sum(s, "stornet_probe_attached", &[("probe", probe)])
}

/// The probes that attach on demand follow the devices the agent reports. The dispatch probe
/// stays detached while the kernel stamps the device's dispatches itself (its queue has
/// writeback throttling, hence statistics) and every read is still timed; the bio probes
/// attach while a bio-based device with sectors exists (a zram device of the test's own),
/// count its IO as sysfs does, and detach when it has no sectors left.
#[test]
fn on_demand_probes_follow_the_devices() {
    if !require_root("on_demand_probes_follow_the_devices") {
        return;
    }
    let disk = LoopDevice::new("ondemand", 16 << 20).expect("loop device");
    let zram = Zram::new().expect("a zram device (zram-control)");
    let config = format!(
        "[block]\ndevices_include = [{:?}, {:?}]\ndevices_exclude = []\n",
        disk.name, zram.name
    );
    let agent = AgentProcess::with_config(&config, &[]).unwrap();
    let scrape = || agent.scrape();
    // The kernel stamps dispatches where writeback throttling is set up (docs/metrics.md).
    let stamped =
        std::fs::read_to_string(format!("/sys/block/{}/queue/wbt_lat_usec", disk.name)).is_ok();
    let (before, stat0) = settled(&scrape, &disk);
    assert_eq!(
        attached(&before, "block_issue"),
        if stamped { 0.0 } else { 1.0 },
        "dispatch probe, {} stamped by the kernel: {stamped}",
        disk.name
    );
    for probe in [
        "block_bio_queue",
        "block_bio_completion",
        "block_completion",
    ] {
        let want = if probe == "block_completion" {
            1.0
        } else {
            0.0
        };
        assert_eq!(
            attached(&before, probe),
            want,
            "{probe}, no sized bio-based device"
        );
    }
    direct_reads(&disk.dev, 400, 4096).unwrap();
    let (after, stat1) = settled(&scrape, &disk);
    let labels = [("device", disk.name.as_str()), ("op", "read")];
    let delta = |m: &str| count(&after, m, &labels) - count(&before, m, &labels);
    let reads = (stat1.read_ios - stat0.read_ios) as f64;
    assert_eq!(reads, 400.0, "sysfs reads");
    assert_eq!(delta("stornet_block_io_size_bytes"), reads, "reads counted");
    assert_eq!(
        delta("stornet_block_service_seconds"),
        reads,
        "every read timed from the kernel's stamps"
    );

    zram.set_size(16 << 20).unwrap();
    wait_attached(&agent, &["block_bio_queue", "block_bio_completion"], 1.0);
    let (before, zstat0) = settled(&scrape, &zram);
    direct_writes(&zram.dev, 200, 4096).unwrap();
    let (after, zstat1) = settled(&scrape, &zram);
    let labels = [("device", zram.name.as_str()), ("op", "write")];
    let writes = (zstat1.write_ios - zstat0.write_ios) as f64;
    assert!(writes >= 200.0, "sysfs writes on {}: {writes}", zram.name);
    assert_eq!(
        count(&after, "stornet_block_io_size_bytes", &labels)
            - count(&before, "stornet_block_io_size_bytes", &labels),
        writes,
        "writes to {} counted by the bio probes",
        zram.name
    );

    // Detached by the next look at /sys/block.
    zram.reset().unwrap();
    wait_attached(&agent, &["block_bio_queue", "block_bio_completion"], 0.0);
}

/// Scrapes until each of `probes` is attached (1) or not (0) as `want`: the agent looks at
/// /sys/block every second and at each scrape (whose status may have been read before).
fn wait_attached(
    agent: &AgentProcess,
    probes: &[&str],
    want: f64,
) -> Vec<stornet_lab::metrics::Sample> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let s = agent.scrape().unwrap();
        let on: Vec<f64> = probes.iter().map(|p| attached(&s, p)).collect();
        if on.iter().all(|v| *v == want) {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{probes:?} attached {on:?} after 10 s, want {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
