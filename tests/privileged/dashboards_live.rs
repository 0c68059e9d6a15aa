//! The dashboards and rules on a real Prometheus: it scrapes the agent every second, with
//! stornet's rules loaded, while the lab runs block IO and congested TCP between two
//! namespaces; then every panel of every dashboard runs as Grafana would run it (variables
//! filled in from their own queries) over that window.
//!
//! A panel must return series unless the agent does not export a metric it reads (or no
//! alert was active, for the alert panel): panels that stay empty for that reason are listed
//! in the test's output, and they must fill once the agent exports the metric.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{AlignedBuf, LoopDevice, open_direct};
use stornet_lab::netns::{Netns, Subnet, tbf, veth};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::promserver::{PromConfig, PromServer, now};
use stornet_repo_checks::grafana::{Dashboard, PanelResult, Window, resolve_variables, run_panels};
use stornet_repo_checks::prom_rules::{self, RULE_FILES};
use stornet_repo_checks::promql;
use stornet_repo_checks::repo;

/// How long the lab load runs while Prometheus scrapes.
const LOAD: Duration = Duration::from_secs(25);
const SCRAPE_S: u64 = 1;
const STEP_S: u64 = 2;

/// A loop device on a 1 MiB tmpfs: writes past the first MiB fail with ENOSPC, so the block
/// path sees real errors. Detached, unmounted and removed on drop.
struct FullDisk {
    dir: PathBuf,
    dev: PathBuf,
}

