//! Fleet mode against a real Prometheus that scraped a real agent during a lab run: a loop
//! device driven past its short request queue, and two namespaces pushing TCP through a
//! shallow tbf buffer (retransmits and qdisc drops) at the same time. `stornet analyze
//! --prometheus` finds the host and names the saturated device, and the counts it read back
//! agree with the kernel's own (/sys/block/*/stat, /proc/net/snmp, tc); its alias `loadgen
//! analyze` prints the same bytes, and `stornet watch` names the host every step.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use diagnose::fleet::{self, Fleet};
use promclient::{Client, Url};
use serde_json::Value;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::netns::{HostPair, tbf};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::promserver::{PromConfig, PromServer};
use stornet_lab::traffic::BulkTransfer;

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// loadgen writing to the device until killed, at a fixed rate: the link's retransmits and
/// drops per IO, which the whole-run judgement weighs, then do not depend on how fast this
/// machine's loop device is (unbounded, it took 460,000 writes a second on an idle 2-CPU VM,
/// and the link's events fell to 0.01 per IO).
struct Load(Child);

impl Load {
    fn start(dev: &std::path::Path, iodepth: u32) -> Load {
        Load(
            Command::new(stornet_lab::bins::path("loadgen"))
                .args([
                    "run",
                    "--name=fleet",
                    &format!("--filename={}", dev.display()),
                    "--rw=randwrite",
                    "--direct=1",
                    "--bs=4k",
                    &format!("--iodepth={iodepth}"),
                    "--rate_iops=50000",
                    "--time_based",
                    "--runtime=120",
                    "--eta=never",
                    "--output-format=json",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("loadgen starts"),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn prometheus_for(agent: &AgentProcess, tag: &str) -> PromServer {
    let p = PromServer::start(&PromConfig::scrape(
        tag,
        &format!(
            "  - job_name: stornet\n    static_configs:\n      - targets: ['{}']\n",
            agent.addr
        ),
    ))
    .expect("prometheus starts");
    p.wait_for("up{job=\"stornet\"}", Duration::from_secs(30), |r| {
        r.len() == 1 && r[0].value() == 1.0
    })
    .expect("prometheus scrapes the agent");
    p
}

fn sleep_until(t: f64) {
    let now = unix_now();
    if t > now {
        std::thread::sleep(Duration::from_secs_f64(t - now));
    }
}

/// The window's request counts from Prometheus, through fleet mode's own queries, agree with
/// the device's counts over the same window. Any agent version (a plain completion counter
/// is enough).
#[test]
fn correlate_fleet_reads_block_counts_from_prometheus() {
    if !require_root("correlate_fleet_reads_block_counts_from_prometheus")
        || !require_tool("correlate_fleet_reads_block_counts", "prometheus")
    {
        return;
    }
    let disk = LoopDevice::new("fleetcnt", 64 << 20).expect("loop device");
    disk.set_queue_attr("nomerges", "2").unwrap();
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let prom = prometheus_for(&agent, "fleetcnt");
    let load = Load::start(&disk.dev, 8);
    std::thread::sleep(Duration::from_secs(3));
    let start = unix_now().ceil();
    sleep_until(start);
    let before = disk.stat().unwrap();
    let end = start + 16.0;
    sleep_until(end);
    let after = disk.stat().unwrap();
    drop(load);
    // Let Prometheus scrape past the window's end.
    std::thread::sleep(Duration::from_secs(3));
    let f = Fleet {
        client: Client::default(),
        url: Url::parse(&format!("http://{}", prom.addr)).unwrap(),
        start,
        end,
        step: 4.0,
        matchers: fleet::matchers(&format!("{{instance=\"{}\"}}", agent.addr)).unwrap(),
        timeout: Duration::from_secs(120),
    };
    let (grid, answers) = fleet::fetch(&f).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(grid.n, 4);
    let run = fleet::build(&grid, &answers);
    run.validate().unwrap();
    assert_eq!(run.hosts.len(), 1, "one instance");
    let h = &run.hosts[0];
    assert_eq!(h.name, agent.addr.to_string());
    let ios = &h.devices[&disk.name].ops["write"].ios;
    let fleet_total: f64 = ios.iter().flatten().sum();
    let sysfs = (after.write_ios - before.write_ios) as f64;
    println!("window writes: fleet {fleet_total:.0}, /sys/block {sysfs:.0}, per step {ios:?}");
    assert!(sysfs > 10_000.0, "{sysfs} writes");
    // `increase` extrapolates each step from the samples inside it: close, not exact.
    assert!(
        (fleet_total / sysfs - 1.0).abs() < 0.15,
        "fleet {fleet_total} vs sysfs {sysfs}"
    );
}

/// The lab run of fleet mode: a loop device under steady load and two namespaces pushing TCP
/// through a shallow tbf buffer at the same time. The block layer is healthy and the link
/// drops and retransmits heavily, so the host is named for network congestion, with counts
/// that match the kernel's.
#[test]
fn correlate_fleet_names_the_congested_host_with_kernel_counts() {
    let test = "correlate_fleet_names_the_congested_host_with_kernel_counts";
    if !require_root(test) || !require_tool(test, "prometheus") {
        return;
    }
    let pair = HostPair::new("fleet").expect("host pair");
    // A shallow buffer: the bulk transfer below overflows it.
    tbf(&pair.a, pair.a_dev, "200mbit", "32kb", "64kb").unwrap();
    let disk = LoopDevice::new("fleetsat", 64 << 20).expect("loop device");
    disk.set_queue_attr("nomerges", "2").unwrap();
    let cfg = std::env::temp_dir().join(format!("stornet-fleet-{}.toml", std::process::id()));
    std::fs::write(
        &cfg,
        format!(
            "[net]\nnamespaces = [\"{}\", \"{}\"]\n",
            pair.a.name, pair.b.name
        ),
    )
    .unwrap();
    let agent =
        AgentProcess::start(&[&format!("--config.file={}", cfg.display())]).expect("agent starts");
    let _ = std::fs::remove_file(&cfg);
    let prom = prometheus_for(&agent, "fleetsat");
    // Bulk TCP for longer than the window, through the shallow buffer.
    let traffic = BulkTransfer::start(&pair.a, &pair.b, pair.b_addr(), 4, Duration::from_secs(30))
        .expect("tcp load");
    let load = Load::start(&disk.dev, 8);
    std::thread::sleep(Duration::from_secs(3));
    let start = unix_now().ceil();
    sleep_until(start);
    let (disk0, retr0, drop0) = (
        disk.stat().unwrap(),
        pair.a.snmp_tcp("RetransSegs").unwrap(),
        pair.a.qdisc_dropped(pair.a_dev).unwrap(),
    );
    let end = start + 20.0;
    sleep_until(end);
    let (disk1, retr1, drop1) = (
        disk.stat().unwrap(),
        pair.a.snmp_tcp("RetransSegs").unwrap(),
        pair.a.qdisc_dropped(pair.a_dev).unwrap(),
    );
    drop(load);
    let sent = traffic.finish().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "window: {} writes, {} retransmits, {} qdisc drops, {sent} bytes over the link",
        disk1.write_ios - disk0.write_ios,
        retr1 - retr0,
        drop1 - drop0
    );

    let html = std::env::temp_dir().join(format!("stornet-fleet-{}.html", std::process::id()));
    let fleet = [
        "--prometheus".to_string(),
        format!("http://{}", prom.addr),
        format!("--start={start}"),
        format!("--end={end}"),
        "--step=2s".to_string(),
        // Only this test's device among the block series (other tests may run IO).
        format!(
            "--selector={{job=\"stornet\",instance=\"{}\",device=~\"{}|\"}}",
            agent.addr, disk.name
        ),
        "--format=json".to_string(),
    ];
    let t0 = Instant::now();
    let out = Command::new(stornet_lab::bins::path("stornet"))
        .arg("analyze")
        .args(&fleet)
        .arg(format!("--html={}", html.display()))
        .output()
        .unwrap();
    println!("analyze took {:?}", t0.elapsed());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Its alias prints the same bytes from the same answers (the window is past).
    let alias = Command::new(stornet_lab::bins::path("loadgen"))
        .arg("analyze")
        .args(&fleet)
        .output()
        .unwrap();
    assert_eq!(alias.status.code(), Some(0));
    assert!(
        alias.stdout == out.stdout,
        "loadgen analyze printed otherwise than stornet analyze:\n{}\n{}",
        String::from_utf8_lossy(&alias.stdout),
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdict = &v["verdict"];
    println!("{:#}", verdict);
    let instance = agent.addr.to_string();
    assert_eq!(verdict["host"], instance.as_str(), "the host is found");
    assert_eq!(verdict["cause"], "network_congestion", "{v:#}");
    // The agent watches both namespaces, so the link is on the path to either end.
    let peer = pair.b_addr().to_string();
    let ends = [
        format!("path to peer {}", pair.a_addr()),
        format!("path to peer {peer}"),
    ];
    assert!(
        ends.iter().any(|e| verdict["location"] == e.as_str()),
        "{}",
        verdict["location"]
    );
    let evidence: Vec<&str> = verdict["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let has = |needle: &str| evidence.iter().any(|e| e.contains(needle));
    assert!(
        has(&format!("is on the local device of {}", disk.name)),
        "the block layer is measured: {evidence:?}"
    );
    // The shallow buffer's drops, as the qdisc or the kernel's drop reason counts them.
    assert!(
        has(&format!(
            "drops at the tbf qdisc on {instance} {}/{}",
            pair.a.name, pair.a_dev
        )) || has("with reason qdisc_drop"),
        "{evidence:?}"
    );
    // The counts behind the evidence are the kernel's.
    let write = v["hosts"][0]["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["direction"] == "write")
        .expect("writes analysed");
    let signals = write["signals"].as_array().unwrap();
    let count = |kind: &str, key: &str| -> f64 {
        signals
            .iter()
            .filter(|s| s["kind"] == kind && s["key"].as_str().unwrap().contains(key))
            .map(|s| s["run"].as_f64().unwrap_or(0.0))
            .sum()
    };
    let retrans = count("retransmits", &pair.b_addr().to_string());
    let snmp = (retr1 - retr0) as f64;
    assert!(snmp >= 100.0, "the shallow buffer made {snmp} retransmits");
    assert!(
        (retrans / snmp - 1.0).abs() < 0.25,
        "fleet retransmits {retrans} vs /proc/net/snmp {snmp}"
    );
    let qdrops = count("qdisc_drops", &format!("{}/{}", pair.a.name, pair.a_dev));
    let tc = (drop1 - drop0) as f64;
    assert!(
        tc > 0.0 && (qdrops / tc - 1.0).abs() < 0.25,
        "fleet qdisc drops {qdrops} vs tc {tc}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let _ = std::fs::remove_file(&html);
    assert!(page.contains("network_congestion"));
    assert!(page.contains("retransmits"));

    // Watched: the last 30 s evaluated again every step, a JSON line each, still naming the
    // congested host while the window holds the congestion.
    let mut watch = Command::new(stornet_lab::bins::path("stornet"))
        .args([
            "watch",
            "--prometheus",
            &format!("http://{}", prom.addr),
            "--start=now-30s",
            "--end=now",
            "--step=2s",
            &format!(
                "--selector={{job=\"stornet\",instance=\"{}\",device=~\"{}|\"}}",
                agent.addr, disk.name
            ),
            "--format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut line = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let (first, second) = (line(), line());
    let _ = watch.kill();
    let _ = watch.wait();
    println!("watched: {first}\n         {second}");
    let at = |l: &Value, k: &str| l[k].as_f64().unwrap_or(f64::NAN);
    for l in [&first, &second] {
        assert_eq!(l["verdict"]["host"], instance.as_str(), "{l}");
        assert!((at(l, "end") - at(l, "time")).abs() < 0.01, "{l}");
        assert!((at(l, "end") - at(l, "start") - 30.0).abs() < 0.01, "{l}");
    }
    assert!(
        at(&second, "time") - at(&first, "time") >= 1.99,
        "one evaluation per step: {first} {second}"
    );
    assert_eq!(first["verdict"]["cause"], "network_congestion", "{first}");
}
