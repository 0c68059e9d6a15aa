//! `loadgen run --agent … --record`: a real agent sampled during a real run on a loop device.
//! The record holds the agent's series for that device, with request counts equal to the
//! device's own counts in /sys/block/*/stat; a dead agent is missing data, not a failure.

use anyhow::ensure;
use record::Record;
use stornet_lab::agent::{AgentProcess, free_port};
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::{num, run};
use stornet_lab::metrics::sum;
use stornet_lab::privilege::require_root;

use crate::block_util::up_to_three_times;

fn record_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("stornet-record-{tag}-{}.json", std::process::id()))
}

fn total(s: &analysis::Series) -> f64 {
    s.iter().flatten().sum()
}

#[test]
fn correlate_record_holds_the_agents_device_series_matching_sysfs() {
    if !require_root("correlate_record_holds_the_agents_device_series_matching_sysfs") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let disk = LoopDevice::new("corrrec", 64 << 20).expect("loop device");
    // One IO is one request: the device counts what loadgen issued.
    disk.set_queue_attr("nomerges", "2").unwrap();
    up_to_three_times("the record's request counts", || {
        record_matches_sysfs(&agent, &disk)
    });
}

fn record_matches_sysfs(agent: &AgentProcess, disk: &LoopDevice) -> anyhow::Result<()> {
    let rec = record_path("sysfs");
    let count = |op: &str| -> anyhow::Result<f64> {
        let samples = agent.scrape()?;
        Ok(sum(
            &samples,
            "stornet_block_io_size_bytes_count",
            &[("device", &disk.name), ("op", op)],
        ))
    };
    // Completions the kernel did not run the probe for, as the agent finds them later.
    let unseen = || -> anyhow::Result<f64> {
        Ok(sum(
            &agent.scrape()?,
            "stornet_block_unrecorded_total",
            &[("reason", "unseen_end")],
        ))
    };
    let unseen_before = unseen()?;
    let agent_before = [count("read")?, count("write")?];
    let before = disk.stat()?;
    let r = run(&[
        "--name=rec",
        &format!("--filename={}", disk.dev.display()),
        "--rw=randrw",
        "--bs=4k",
        "--iodepth=4",
        "--rate_iops=1000",
        "--time_based",
        "--runtime=4",
        "--interval=500ms",
        "--output-format=json",
        &format!("--agent=h1=http://{}", agent.addr),
        &format!("--record={}", rec.display()),
    ])?;
    let after = disk.stat()?;
    let agent_delta = [
        count("read")? - agent_before[0],
        count("write")? - agent_before[1],
    ];
    let skipped = unseen()? - unseen_before;
    ensure!(r.code == Some(0), "loadgen failed: {}", r.stderr);
    let probe_reads = num(&r.json()?, "loadgen/safety_probe_reads");

    let record = Record::read(&rec).map_err(anyhow::Error::msg)?;
    let _ = std::fs::remove_file(&rec);
    assert_eq!(record.host, "h1");
    assert_eq!(
        record.agents[0].url,
        format!("http://{}/metrics", agent.addr)
    );
    let p = &record.points[0];
    let rows = record.result.points[0].timeline.len();
    assert_eq!(p.run.starts.len(), rows);
    assert!(rows >= 8, "{rows} timeline rows");
    ensure!(p.sampling[0].missing == 0, "{:?}", p.sampling[0]);
    let h1 = p.run.host("h1").expect("the agent's host");
    assert_eq!(h1.local_devices, vec![disk.name.clone()]);
    let device = h1
        .devices
        .get(&disk.name)
        .unwrap_or_else(|| panic!("no series for {} in {:?}", disk.name, h1.devices.keys()));
    for op in ["read", "write"] {
        let ios = &device.ops[op].ios;
        let recorded = total(ios);
        let (sysfs, agent_count) = if op == "read" {
            // The safety check's reads come before the run and are not in the record.
            (
                (after.read_ios - before.read_ios) as f64 - probe_reads,
                agent_delta[0] - probe_reads,
            )
        } else {
            ((after.write_ios - before.write_ios) as f64, agent_delta[1])
        };
        println!(
            "{op}: record {recorded}, agent {agent_count}, /sys/block {sysfs}, skipped probe runs {skipped}"
        );
        assert_eq!(ios.len(), rows, "{op}: one value per timeline row");
        assert!(ios.iter().all(Option::is_some), "{op}: no interval missing");
        assert!(sysfs > 1000.0, "{op}: {sysfs} requests");
        // udev reads a device when a writer closes it; those reads may land after the
        // record's last sample, in the counts taken after the run.
        let udev = if op == "read" { 64.0 } else { 0.0 };
        // Exactly what the agent counted, the intervals adding up.
        ensure!(
            (0.0..=udev).contains(&(agent_count - recorded)),
            "{op}s in the record {recorded}, the agent's counter {agent_count}"
        );
        // And what the device did, but for completions the kernel skipped the probe for
        // (counted as `unseen_end` when their driver tag is reused; up to a queue depth of
        // them may still wait for that).
        let short = sysfs - recorded;
        ensure!(
            short >= 0.0 && short <= skipped + 4.0 + udev,
            "{op}s in the record {recorded}, /sys/block/{}/stat {sysfs}, {skipped} probe runs skipped",
            disk.name
        );
        let lat = if op == "read" { &h1.read } else { &h1.write };
        let lat = lat.as_ref().expect("loadgen's latency on its host");
        assert_eq!(lat.p99_seconds.len(), rows);
        assert_eq!(lat.local_device_seconds.len(), rows);
        // Block-layer timing per interval, and the device's in-flight requests and limit.
        let o = &device.ops[op];
        assert!(
            o.service_seconds
                .iter()
                .flatten()
                .filter(|v| **v > 0.0)
                .count()
                >= rows - 1,
            "{op}: service time per interval: {:?}",
            o.service_seconds
        );
        assert_eq!(o.queue_seconds.len(), rows);
    }
    let nr: f64 = std::fs::read_to_string(format!("/sys/block/{}/queue/nr_requests", disk.name))?
        .trim()
        .parse()?;
    assert!(
        device.queue_limit.iter().all(|l| *l == Some(nr)),
        "queue limit {:?} vs nr_requests {nr}",
        device.queue_limit
    );
    assert!(
        device.inflight.iter().flatten().all(|v| *v <= nr),
        "in flight {:?} within the limit {nr}",
        device.inflight
    );
    Ok(())
}

