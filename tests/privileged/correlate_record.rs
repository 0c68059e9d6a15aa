//! `loadgen run --agent … --record`: a real agent sampled during a real run on a loop device.
//! The record holds the agent's series for that device, with request counts equal to the
//! device's own counts in /sys/block/*/stat; a dead agent is missing data, not a failure.

use loadgen::record::Record;
use stornet_tests::agent::{AgentProcess, free_port};
use stornet_tests::blockdev::LoopDevice;
use stornet_tests::loadgen::{num, run};
use stornet_tests::privilege::require_root;

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
    let rec = record_path("sysfs");
    let agent_arg = format!("--agent=h1=http://{}", agent.addr);
    let rec_arg = format!("--record={}", rec.display());
    let dev = format!("--filename={}", disk.dev.display());
    let before = disk.stat().unwrap();
    let r = run(&[
        "--name=rec",
        &dev,
        "--rw=randrw",
        "--bs=4k",
        "--iodepth=16",
        "--time_based",
        "--runtime=3",
        "--interval=250ms",
        "--output-format=json",
        &agent_arg,
        &rec_arg,
    ])
    .unwrap();
    let after = disk.stat().unwrap();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();
    let probe_reads = num(&j, "loadgen/safety_probe_reads");

    let record = Record::read(&rec).expect("the record reads back");
    let _ = std::fs::remove_file(&rec);
    assert_eq!(record.host, "h1");
    assert_eq!(
        record.agents[0].url,
        format!("http://{}/metrics", agent.addr)
    );
    let p = &record.points[0];
    let rows = record.result.points[0].timeline.len();
    assert_eq!(p.run.starts.len(), rows);
    assert!(rows >= 12, "{rows} timeline rows");
    assert_eq!(p.sampling[0].missing, 0, "{:?}", p.sampling[0]);
    let h1 = p.run.host("h1").expect("the agent's host");
    assert_eq!(h1.local_devices, vec![disk.name.clone()]);
    let device = h1
        .devices
        .get(&disk.name)
        .unwrap_or_else(|| panic!("no series for {} in {:?}", disk.name, h1.devices.keys()));
    for (op, sysfs) in [
        (
            "read",
            (after.read_ios - before.read_ios) as f64 - probe_reads,
        ),
        ("write", (after.write_ios - before.write_ios) as f64),
    ] {
        let ios = &device.ops[op].ios;
        println!(
            "{op}: record {} sysfs {sysfs} loadgen {} probe {probe_reads}",
            total(ios),
            num(&j, &format!("loadgen/points/0/{op}/ios"))
        );
        assert_eq!(ios.len(), rows, "{op}: one value per timeline row");
        assert!(ios.iter().all(Option::is_some), "{op}: no interval missing");
        assert!(sysfs > 1000.0, "{op}: {sysfs} requests");
        if op == "write" {
            assert_eq!(
                total(ios),
                sysfs,
                "{op}: requests in the record vs /sys/block/{}/stat",
                disk.name
            );
        } else {
            // udev probes a device when a writer closes it (a few reads), which may land
            // after the record's last sample and before the test reads sysfs.
            let extra = sysfs - total(ios);
            assert!(
                (0.0..=64.0).contains(&extra),
                "{op}: requests in the record {} vs /sys/block/{}/stat {sysfs}",
                total(ios),
                disk.name
            );
        }
        let lat = if op == "read" { &h1.read } else { &h1.write };
        let lat = lat.as_ref().expect("loadgen's latency on its host");
        assert_eq!(lat.p99_seconds.len(), rows);
    }
    // With block-layer timing (queue and service histograms, in-flight, queue limit), the
    // record has those series too; the queue limit is the device's own.
    let timed = agent
        .scrape()
        .unwrap()
        .iter()
        .any(|s| s.name == "stornet_block_service_seconds_count");
    if timed {
        let w = &device.ops["write"];
        assert!(
            w.service_seconds
                .iter()
                .flatten()
                .filter(|v| **v > 0.0)
                .count()
                >= rows - 1,
            "service time per interval: {:?}",
            w.service_seconds
        );
        assert_eq!(w.queue_seconds.len(), rows);
        let nr: f64 =
            std::fs::read_to_string(format!("/sys/block/{}/queue/nr_requests", disk.name))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
        let limit = device
            .queue_limit
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        assert!(limit <= nr, "queue limit {limit} vs nr_requests {nr}");
        assert!(
            device.inflight.iter().flatten().all(|v| *v <= limit),
            "in flight {:?} within the limit {limit}",
            device.inflight
        );
    } else {
        eprintln!(
            "note: this agent exports no block-layer timing; only request counts were checked"
        );
    }
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
    assert_eq!(p.sampling[1].missing, rows + 1, "every boundary missed");
    let gone = p.run.host("gone").expect("the dead agent's host is listed");
    assert!(
        gone.devices.is_empty() && gone.peers.is_empty(),
        "and holds no data"
    );
    let h1 = p.run.host("h1").unwrap();
    assert!(total(&h1.devices[&disk.name].ops["read"].ios) > 0.0);
}
