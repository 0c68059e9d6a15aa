//! The network path: retransmits per peer, drops per kernel reason and socket pressure from
//! eBPF probes (`probed`); interface, qdisc and TCP socket statistics from scrape-time
//! snapshots in the host namespace and the configured ones (`snapshots`). Peer labels and the
//! unattributed retransmits are shared by both.

pub mod peers;
pub mod probed;
pub mod snapshots;
pub mod unattributed;

use std::sync::Arc;

use tracing::warn;

use crate::cgroups::Labeller;
use crate::config::NetConfig;
use crate::host::netns::Namespace;
use crate::kernel::btf::Btf;
use crate::model::Collector;
use crate::probes::Probes;
use peers::PeerLabels;

/// The network collectors: the snapshots enabled in `parts`, map readers for the probes that
/// are up (and with `cgroups`, retransmits per cgroup).
pub fn collectors(
    probes: &mut Probes,
    btf: &anyhow::Result<Btf>,
    config: &NetConfig,
    parts: snapshots::Parts,
    cgroups: Option<Labeller>,
) -> Vec<Box<dyn Collector>> {
    let peers = Arc::new(PeerLabels::new(config.max_peers));
    let namespaces = config
        .namespaces
        .iter()
        .filter_map(|n| {
            Namespace::parse(n)
                .inspect_err(|e| warn!(error = %e, "network namespace ignored"))
                .ok()
        })
        .collect();
    let unattributed = Arc::new(unattributed::Unattributed::default());
    let mut out: Vec<Box<dyn Collector>> = Vec::new();
    if parts.any() {
        out.push(Box::new(snapshots::collector::SnapshotCollector::new(
            namespaces,
            peers.clone(),
            unattributed.clone(),
            parts,
            config.interface_filter(),
            config.max_interfaces,
        )));
    }
    if let Err(e) = probed::collectors(probes, btf, peers, unattributed, cgroups, &mut out) {
        warn!(error = %format!("{e:#}"), "network probe collectors unavailable");
    }
    out
}
