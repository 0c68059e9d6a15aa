//! An MTU mistake: two hosts at MTU 9000 through a switch (bridge namespace) whose ports are
//! at 1500. What the agent shows, checked against the kernel's own counters.

use std::time::Duration;

use stornet_tests::metrics::{Sample, sum};
use stornet_tests::netns::SwitchedPair;
use stornet_tests::privilege::require_root;
use stornet_tests::traffic::BulkTransfer;

use crate::net_support::{agent_watching, assert_up, delta, settle};

/// Sum over samples of `name` whose `function` label contains `part`.
fn sum_function(samples: &[Sample], name: &str, part: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && s.label("function").is_some_and(|f| f.contains(part)))
        .map(|s| s.value)
        .sum()
}

#[test]
fn mtu_mismatch_is_visible() {
    if !require_root("mtu_mismatch_is_visible") {
        return;
    }
    let p = SwitchedPair::new("mtu", 9000, 1500).expect("switched pair");
    let agent = agent_watching(&[&p.a.name, &p.switch.name]);
    let before = agent.scrape().unwrap();
    assert_up(&before, &["tcp_retransmit", "skb_drop"]);
    let port = SwitchedPair::A_PORT;
    let port_drops0 = p.switch.link_stat(port, "rx_dropped").unwrap();
    let snmp0 = p.a.snmp_tcp("RetransSegs").unwrap();

    let transfer = BulkTransfer::start(&p.a, &p.b, p.b_addr(), 1, Duration::from_secs(3))
        .expect("transfer starts");
    std::thread::sleep(Duration::from_millis(1500));
    let during = agent.scrape().unwrap();
    transfer.finish().expect("transfer completes");
    settle();

    let port_drops = p.switch.link_stat(port, "rx_dropped").unwrap() - port_drops0;
    let snmp = p.a.snmp_tcp("RetransSegs").unwrap() - snmp0;
    let after = agent.scrape().unwrap();
    let peer = p.b_addr().to_string();
    let sw = p.switch.name.as_str();

    // Path MTU and MSS of the sender's socket (TCP_INFO): the hosts' 9000, larger than the
    // switch port's MTU the agent reports; a bridge sends no ICMP, so PMTU never shrinks.
    let pmtu = sum(&during, "stornet_tcp_path_mtu_bytes", &[("peer", &peer)]);
    let mss = sum(&during, "stornet_tcp_mss_bytes", &[("peer", &peer)]);
    let port_mtu = sum(
        &during,
        "stornet_interface_mtu",
        &[("namespace", sw), ("interface", port)],
    );
    assert_eq!(port_mtu, 1500.0, "switch port MTU");
    assert_eq!(pmtu, 9000.0, "path MTU of the sender's socket");
    assert!(
        mss > port_mtu,
        "the sender's MSS ({mss}) exceeds the switch port MTU"
    );

    // Interface drops on the switch port: frames larger than its MTU.
    let agent_port_drops = delta(
        &before,
        &after,
        "stornet_interface_receive_dropped_total",
        &[("namespace", sw), ("interface", port)],
    );
    assert!(port_drops > 0, "the switch port must drop oversized frames");
    assert_eq!(
        agent_port_drops as u64, port_drops,
        "agent vs /sys rx_dropped of the switch port"
    );

    // Drop reasons: this kernel gives no specific reason; the agent names the function.
    let unspecified = delta(
        &before,
        &after,
        "stornet_skb_drops_total",
        &[("reason", "not_specified")],
    );
    let forward = sum_function(
        &after,
        "stornet_skb_drops_unspecified_total",
        "dev_forward_skb",
    ) - sum_function(
        &before,
        "stornet_skb_drops_unspecified_total",
        "dev_forward_skb",
    );
    assert!(
        unspecified >= port_drops as f64,
        "not_specified drops ({unspecified}) include the port's {port_drops}"
    );
    assert!(
        forward >= port_drops as f64,
        "not_specified drops in *dev_forward_skb* ({forward}) include the port's {port_drops}"
    );

    // Retransmits at the sender.
    let retrans = delta(
        &before,
        &after,
        "stornet_tcp_retransmits_total",
        &[("peer", &peer)],
    );
    assert!(snmp > 0, "the sender must retransmit");
    assert_eq!(retrans as u64, snmp, "agent retransmits vs TcpRetransSegs");

    eprintln!(
        "MTU 9000 hosts, 1500 switch ports: port rx_dropped {port_drops} (agent \
         {agent_port_drops}), not_specified drops {unspecified} ({forward} in dev_forward_skb), \
         retransmits {retrans} (snmp {snmp}), path MTU {pmtu}, MSS {mss}"
    );
}
