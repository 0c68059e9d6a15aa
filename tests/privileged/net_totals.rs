//! Retransmit totals that add up: per namespace, the retransmits the probes counted per peer
//! plus the part no probe run saw (`stornet_tcp_retransmits_unattributed_total`, e.g.
//! tail-loss probes) equal the namespace's own `RetransSegs`, exactly, at thousands per
//! second and at a trickle.

use std::time::Duration;

use stornet_lab::metrics::{Sample, around, counted_between, sum};
use stornet_lab::netns::{HostPair, tbf};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::BulkTransfer;

use crate::net_support::{agent_watching, assert_up, settle};

fn totals_add_up(test: &str, limit: &str, streams: usize, seconds: u64, min_rate: f64) {
    if !require_root(test) || !require_tool(test, "tc") {
        return;
    }
    let p = HostPair::new(&format!("tot{}", &limit[..limit.len() - 2])).expect("host pair");
    tbf(&p.a, p.a_dev, "200mbit", "32kb", limit).expect("tbf");
    let agent = agent_watching(&[&p.a.name]);
    // The first scrape sets where the namespace's counts start for the agent.
    let kernel = || [p.a.snmp_tcp("RetransSegs").unwrap()];
    let ([snmp0], before) = around(kernel, || agent.scrape().unwrap());
    BulkTransfer::start(
        &p.a,
        &p.b,
        p.b_addr(),
        streams,
        Duration::from_secs(seconds),
    )
    .expect("transfer starts")
    .finish()
    .expect("transfer completes");
    settle();
    let ([snmp1], after) = around(kernel, || agent.scrape().unwrap());
    let snmp = counted_between(snmp0, snmp1);
    assert_up(&after, &["tcp_retransmit", "tcp_retransmit_synack"]);
    let d = |name: &str, labels: &[(&str, &str)]| {
        (sum(&after, name, labels) - sum(&before, name, labels)) as u64
    };
    let peer = p.b_addr().to_string();
    let counted = d("stornet_tcp_retransmits_total", &[("peer", &peer)]);
    let unattributed = d(
        "stornet_tcp_retransmits_unattributed_total",
        &[("netns", &p.a.name)],
    );
    let rate = *snmp.start() as f64 / seconds as f64;
    eprintln!(
        "tbf limit {limit}, {streams} streams, {seconds} s: RetransSegs {snmp:?} ({rate:.0}/s), \
         per peer {counted}, unattributed {unattributed}"
    );
    assert!(rate >= min_rate, "only {rate:.0} retransmits per second");
    assert!(
        snmp.contains(&(counted + unattributed)),
        "per-peer retransmits {counted} + unattributed {unattributed} vs RetransSegs {snmp:?}"
    );
    let series = |s: &[Sample]| {
        s.iter()
            .filter(|x| x.name == "stornet_tcp_retransmits_unattributed_total")
            .count()
    };
    assert!(
        series(&after) >= 2,
        "host and the watched namespace each have the series"
    );
}

/// A 64 KiB buffer at 200 Mbit/s with four streams: thousands of retransmits per second.
#[test]
fn retransmit_totals_add_up_at_a_high_rate() {
    totals_add_up(
        "retransmit_totals_add_up_at_a_high_rate",
        "64kb",
        4,
        3,
        2000.0,
    );
}

/// A 16 KiB buffer with one stream: a trickle.
#[test]
fn retransmit_totals_add_up_at_a_low_rate() {
    totals_add_up("retransmit_totals_add_up_at_a_low_rate", "16kb", 1, 2, 1.0);
}
