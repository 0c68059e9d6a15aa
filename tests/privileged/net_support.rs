//! Shared by the network tests: an agent watching given namespaces, and metric deltas.

use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::netns::Netns;

/// Measurements that compare the agent with the kernel's own counters are repeated (on the same
/// namespaces and agent) until they agree, at most this often. On a machine under heavy CPU
/// load, while other eBPF agents attach to and detach from the same tracepoints, the kernel was
/// seen to skip a burst of tracepoint events for a moment; a second transfer then agrees
/// exactly. While the vm tier's emulated guests boot beside it, three transfers in a row once
/// each missed 1 to 21 of a thousand-odd `qdisc_drop` events (the same test agrees exactly on
/// a machine without them). A persistent disagreement still fails.
pub const ATTEMPTS: usize = 5;

/// Starts the agent with a configuration that watches `namespaces`. The peer cap is high:
/// other tests on the machine create peers too, and ours must keep their own label.
pub fn agent_watching(namespaces: &[&str]) -> AgentProcess {
    let list: Vec<String> = namespaces.iter().map(|n| format!("{n:?}")).collect();
    let config = format!(
        "[net]\nmax_peers = 4096\nnamespaces = [{}]\n",
        list.join(", ")
    );
    let path = std::env::temp_dir().join(format!(
        "stornet-net-test-{}-{}.toml",
        std::process::id(),
        namespaces.first().copied().unwrap_or("host")
    ));
    std::fs::write(&path, config).expect("writing the agent config");
    let agent = AgentProcess::start(&[&format!("--config.file={}", path.display())]);
    let _ = std::fs::remove_file(&path);
    agent.expect("agent starts")
}

/// Asserts that the named probes are attached.
pub fn assert_up(samples: &[Sample], probes: &[&str]) {
    for p in probes {
        assert_eq!(
            sum(samples, "stornet_probe_up", &[("probe", p)]),
            1.0,
            "probe {p} must be up on this kernel"
        );
    }
}

/// `after - before` of the summed samples.
pub fn delta(before: &[Sample], after: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    sum(after, name, labels) - sum(before, name, labels)
}

/// Lets the last ACKs and FINs of finished connections settle before counters are compared.
pub fn settle() {
    std::thread::sleep(Duration::from_millis(500));
}

/// The `Speed:` line of `ethtool DEV`, bytes per second.
pub fn ethtool_speed(ns: &Netns, dev: &str) -> f64 {
    let out = ns.run("ethtool", &[dev]).expect("ethtool");
    let mbps: f64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Speed:"))
        .and_then(|v| v.trim().strip_suffix("Mb/s"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no speed in ethtool {dev}:\n{out}"));
    mbps * 1e6 / 8.0
}
