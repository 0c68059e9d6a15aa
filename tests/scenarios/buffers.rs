//! Scenarios 1 and 2: the same replicated write workload through a deep-buffer and a
//! shallow-buffer switch at the same rate.
//!
//! Every write (64 KiB) goes to host b through the switch, whose ports run at 200 Mbit/s.
//! A 64 KiB write leaves host a as one burst at veth speed: a deep buffer (4 MiB) holds it
//! while the port drains it (2.6 ms); a shallow one (16 KiB) drops most of it, and TCP
//! recovers by retransmitting, from timeouts of 200 ms and more. The load is 100 writes per
//! second on a fixed schedule (open loop, 52 Mbit/s, a quarter of the port), so the deep
//! switch is never the bottleneck, while the shallow one falls behind the schedule and IOs
//! wait for a free slot: latency grows to seconds, as in the field reports.

use std::sync::OnceLock;

use stornet_lab::lab::{DiskSpec, HostSpec, Lab, Shaping, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir, recorded};

/// The workload of both scenarios.
pub fn workload() -> Workload {
    Workload::paced_writes("20s")
}

fn lab(tag: &str, shaping: Shaping) -> Lab {
    support::two_hosts(
        tag,
        HostSpec::new(CLIENT).shaped(shaping.clone()),
        HostSpec::new(REPLICA).shaped(shaping),
    )
}

/// The deep-buffer run's write p99 (seconds), for scenario 2's comparison.
static DEEP_P99: OnceLock<f64> = OnceLock::new();

/// Runs the deep-buffer scenario and checks it; returns its write p99.
fn deep(dir: &RunDir) -> f64 {
    let lab = lab("s1", Shaping::deep());
    let disk = support::disk("s1", DiskSpec::new(support::DISK_BYTES));
    let o = support::run(&lab, &disk, &workload(), dir, "deep");
    let writes = o.latency(0, "write");
    // Nothing on the path: no cause at all, or what other work on this machine does to the
    // hosts: the CPU, when it keeps the loop device's worker thread waiting (the service
    // time is that wait), or the device, when its writes to the disk the loop device's file
    // lies on slow the loop device down (the agent measures that service time). Never the
    // network.
    assert!(
        ["none", "cpu", "slow_device"].contains(&o.cause()),
        "{:#}",
        o.analysis["verdict"]
    );
    assert!(writes.ios >= 1900.0, "{} writes", writes.ios);
    // The deep buffer never overflows...
    assert_eq!(o.qdisc_drops, 0, "drops at the deep-buffer switch ports");
    // ...and TCP has nothing to recover from. What a healthy path still retransmits are
    // tail-loss probes a delayed acknowledgement made unnecessary (a handful per thousand
    // writes on a loaded machine); the analysis counts retransmits as anomalous from 1 per
    // 100 writes.
    assert!(
        (o.retransmits as f64) < 0.01 * writes.ios,
        "{} retransmits for {} writes",
        o.retransmits,
        writes.ios
    );
    let agent = recorded(&o, &["peers", &support::replica_ip(&lab), "retransmits"]);
    assert!(
        agent <= o.retransmits as f64,
        "the agent counted {agent} retransmits to the replica, /proc/net/snmp {}",
        o.retransmits
    );
    // The segments the retransmits are a share of reach the record: each 64 KiB write is
    // at least 45 segments of the link's MSS (1448 bytes), less what the samples at the
    // run's edges leave out (3.5% measured).
    let sent = recorded(
        &o,
        &["peers", &support::replica_ip(&lab), "delivered_segments"],
    );
    println!(
        "segments sent to the replica: {sent} ({:.1} per write), {:.3}% resent",
        sent / writes.ios,
        100.0 * (agent + 0.0) / sent
    );
    assert!(
        sent >= 40.0 * writes.ios,
        "{sent} segments recorded for {} writes of 64 KiB",
        writes.ios
    );
    writes.p99_s
}

#[test]
fn scenario_1_deep_buffer_is_healthy() {
    if !require_root("scenario_1_deep_buffer_is_healthy") {
        return;
    }
    let dir = RunDir::new("deep");
    let p99 = deep(&dir);
    let _ = DEEP_P99.set(p99);
}

#[test]
fn scenario_2_shallow_buffer_is_network_congestion() {
    if !require_root("scenario_2_shallow_buffer_is_network_congestion") {
        return;
    }
    let dir = RunDir::new("shallow");
    // Scenario 1's p99 when it ran in this process, else a deep-buffer run of its own.
    let deep_p99 = match DEEP_P99.get() {
        Some(p) => *p,
        None => deep(&dir),
    };
    let lab = lab("s2", Shaping::shallow());
    let disk = support::disk("s2", DiskSpec::new(support::DISK_BYTES));
    let o = support::run(&lab, &disk, &workload(), &dir, "shallow");
    let writes = o.latency(0, "write");
    println!(
        "write p99: shallow {} against deep {} ({:.0}x)",
        support::ms(writes.p99_s),
        support::ms(deep_p99),
        writes.p99_s / deep_p99
    );
    support::assert_verdict(
        &o,
        "network_congestion",
        &format!("path to replica {}", support::replica_ip(&lab)),
    );
    assert!(
        writes.p99_s >= 10.0 * deep_p99,
        "write p99 {} is not 10x the deep buffer's {}",
        support::ms(writes.p99_s),
        support::ms(deep_p99)
    );
    // Independent counts: the switch's qdiscs dropped (tc -s) and the client retransmitted
    // (/proc/net/snmp); the agent saw retransmits to the replica too.
    assert!(o.qdisc_drops > 0, "the shallow buffer dropped nothing");
    assert!(o.retransmits > 0, "no retransmits at the client");
    let agent = recorded(&o, &["peers", &support::replica_ip(&lab), "retransmits"]);
    assert!(
        agent > 0.0,
        "the record holds no retransmits to the replica"
    );
}