impl FullDisk {
    fn new() -> anyhow::Result<FullDisk> {
        let dir = std::env::temp_dir().join(format!("stornet-dash-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "stornet-test"])
            .arg(&dir)
            .status()?
            .success();
        anyhow::ensure!(ok, "mounting tmpfs on {}", dir.display());
        let mut d = FullDisk {
            dir,
            dev: PathBuf::new(),
        };
        let file = d.dir.join("disk.img");
        std::fs::File::create(&file)?.set_len(16 << 20)?;
        let out = Command::new("losetup")
            .args(["--show", "-f", "--direct-io=on"])
            .arg(&file)
            .output()?;
        anyhow::ensure!(out.status.success(), "losetup: {:?}", out);
        d.dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(d)
    }

    /// Writes 64 KiB blocks over the whole device; returns how many failed with ENOSPC.
    fn fill(&self) -> anyhow::Result<u32> {
        let f = open_direct(&self.dev, true)?;
        let buf = AlignedBuf::new(64 << 10, 0xee);
        let mut failed = 0;
        for i in 0..256u64 {
            match f.write_at(buf.as_slice(), i * (64 << 10)) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => failed += 1,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(failed)
    }
}

impl Drop for FullDisk {
    fn drop(&mut self) {
        if !self.dev.as_os_str().is_empty() {
            let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        }
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Threads doing O_DIRECT 4 KiB reads and writes on `disk` until `stop`.
fn block_load(
    disk: &LoopDevice,
    threads: u64,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..threads)
        .map(|t| {
            let (dev, stop) = (disk.dev.clone(), stop.clone());
            std::thread::spawn(move || {
                let f = open_direct(&dev, true).expect("open loop device");
                let mut buf = AlignedBuf::new(4096, t as u8);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let offset = ((t * 7919 + n * 104_729) % 16_384) * 4096;
                    if n.is_multiple_of(4) {
                        f.write_all_at(buf.as_slice(), offset).expect("write");
                    } else {
                        f.read_exact_at(buf.as_mut_slice(), offset).expect("read");
                    }
                    n += 1;
                }
                n
            })
        })
        .collect()
}

/// Two namespaces joined by `stor0` on both sides: the sender at MTU 9000 behind a shallow
/// tbf, the receiver at 1500. A TCP stream from a to b (congested: drops and retransmits),
/// and oversized UDP datagrams the receiver's interface drops.
struct Lab {
    a: Netns,
    b: Netns,
    subnet: Subnet,
}

impl Lab {
    fn new() -> anyhow::Result<Lab> {
        let subnet = Subnet::allocate()?;
        let a = Netns::new("dash-a")?;
        let b = Netns::new("dash-b")?;
        veth(&a, "stor0", &b, "stor0")?;
        a.set_mtu("stor0", 9000)?;
        b.set_mtu("stor0", 1500)?;
        a.addr("stor0", subnet.addr(1), 24)?;
        b.addr("stor0", subnet.addr(2), 24)?;
        a.assert_isolated()?;
        b.assert_isolated()?;
        tbf(&a, "stor0", "100mbit", "32kb", "16kb")?;
        Ok(Lab { a, b, subnet })
    }

    /// Runs the traffic until `stop`; returns the threads.
    fn traffic(&self, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<anyhow::Result<u64>>> {
        let dst = self.subnet.addr(2);
        let tcp: SocketAddr = (dst, 7700).into();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server = {
            let stop = stop.clone();
            self.b.spawn(move || {
                let l = TcpListener::bind(tcp)?;
                ready_tx.send(()).ok();
                let (mut s, _) = l.accept()?;
                s.set_read_timeout(Some(Duration::from_millis(200)))?;
                let mut buf = vec![0u8; 1 << 16];
                let mut total = 0u64;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => total += n as u64,
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut =>
                        {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(total)
            })
        };
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("listener ready");
        let client = {
            let stop = stop.clone();
            self.a.spawn(move || {
                let mut s = TcpStream::connect_timeout(&tcp, Duration::from_secs(5))?;
                s.set_write_timeout(Some(Duration::from_millis(500)))?;
                let chunk = vec![0x5au8; 1 << 16];
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match s.write(&chunk) {
                        Ok(n) => sent += n as u64,
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut => {}
                        // The receiver closes once it sees the stop: a write in flight then
                        // fails, and that is the end of the run, not an error.
                        Err(_) if stop.load(Ordering::Relaxed) => break,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(sent)
            })
        };
        let udp = {
            let stop = stop.clone();
            self.a.spawn(move || {
                let s = UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
                let big = vec![0u8; 8000];
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if s.send_to(&big, (dst, 7701)).is_ok() {
                        sent += 1;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(sent)
            })
        };
        vec![server, client, udp]
    }
}

/// True when the agent takes a configuration file (`--config.file`).
fn agent_takes_config() -> bool {
    Command::new(stornet_lab::bins::path("stornet-agent"))
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--config.file"))
        .unwrap_or(false)
}

/// The agent configuration of the Kubernetes manifest's ConfigMap.
fn configmap_toml() -> String {
    use serde::Deserialize;
    let text =
        std::fs::read_to_string(repo::path("packaging/kubernetes/stornet-agent.yaml")).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ConfigMap")
        .and_then(|d| d["data"]["stornet-agent.toml"].as_str().map(String::from))
        .expect("ConfigMap with stornet-agent.toml")
}

/// Why an empty panel may be empty, or None when it should have had data.
fn why_empty(
    r: &PanelResult,
    exported: &BTreeSet<String>,
    recorded: &BTreeMap<String, String>,
    vars: &BTreeMap<String, (Vec<String>, String)>,
    empty_vars: &BTreeMap<String, String>,
    alerts_seen: bool,
) -> Option<String> {
    let mut reasons = Vec::new();
    for t in &r.panel.targets {
        for name in prom_rules::base_series(&t.expr, recorded).unwrap() {
            if name == "ALERTS" {
                if !alerts_seen {
                    reasons.push("no stornet alert was pending or firing".to_string());
                }
            } else if !exported.contains(&name) {
                reasons.push(format!("the agent exports no {name}"));
            }
        }
        for v in stornet_repo_checks::grafana::variable_refs(&t.expr) {
            if let (Some((values, _)), Some(why)) = (vars.get(&v), empty_vars.get(&v))
                && values.is_empty()
            {
                reasons.push(format!("${v} has no values ({why})"));
            }
        }
    }
    reasons.sort();
    reasons.dedup();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

#[test]
fn dashboards_live_every_panel_returns_series_for_exported_metrics() {
    const T: &str = "dashboards_live_every_panel_returns_series_for_exported_metrics";
    if !require_root(T) || !require_tool(T, "prometheus") || !require_tool(T, "losetup") {
        return;
    }
    let lab = Lab::new().expect("lab namespaces");
    let disk = LoopDevice::new("dashlive", 64 << 20).expect("loop device");
    // A short device queue, so that requests wait for it.
    let _ = disk.set_queue_attr("scheduler", "none");
    let _ = disk.set_queue_attr("nr_requests", "4");
    let full = FullDisk::new().expect("tmpfs-backed loop device");

    // The agent, watching both lab namespaces when it takes a configuration file.
    let config_dir = std::env::temp_dir().join(format!("stornet-dash-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&config_dir).unwrap();
    let mut args: Vec<String> = Vec::new();
    if agent_takes_config() {
        // The agent starts with the Kubernetes ConfigMap's configuration (a refused one
        // ends it with exit code 2 before it serves).
        let cm = config_dir.join("configmap.toml");
        std::fs::write(&cm, configmap_toml()).unwrap();
        let flag = format!("--config.file={}", cm.display());
        AgentProcess::start(&[flag.as_str()])
            .expect("the agent accepts the ConfigMap's configuration");
        let lab_cfg = config_dir.join("lab.toml");
        std::fs::write(
            &lab_cfg,
            // Every top-level cgroup followed, so that the per-cgroup panels have data.
            format!(
                "[net]\nnamespaces = [\"{}\", \"{}\"]\n[cgroups]\npaths = [\"*\"]\n",
                lab.a.name, lab.b.name
            ),
        )
        .unwrap();
        args.push(format!("--config.file={}", lab_cfg.display()));
    } else {
        eprintln!("{T}: this agent takes no --config.file: lab namespaces are not watched");
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = AgentProcess::start(&argv).expect("agent starts");

    let prom = PromServer::start(&PromConfig {
        tag: "dashlive".into(),
        interval_s: SCRAPE_S,
        scrape_configs: format!(
            "  - job_name: stornet\n    static_configs:\n      - targets: ['{}']\n",
            agent.addr
        ),
        rule_files: RULE_FILES.iter().map(|f| repo::path(f)).collect(),
        flags: Vec::new(),
    })
    .expect("prometheus starts");
    let start = now();
    prom.wait_for("up{job=\"stornet\"} == 1", Duration::from_secs(20), |r| {
        !r.is_empty()
    })
    .expect("prometheus scrapes the agent");

    // The lab load.
    let stop = Arc::new(AtomicBool::new(false));
    let retrans_before = lab.a.snmp_tcp("RetransSegs").unwrap();
    let io = block_load(&disk, 6, &stop);
    let net = lab.traffic(&stop);
    let failed = full.fill().expect("filling the tmpfs-backed device");
    assert!(failed > 0, "no write failed with ENOSPC");
    let t0 = Instant::now();
    while t0.elapsed() < LOAD {
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    let ios: u64 = io.into_iter().map(|t| t.join().unwrap()).sum();
    let traffic: Vec<u64> = net
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    let retransmits = lab.a.snmp_tcp("RetransSegs").unwrap() - retrans_before;
    eprintln!(
        "{T}: load done: {ios} block IOs, {} bytes over TCP, {} datagrams, {retransmits} retransmits, {failed} ENOSPC writes",
        traffic[1], traffic[2]
    );
    assert!(traffic[1] > 0 && ios > 0, "the lab load ran");
    // Two more evaluation rounds over the final samples.
    std::thread::sleep(Duration::from_secs(3 * SCRAPE_S));
    let end = now();

    let unhealthy = prom.unhealthy_rules().unwrap();
    assert!(
        unhealthy.is_empty(),
        "rules failed to evaluate: {unhealthy:#?}"
    );

    let w = Window {
        start,
        end,
        step_s: STEP_S,
        scrape_s: SCRAPE_S,
    };
    let exported: BTreeSet<String> = prom
        .label_values("__name__", None, start, end)
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("stornet_"))
        .collect();
    assert!(exported.contains("stornet_probe_up"), "{exported:?}");
    let recorded = prom_rules::recorded(&prom_rules::load_all().unwrap());
    let alerts: BTreeSet<String> = prom
        .query_range("ALERTS{alertname=~\"Stornet.*\"}", start, end, STEP_S)
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {} ({})",
                s.label("alertname").unwrap_or(""),
                s.label("alertstate").unwrap_or(""),
                s.label("peer").or(s.label("device")).unwrap_or("")
            )
        })
        .collect();
    eprintln!("{T}: stornet alerts active in the window: {alerts:?}");
    let alerts_seen = !alerts.is_empty();

    let mut failures = Vec::new();
    let mut empty = Vec::new();
    let mut filled = 0;
    let mut results = Vec::new();
    // The Ceph dashboard reads Ceph's mgr, which this lab does not run: the Ceph lab's test
    // (ceph_lab.rs) runs its panels.
    for d in Dashboard::load_all()
        .unwrap()
        .into_iter()
        .filter(|d| d.title() != "stornet / Ceph")
    {
        let vars = resolve_variables(&d, &prom, &w).unwrap();
        // A variable may be empty only when the metric its query reads is not exported.
        let mut empty_vars = BTreeMap::new();
        for v in d.variables().unwrap() {
            let Some((values, _)) = vars.get(&v.name) else {
                continue;
            };
            if !values.is_empty() {
                continue;
            }
            let sel = promql::label_values_query(v.query.as_deref().unwrap()).unwrap();
            let missing: Vec<String> = promql::selectors(&sel.selector.unwrap_or_default())
                .unwrap()
                .iter()
                .flat_map(|s| s.metric_names().unwrap())
                .filter(|n| !exported.contains(n))
                .collect();
            if missing.is_empty() {
                failures.push(format!("{}: variable ${} has no values", d.title(), v.name));
            } else {
                empty_vars.insert(v.name.clone(), format!("no {}", missing.join(", ")));
            }
        }
        assert!(!vars["instance"].0.is_empty(), "{}: no instance", d.title());
        for r in run_panels(&d, &prom, &w, &vars).unwrap() {
            if r.series_count() > 0 {
                filled += 1;
            } else {
                match why_empty(&r, &exported, &recorded, &vars, &empty_vars, alerts_seen) {
                    Some(why) => empty.push(format!("{} / {}: {why}", r.dashboard, r.panel.title)),
                    None => failures.push(format!(
                        "{} / {}: no series, although the agent exports what it reads: {:?}",
                        r.dashboard,
                        r.panel.title,
                        r.queries.iter().map(|q| &q.query).collect::<Vec<_>>()
                    )),
                }
            }
            results.push(r);
        }
    }
    eprintln!(
        "{T}: {filled} panels returned series; {} empty because their data does not exist:",
        empty.len()
    );
    for e in &empty {
        eprintln!("  {e}");
    }
    assert!(
        failures.is_empty(),
        "{failures:#?}\nprometheus log:\n{}",
        prom.log()
    );

    // What the panels show matches the agent and the lab.
    let panel = |dash: &str, title: &str| {
        results
            .iter()
            .find(|r| r.dashboard == dash && r.panel.title == title)
            .unwrap_or_else(|| panic!("no panel {dash} / {title}"))
    };
    let last = |r: &PanelResult, labels: &[(&str, &str)]| -> Option<f64> {
        r.queries[0]
            .series
            .iter()
            .find(|s| labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
            .and_then(|s| s.samples.last().map(|p| p.1))
    };
    let scrape = agent.scrape().unwrap();
    let probes = panel("stornet / Host storage", "Probes");
    for s in scrape.iter().filter(|s| s.name == "stornet_probe_up") {
        let probe = s.label("probe").unwrap();
        assert_eq!(
            last(probes, &[("probe", probe)]),
            Some(s.value),
            "Probes panel vs the agent's /metrics for {probe}"
        );
    }
    if exported.contains("stornet_interface_mtu") && !args.is_empty() {
        let mtu = panel("stornet / Network congestion", "Interface MTU");
        for (ns, want) in [(&lab.a.name, 9000.0), (&lab.b.name, 1500.0)] {
            assert_eq!(
                last(mtu, &[("netns", ns), ("interface", "stor0")]),
                Some(want),
                "Interface MTU panel for {ns}"
            );
        }
    }
    if exported.contains("stornet_tcp_retransmits_total") && retransmits > 0 {
        let peer = lab.subnet.addr(2).to_string();
        let r = panel("stornet / Network congestion", "Retransmits per peer");
        assert!(
            r.queries[0]
                .series
                .iter()
                .any(|s| s.label("peer") == Some(&peer)),
            "{retransmits} retransmits in the lab, none to {peer} on the panel"
        );
    }
    if exported.contains("stornet_block_service_seconds_count") {
        let r = panel("stornet / Host storage", "IOPS");
        assert!(
            r.queries[0]
                .series
                .iter()
                .any(|s| s.label("device") == Some(disk.name.as_str())),
            "no IOPS of {} on the panel",
            disk.name
        );
    }
    let _ = std::fs::remove_dir_all(&config_dir);
}
