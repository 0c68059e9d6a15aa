//! The network probes against the kernel's own counters, through a veth link with netem
//! loss: netem drops a packet after TCP has handed it over (as a lossy wire does), so every
//! drop makes TCP retransmit, on any kernel and at any speed of the guest. (A shallow tbf
//! buffer drops at the sender's own qdisc, which TCP treats as local congestion and may send
//! again without a retransmit: how many it retransmits then depends on timing.)

use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::attempts::up_to_three_times;
use stornet_lab::bins;
use stornet_lab::bpf::kernel_has_drop_reasons;
use stornet_lab::cgroup::{Cgroup, UNIFIED_ROOT};
use stornet_lab::guest;
use stornet_lab::metrics::{Sample, around, counted_between, sum};
use stornet_lab::netns::HostPair;
use stornet_lab::traffic::BulkTransfer;

fn delta(before: &[Sample], after: &[Sample], name: &str, labels: &[(&str, &str)]) -> u64 {
    (sum(after, name, labels) - sum(before, name, labels)) as u64
}

/// The sending sockets are opened from a cgroup of their own, which the agent follows: their
/// retransmits count for it (the whole test process moves there for a moment, which a guest,
/// running one test at a time, allows). Three attempts (`up_to_three_times`): see
/// docs/metrics.md on runs the kernel skips.
#[test]
fn lossy_link_counts_match_the_kernel() {
    let p = HostPair::new("lossy").expect("host pair");
    p.a.tc(&[
        "qdisc", "replace", "dev", p.a_dev, "root", "netem", "loss", "3%",
    ])
    .expect("netem");
    let group = Cgroup::new(UNIFIED_ROOT, "cgroup.procs", "lossy").expect("a v2 cgroup");
    group.child("sender").unwrap();
    let name = group.name();
    let config = format!(
        "[net]\nnamespaces = [{:?}]\n[cgroups]\npaths = [\"{name}/*\"]\n",
        p.a.name
    );
    let agent = AgentProcess::with_config(&config, &[]).expect("agent starts");
    let sender = format!("{name}/sender");
    let readable = socket_cgroups_readable();
    up_to_three_times("lossy link", || {
        attempt(&p, &agent, &group, &sender, readable)
    });
}

/// Whether the agent reads sockets' cgroups here: everywhere but under
/// `lockdown=confidentiality` on kernels whose sockets hold their cgroup as a tagged
/// integer (before 5.15, unless the change was backported), read with a helper that lockdown
/// forbids; `stornet-agent check` names that case in its `socket cgroups` row.
fn socket_cgroups_readable() -> bool {
    if guest::lockdown() != "confidentiality" {
        return true;
    }
    let out = std::process::Command::new(bins::path("stornet-agent"))
        .arg("check")
        .output()
        .expect("stornet-agent check runs");
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.contains("socket cgroups"))
        .unwrap_or_else(|| panic!("no socket cgroups row:\n{table}"));
    !row.contains("lockdown=confidentiality forbids")
}

/// One transfer; with `readable`, its retransmits must count for `sender`, else per peer only.
fn attempt(
    p: &HostPair,
    agent: &AgentProcess,
    group: &Cgroup,
    sender: &str,
    readable: bool,
) -> anyhow::Result<()> {
    let kernel = || {
        [
            p.a.snmp_tcp("RetransSegs").unwrap(),
            p.a.qdisc_dropped(p.a_dev).unwrap(),
        ]
    };
    let ([snmp0, tc0], before) = around(kernel, || agent.scrape().unwrap());
    let transfer = {
        let _in = group.enter_self("sender")?;
        BulkTransfer::start(&p.a, &p.b, p.b_addr(), 2, Duration::from_secs(2))?
    };
    transfer.finish()?;
    std::thread::sleep(Duration::from_millis(500));
    let ([snmp1, tc1], after) = around(kernel, || agent.scrape().unwrap());
    let (snmp, tc) = (counted_between(snmp0, snmp1), counted_between(tc0, tc1));
    let peer = p.b_addr().to_string();
    let d = |name: &str, labels: &[(&str, &str)]| delta(&before, &after, name, labels);
    let retransmits = d("stornet_tcp_retransmits_total", &[("peer", &peer)]);
    let by_sender = d(
        "stornet_tcp_cgroup_retransmits_total",
        &[("peer", &peer), ("cgroup", sender)],
    );
    let cgroup_series = after
        .iter()
        .any(|x| x.name == "stornet_tcp_cgroup_retransmits_total");
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
        "netem loss 3%: RetransSegs {snmp:?}, agent {retransmits} (probe runs missed {missed}), \
         for {sender} {by_sender}; \
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
    if readable {
        anyhow::ensure!(
            by_sender == retransmits,
            "{sender}, which opened the sockets: {by_sender} of the peer's {retransmits}"
        );
    } else {
        anyhow::ensure!(
            !cgroup_series,
            "no per-cgroup retransmits where sockets' cgroups cannot be read"
        );
    }
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
