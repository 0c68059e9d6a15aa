//! A link shaped by tbf (200 Mbit/s, burst 32 kB) with a shallow and a deep buffer, and a TCP
//! bulk transfer over it: the agent's counts against the kernel's own.

use std::ops::RangeInclusive;
use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::metrics::{around, counted_between, sum};
use stornet_lab::netns::{HostPair, tbf};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::BulkTransfer;

use crate::net_support::{ATTEMPTS, agent_watching, assert_up, delta, settle};

const STREAMS: usize = 4;
const SECONDS: u64 = 3;

/// What one transfer over a shaped link changed, seen by the agent and by the kernel.
#[derive(Debug)]
struct Run {
    agent_retransmits: u64,
    /// The kernel's counts, as closely as reads around the scrapes tell.
    snmp_retransmits: RangeInclusive<u64>,
    agent_qdisc_drops: u64,
    tc_dropped: RangeInclusive<u64>,
    qdisc_drop_reason: u64,
    /// Drops without a reason, summed over the kernel functions that dropped them.
    unspecified_by_function: u64,
}

impl Run {
    /// Agent and kernel agree (other namespaces on the machine may add `qdisc_drop`s).
    fn agrees(&self) -> bool {
        self.snmp_retransmits.contains(&self.agent_retransmits)
            && self.tc_dropped.contains(&self.agent_qdisc_drops)
            && self.qdisc_drop_reason >= *self.tc_dropped.start()
    }
}

fn transfer(p: &HostPair, agent: &AgentProcess) -> Run {
    let kernel = || {
        [
            p.a.snmp_tcp("RetransSegs").unwrap(),
            p.a.qdisc_dropped(p.a_dev).unwrap(),
        ]
    };
    let ([snmp0, tc0], before) = around(kernel, || agent.scrape().unwrap());
    BulkTransfer::start(
        &p.a,
        &p.b,
        p.b_addr(),
        STREAMS,
        Duration::from_secs(SECONDS),
    )
    .expect("transfer starts")
    .finish()
    .expect("transfer completes");
    settle();
    let ([snmp1, tc1], after) = around(kernel, || agent.scrape().unwrap());
    let peer = p.b_addr().to_string();
    let qdisc = [
        ("netns", p.a.name.as_str()),
        ("interface", p.a_dev),
        ("qdisc", "tbf"),
    ];
    assert_eq!(
        sum(&after, "stornet_net_namespace_up", &[("netns", &p.a.name)]),
        1.0
    );
    let d = |name: &str, labels: &[(&str, &str)]| delta(&before, &after, name, labels) as u64;
    Run {
        // Per peer, and what the namespace's RetransSegs counted that no probe run saw
        // (tail-loss probes): together they are the namespace's RetransSegs.
        agent_retransmits: d("stornet_tcp_retransmits_total", &[("peer", &peer)])
            + d(
                "stornet_tcp_retransmits_unattributed_total",
                &[("netns", &p.a.name)],
            ),
        snmp_retransmits: counted_between(snmp0, snmp1),
        agent_qdisc_drops: d("stornet_qdisc_drops_total", &qdisc),
        tc_dropped: counted_between(tc0, tc1),
        // Kernels before 5.17 name no reason: the drops are counted as not specified.
        qdisc_drop_reason: d(
            "stornet_skb_drops_total",
            &[("reason", drop_reason_of_qdisc_drops())],
        ),
        unspecified_by_function: d("stornet_skb_drops_unspecified_total", &[]),
    }
}

/// The reason the agent gives qdisc drops on this kernel.
fn drop_reason_of_qdisc_drops() -> &'static str {
    if stornet_lab::bpf::kernel_has_drop_reasons() {
        "qdisc_drop"
    } else {
        "not_specified"
    }
}

/// Transfers until agent and kernel agree, at most ATTEMPTS times; returns the last run.
fn run(tag: &str, limit: &str) -> Run {
    let p = HostPair::new(tag).expect("host pair");
    tbf(&p.a, p.a_dev, "200mbit", "32kb", limit).expect("tbf");
    let agent = agent_watching(&[&p.a.name]);
    assert_up(
        &agent.scrape().unwrap(),
        &["tcp_retransmit", "tcp_retransmit_synack", "skb_drop"],
    );
    let mut attempt = 1;
    loop {
        let r = transfer(&p, &agent);
        eprintln!("tbf limit {limit}, attempt {attempt}: {r:?}");
        if r.agrees() || attempt == ATTEMPTS {
            return r;
        }
        attempt += 1;
    }
}

/// Shallow buffer (limit 16 kB): the qdisc drops, TCP retransmits. The agent's retransmits to
/// the peer equal the namespace's RetransSegs delta, its qdisc drops equal `tc -s`, and the
/// kernel's `qdisc_drop` reason counts those drops (`not_specified` on kernels without drop
/// reasons).
#[test]
fn shallow_buffer_counts_match_the_kernel() {
    if !require_root("shallow_buffer_counts_match_the_kernel")
        || !require_tool("shallow_buffer_counts_match_the_kernel", "tc")
    {
        return;
    }
    let r = run("shallow", "16kb");
    assert!(*r.tc_dropped.start() > 0, "a 16 kB tbf buffer must drop");
    assert!(
        *r.snmp_retransmits.start() > 0,
        "drops must cause retransmits"
    );
    assert!(
        r.snmp_retransmits.contains(&r.agent_retransmits),
        "agent retransmits for the peer vs TcpRetransSegs: {r:?}"
    );
    assert!(
        r.tc_dropped.contains(&r.agent_qdisc_drops),
        "agent qdisc drops vs tc -s qdisc: {r:?}"
    );
    assert!(
        r.qdisc_drop_reason >= *r.tc_dropped.start(),
        "skb drops with reason {} ({}) must include the {:?} tbf drops",
        drop_reason_of_qdisc_drops(),
        r.qdisc_drop_reason,
        r.tc_dropped
    );
    if !stornet_lab::bpf::kernel_has_drop_reasons() {
        assert!(
            r.unspecified_by_function >= *r.tc_dropped.start(),
            "without drop reasons, the drops are counted by function: {r:?}"
        );
    }
}

/// Deep buffer (limit 4 MB): the same transfer leaves retransmits at or near zero, and the
/// agent says the same as the kernel.
#[test]
fn deep_buffer_shows_no_retransmits() {
    if !require_root("deep_buffer_shows_no_retransmits")
        || !require_tool("deep_buffer_shows_no_retransmits", "tc")
    {
        return;
    }
    let r = run("deep", "4mb");
    assert!(
        r.snmp_retransmits.contains(&r.agent_retransmits),
        "agent retransmits for the peer vs TcpRetransSegs: {r:?}"
    );
    assert!(
        r.agent_retransmits <= 10,
        "a deep buffer should leave retransmits near 0, agent saw {}",
        r.agent_retransmits
    );
    assert!(r.tc_dropped.contains(&r.agent_qdisc_drops), "{r:?}");
}