#[test]
fn correlate_a_dead_agent_is_missing_data_not_a_failed_run() {
    if !require_root("correlate_a_dead_agent_is_missing_data_not_a_failed_run") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let disk = LoopDevice::new("corrdead", 32 << 20).expect("loop device");
    // Nothing listens on this port: bound, then released.
    let dead = free_port().unwrap();
    let rec = record_path("dead");
    let r = run(&[
        "--name=dead",
        &format!("--filename={}", disk.dev.display()),
        "--rw=randread",
        "--iodepth=4",
        "--time_based",
        "--runtime=2",
        "--interval=250ms",
        "--output-format=json",
        &format!("--agent=h1=http://{}", agent.addr),
        &format!("--agent=gone=http://127.0.0.1:{dead}"),
        &format!("--record={}", rec.display()),
    ])
    .unwrap();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("agent gone") && r.stderr.contains("does not answer"),
        "a warning names the agent: {}",
        r.stderr
    );
    let record = Record::read(&rec).expect("the record reads back");
    let _ = std::fs::remove_file(&rec);
    let p = &record.points[0];
    let rows = p.run.len();
    assert_eq!(p.sampling[0].missing, 0);
    assert_eq!(p.sampling[1].samples, 0);
    assert!(p.sampling[1].missing > rows, "every boundary missed");
    let gone = p.run.host("gone").expect("the dead agent's host is listed");
    assert!(
        gone.devices.is_empty() && gone.peers.is_empty(),
        "and holds no data"
    );
    let h1 = p.run.host("h1").unwrap();
    assert!(total(&h1.devices[&disk.name].ops["read"].ios) > 0.0);
}
