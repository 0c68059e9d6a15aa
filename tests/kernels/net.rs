//! The network probes against the kernel's own counters, through a veth link with netem
//! loss: netem drops a packet after TCP has handed it over (as a lossy wire does), so every
//! drop makes TCP retransmit, on any kernel and at any speed of the guest. (A shallow tbf
//! buffer drops at the sender's own qdisc, which TCP treats as local congestion and may send
//! again without a retransmit: how many it retransmits then depends on timing.)

use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::attempts::up_to_three_times;
use stornet_lab::bpf::kernel_has_drop_reasons;
use stornet_lab::metrics::{Sample, around, counted_between, sum};
use stornet_lab::netns::HostPair;
use stornet_lab::traffic::BulkTransfer;

fn delta(before: &[Sample], after: &[Sample], name: &str, labels: &[(&str, &str)]) -> u64 {
    (sum(after, name, labels) - sum(before, name, labels)) as u64
}

/// Three attempts (`up_to_three_times`): see docs/metrics.md on runs the kernel skips.
#[test]
fn lossy_link_counts_match_the_kernel() {
    let p = HostPair::new("lossy").expect("host pair");
    p.a.tc(&[
        "qdisc", "replace", "dev", p.a_dev, "root", "netem", "loss", "3%",
    ])
    .expect("netem");
    let agent = AgentProcess::with_config(&format!("[net]\nnamespaces = [{:?}]\n", p.a.name), &[])
        .expect("agent starts");
    up_to_three_times("lossy link", || attempt(&p, &agent));
}

fn attempt(p: &HostPair, agent: &AgentProcess) -> anyhow::Result<()> {
    let kernel = || {
        [
            p.a.snmp_tcp("RetransSegs").unwrap(),
            p.a.qdisc_dropped(p.a_dev).unwrap(),
        ]
    };
    let ([snmp0, tc0], before) = around(kernel, || agent.scrape().unwrap());
    BulkTransfer::start(&p.a, &p.b, p.b_addr(), 2, Duration::from_secs(2))?.finish()?;
    std::thread::sleep(Duration::from_millis(500));
    let ([snmp1, tc1], after) = around(kernel, || agent.scrape().unwrap());
    let (snmp, tc) = (counted_between(snmp0, snmp1), counted_between(tc0, tc1));
    let peer = p.b_addr().to_string();
    let d = |name: &str, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    let retransmits = d("stornet_tcp_retransmits_total", &[("peer", &peer)]);
    let missed = d(
        "stornet_agent_probe_misses_total",
        &[("probe", "tcp_retransmit")],
    );
    let qdisc = d(
        "stornet_qdisc_drops_total",
        &[
            ("netns", &p.a.name),
            ("interface", p.a_dev),
            ("qdisc", "netem"),
        ],
    );
    let reason = if kernel_has_drop_reasons() {
        "qdisc_drop"
    } else {
        "not_specified"
    };
    let dropped = d("stornet_skb_drops_total", &[("reason", reason)]);
    let by_function = d("stornet_skb_drops_unspecified_total", &[]);
    eprintln!(
        "netem loss 3%: RetransSegs {snmp:?}, agent {retransmits} (probe runs missed {missed}); \
         tc dropped {tc:?}, agent qdisc drops {qdisc}, {reason} {dropped}, by function {by_function}"
    );
    anyhow::ensure!(
        *tc.start() > 0 && *snmp.start() > 0,
        "a lossy link must drop and make TCP retransmit"
    );
    // Exact, unless the kernel says it skipped probe runs; never more than the kernel counts.
    anyhow::ensure!(
        retransmits <= *snmp.end() && retransmits + missed >= *snmp.start(),
        "agent retransmits {retransmits} (+{missed} missed) vs RetransSegs {snmp:?}"
    );
    anyhow::ensure!(
        tc.contains(&qdisc),
        "agent qdisc drops {qdisc} vs tc -s qdisc {tc:?}"
    );
    anyhow::ensure!(
        dropped >= *tc.start(),
        "drops with reason {reason}: {dropped} of {tc:?}"
    );
    if !kernel_has_drop_reasons() {
        anyhow::ensure!(
            by_function >= *tc.start(),
            "without drop reasons the drops are counted by function: {by_function} of {tc:?}"
        );
    }
    Ok(())
}
