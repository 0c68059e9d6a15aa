//! The network path: retransmits per peer, drops per kernel reason and socket pressure from
//! eBPF probes; interface, qdisc and TCP socket statistics from scrape-time snapshots in the
//! host namespace and the configured ones.

pub mod counters;
pub mod drops;
pub mod ethtool;
pub mod kallsyms;
pub mod layout;
pub mod links;
pub mod namespaces;
pub mod netlink;
pub mod peers;
pub mod qdisc;
pub mod retransmits;
pub mod snapshots;
pub mod sockdiag;
pub mod unattributed;

use std::sync::Arc;

use anyhow::{Context, Result};
use tracing::warn;

use crate::btf::Btf;
use crate::config::NetConfig;
use crate::model::Collector;
use crate::probes::Probes;
use counters::{Counters, PressureCollector};
use layout::{
    PROBE_DROP, PROBE_RETRANSMIT, PROBE_RETRANSMIT_SYNACK, PROBE_SOCK_EXCEED, PROBE_SOCK_RCVQUEUE,
};
use namespaces::Namespace;
use peers::PeerLabels;

/// The network collectors: the snapshots enabled in `parts`, map readers for the probes that
/// are up.
pub fn collectors(
    probes: &mut Probes,
    config: &NetConfig,
    parts: snapshots::Parts,
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
        out.push(Box::new(snapshots::SnapshotCollector::new(
            namespaces,
            peers.clone(),
            unattributed.clone(),
            parts,
        )));
    }
    if let Err(e) = probe_collectors(probes, peers, unattributed, &mut out) {
        warn!(error = %format!("{e:#}"), "network probe collectors unavailable");
    }
    out
}

fn probe_collectors(
    probes: &mut Probes,
    peers: Arc<PeerLabels>,
    unattributed: Arc<unattributed::Unattributed>,
    out: &mut Vec<Box<dyn Collector>>,
) -> Result<()> {
    let up = |p: &str| probes.is_up(p);
    let (retransmit, drop, exceed, rcvqueue) = (
        up(PROBE_RETRANSMIT) || up(PROBE_RETRANSMIT_SYNACK),
        up(PROBE_DROP),
        up(PROBE_SOCK_EXCEED),
        up(PROBE_SOCK_RCVQUEUE),
    );
    if !(retransmit || drop || exceed || rcvqueue) {
        return Ok(());
    }
    // Per namespace only where both retransmit probes run and sockets carry their namespace:
    // otherwise some of what the kernel counts would be reported unattributed wrongly.
    let by_namespace =
        up(PROBE_RETRANSMIT) && up(PROBE_RETRANSMIT_SYNACK) && probes.net_layout_has_namespaces();
    let mut map = |name: &str| {
        probes
            .take_map(name)
            .with_context(|| format!("map {name} missing from the eBPF object"))
    };
    let counters = Arc::new(Counters::new(map("NET_COUNTERS")?)?);
    if retransmit {
        out.push(Box::new(retransmits::RetransmitCollector::new(
            map("NET_RETRANSMITS")?,
            counters.clone(),
            peers,
            by_namespace.then_some(unattributed),
        )?));
    }
    if drop {
        let btf = Btf::from_kernel()?;
        out.push(Box::new(drops::DropCollector::new(
            map("NET_DROP_REASONS")?,
            map("NET_UNSPECIFIED_DROPS")?,
            &btf,
            counters.clone(),
        )?));
    }
    out.push(Box::new(PressureCollector {
        counters,
        exceed_up: exceed,
        rcvqueue_up: rcvqueue,
    }));
    Ok(())
}
