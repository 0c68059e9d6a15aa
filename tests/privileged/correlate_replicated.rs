//! The whole story on one host pair: replicated writes from namespace a (a loop device there,
//! a `loadgen serve` replica in namespace b), an agent sampled during the run, and a shallow
//! tbf buffer put on the link for a few seconds in the middle. The record splits each write
//! into the local device and the replica's round trip, and `loadgen analyze` names the
//! congested path to the replica, with the agent's drops as evidence.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use record::Record;
use serde_json::Value;
use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::bins;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::Run;
use stornet_lab::metrics::http_get;
use stornet_lab::netns::{HostPair, tbf};
use stornet_lab::privilege::require_root;
use stornet_lab::replica::{ScratchDir, ServeProcess, wait_bounded};

#[test]
fn correlate_replicated_writes_through_a_congested_link_name_the_path() {
    let test = "correlate_replicated_writes_through_a_congested_link_name_the_path";
    if !require_root(test) {
        return;
    }
    let pair = HostPair::new("corrrepl").expect("host pair");
    let dir = ScratchDir::new("corrrepl").unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "corr-token\n").unwrap();
    let root = dir.join("replica");
    std::fs::create_dir_all(&root).unwrap();
    let server = ServeProcess::start(
        &pair.b,
        SocketAddr::new(pair.b_addr().into(), 7480),
        &root,
        &["--token-file", token.to_str().unwrap()],
    )
    .expect("loadgen serve starts");

    // The agent runs in namespace a, where loadgen runs and can reach it on loopback.
    let ns_exec = ["ip", "netns", "exec", pair.a.name.as_str()];
    let mut agent = AgentProcess::launch(&Launch {
        wrapper: &ns_exec,
        ..Default::default()
    })
    .expect("agent starts");
    let addr = agent.addr;
    let a = &pair.a;
    agent
        .wait_until(|| {
            a.enter(|| http_get(addr, "/-/healthy"))
                .is_ok_and(|(code, _)| code == 200)
        })
        .expect("the agent answers in namespace a");

    let disk = LoopDevice::new("corrrepl", 64 << 20).expect("loop device");
    let rec = dir.join("run.json");
    let child = pair
        .a
        .command(bins::path("loadgen").to_str().unwrap())
        .args([
            "run",
            "--name=repl",
            &format!("--filename={}", disk.dev.display()),
            "--rw=randwrite",
            "--bs=16k",
            "--iodepth=8",
            "--time_based",
            "--runtime=12",
            "--interval=250ms",
            "--output-format=json",
            &format!("--output={}", dir.join("report.json").display()),
            &format!("--replica={}", server.addr),
            &format!("--replica_token_file={}", token.display()),
            &format!("--agent=h1=http://{addr}"),
            &format!("--record={}", rec.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen run starts");
    // Four seconds of a clear link, four through a shallow buffer, four clear again.
    std::thread::sleep(Duration::from_secs(4));
    tbf(&pair.a, pair.a_dev, "20mbit", "16kb", "16kb").unwrap();
    std::thread::sleep(Duration::from_secs(4));
    pair.a
        .tc(&["qdisc", "del", "dev", pair.a_dev, "root"])
        .unwrap();
    let (out, _) = wait_bounded(child, Duration::from_secs(60)).expect("loadgen run ends");
    let r = Run::from_output(out);
    assert_eq!(r.code, Some(0), "{}", r.stderr);

    // The record splits every write into the local device and the replica's round trip.
    let record = Record::read(&rec).expect("the record reads back");
    let p = &record.points[0];
    let h1 = p.run.host("h1").unwrap();
    let replica = pair.b_addr().to_string();
    assert!(
        h1.addresses.contains(&pair.a_addr().to_string()),
        "loadgen's host has namespace a's address: {:?}",
        h1.addresses
    );
    let w = h1.write.as_ref().expect("writes");
    let rtt = &w.replicas[&replica];
    assert_eq!(rtt.len(), p.run.len());
    // A write completes only when both its legs have, so every interval in which writes
    // completed has both; through the shallow buffer a retransmission timeout (200 ms and
    // more) can leave a 250 ms interval with no completed write at all.
    let completed: Vec<usize> = (0..p.run.len())
        .filter(|&i| w.iops[i].is_some_and(|x| x > 0.0))
        .collect();
    for &i in &completed {
        assert!(
            rtt[i].is_some(),
            "interval {i}: writes but no replica round trip"
        );
        assert!(
            w.local_device_seconds[i].is_some(),
            "interval {i}: writes but no local device time"
        );
    }
    assert!(
        completed.len() >= p.run.len() / 2,
        "writes completed in only {} of {} intervals",
        completed.len(),
        p.run.len()
    );
    let peer = &h1.peers[&replica];
    let retransmits: f64 = peer.retransmits.iter().flatten().sum();
    assert!(retransmits > 0.0, "the agent saw retransmits to {replica}");

    // The report stays in the build's temp directory for a reader to look at.
    let html =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("correlate-replicated.html");
    let out = std::process::Command::new(bins::path("stornet"))
        .args(["report", rec.to_str().unwrap(), "--format=json", "--html"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::process::Command::new(bins::path("stornet"))
        .args(["analyze", rec.to_str().unwrap()])
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&text.stdout));
    assert_eq!(v["verdict"]["cause"], "network_congestion", "{v:#}");
    assert_eq!(
        v["verdict"]["location"],
        format!("path to replica {replica}").as_str()
    );
    let evidence: Vec<&str> = v["verdict"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let has = |needle: &str| evidence.iter().any(|e| e.contains(needle));
    // Over the run's intervals that have a latency (those with completed writes); one may
    // also lack an agent sample on a busy host.
    let n = p.run.len();
    let judged =
        (completed.len().saturating_sub(1)..=n).any(|m| has(&format!(" of {m} intervals")));
    assert!(
        judged && has("baseline in"),
        "a rise against the run's own baseline over {n} intervals: {evidence:?}"
    );
    assert!(
        has(&format!("of the rise is waiting for replica {replica}")),
        "{evidence:?}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("replica {replica} round trip")));
    assert!(page.contains("leg replica"), "per-leg histograms");
    // Why: the shallow buffer's drops.
    assert!(
        has("qdisc_drop") || has("drops at the tbf qdisc"),
        "{evidence:?}"
    );
}
