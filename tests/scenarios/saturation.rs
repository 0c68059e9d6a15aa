//! Scenarios 11 and 12: a link at its rate drops nothing and still holds every write back;
//! the same link four times faster, used well, is healthy.
//!
//! The replica's switch port is a tbf with a deep buffer (4 MiB). At 40 Mbit/s, 64 KiB
//! replicated writes kept 16 in flight ask more than the port carries: nothing is dropped
//! (the buffer is deep, and TCP small queues keep most of the data in the client's socket,
//! not in the switch), the round trip stays a few milliseconds, and each write waits in
//! the send queue behind the others for a hundred milliseconds and more. The verdict names
//! the path to the replica as saturated. At 160 Mbit/s, a paced load of about 60% of the
//! port leaves the writes a round trip of a few milliseconds: healthy.

use serde_json::Value;
use stornet_lab::lab::{DiskSpec, HostSpec, Lab, Outcome, Shaping, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir, recorded};

/// 64 KiB replicated writes for 12 s after a 1 s ramp, 16 in flight; `rate`: writes per
/// second on a fixed schedule, none for a closed loop (as fast as the path allows).
fn writes(rate: Option<u32>) -> Workload {
    Workload {
        iodepth: 16,
        rate_iops: rate,
        ..Workload::paced_writes("12s")
    }
}

/// Seconds the run's writes cover (runtime and ramp of [`writes`]).
const RUN_SECONDS: f64 = 13.0;

fn lab(tag: &str, rate: &str) -> Lab {
    support::two_hosts(
        tag,
        HostSpec::new(CLIENT),
        HostSpec::new(REPLICA).shaped(Shaping::new(rate, "32kb", "4mb")),
    )
}

/// Bytes the tbf of the switch port toward the replica let out (`tc -s`).
fn port_sent_bytes(lab: &Lab) -> u64 {
    let port = &lab.host(REPLICA).port;
    let qdiscs: Value = lab.switch.tc_qdiscs(port).expect("tc -s qdisc");
    qdiscs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["kind"] == "tbf")
        .filter_map(|q| q["bytes"].as_u64())
        .sum()
}

/// Runs the writes at `rate` through a port of `link_bits` bits per second; returns the
/// outcome, the share of the port's rate the run used (from `tc -s`) and the replica's
/// address. The record stays in `dir` when the scenario fails.
fn run(
    tag: &str,
    dir: &RunDir,
    link: &str,
    link_bits: f64,
    rate: Option<u32>,
) -> (Outcome, f64, String) {
    let lab = lab(tag, link);
    let disk = support::disk(tag, DiskSpec::new(support::DISK_BYTES));
    let before = port_sent_bytes(&lab);
    let o = support::run(&lab, &disk, &writes(rate), dir, tag);
    let sent = port_sent_bytes(&lab) - before;
    let used = sent as f64 * 8.0 / RUN_SECONDS / link_bits;
    let ip = support::replica_ip(&lab);
    let srtt = recorded(&o, &["peers", &ip, "srtt_seconds"]);
    let n = o
        .record_host(0, CLIENT)
        .map(|h| {
            h["peers"][&ip]["srtt_seconds"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|v| v.is_number()).count())
        })
        .unwrap_or(0);
    println!(
        "    the port carried {:.1} Mbit/s over the run, {:.0}% of {link} (tc -s); mean srtt \
         {}; {} qdisc drops, {} retransmits",
        sent as f64 * 8.0 / RUN_SECONDS / 1e6,
        used * 100.0,
        support::ms(srtt / n.max(1) as f64),
        o.qdisc_drops,
        o.retransmits
    );
    (o, used, ip)
}

#[test]
fn scenario_11_a_link_at_its_rate_is_network_saturation() {
    if !require_root("scenario_11_a_link_at_its_rate_is_network_saturation") {
        return;
    }
    let dir = RunDir::new("saturated");
    let (o, used, ip) = run("s11", &dir, "40mbit", 40e6, None);
    // Independent counts: the port ran at its rate (tc -s) and dropped nothing, and the
    // client retransmitted (almost) nothing (/proc/net/snmp).
    assert!(
        used >= 0.85,
        "the port carried {:.0}% of its rate",
        used * 100.0
    );
    assert_eq!(o.qdisc_drops, 0, "the deep buffer dropped");
    let writes = o.latency(0, "write");
    assert!(
        (o.retransmits as f64) < 0.01 * writes.ios,
        "{} retransmits for {} writes",
        o.retransmits,
        writes.ios
    );
    support::assert_verdict(&o, "network_saturation", &format!("path to replica {ip}"));
    let evidence = o.evidence().join("\n");
    assert!(
        evidence.contains("send queue") && evidence.contains("Mbit/s"),
        "the evidence says where the time goes: {evidence}"
    );
    assert!(
        writes.p99_s >= 0.1,
        "write p99 {} is not a saturated link's",
        support::ms(writes.p99_s)
    );
}

#[test]
fn scenario_12_a_link_four_times_faster_used_well_is_healthy() {
    if !require_root("scenario_12_a_link_four_times_faster_used_well_is_healthy") {
        return;
    }
    // 180 writes of 64 KiB per second: 94 Mbit/s of data, about 60% of 160 Mbit/s.
    let dir = RunDir::new("used-well");
    let (o, used, _) = run("s12", &dir, "160mbit", 160e6, Some(180));
    assert!(
        (0.4..=0.8).contains(&used),
        "the port carried {:.0}% of its rate",
        used * 100.0
    );
    assert_eq!(o.qdisc_drops, 0, "the deep buffer dropped");
    assert_eq!(o.cause(), "none", "{:#}", o.analysis["verdict"]);
    let saturation: Vec<String> = support::confirmed(&o)
        .into_iter()
        .filter(|c| c.contains("network_saturation"))
        .collect();
    assert!(saturation.is_empty(), "{saturation:?}");
}
