//! Collectors that read the network probes' maps: retransmits per peer, drops per kernel
//! reason, socket pressure and overflow counters.

pub mod cgroups;
pub mod counters;
pub mod drops;
pub mod retransmits;

use std::sync::Arc;

use anyhow::{Context, Result};

use agent_common::maps;

use crate::cgroups::Labeller;
use crate::collectors::probe_spec::{ProbeCollector, SOCK_EXCEED_BUF_LIMIT, SOCK_RCVQUEUE_FULL};
use crate::kernel::btf::Btf;
use crate::model::Collector;
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use crate::probes::Probes;
use counters::{Counters, PressureCollector};

/// Map readers for the network probes that are up. `btf` is the kernel's (the drop reasons'
/// names); with `cgroups`, retransmits per cgroup where this kernel's layout allows.
pub fn collectors(
    probes: &mut Probes,
    btf: &Result<Btf>,
    peers: Arc<PeerLabels>,
    unattributed: Arc<Unattributed>,
    cgroups: Option<Labeller>,
    out: &mut Vec<Box<dyn Collector>>,
) -> Result<()> {
    let any_up = |c: ProbeCollector| c.probes().any(|p| probes.is_up(p.name));
    let (retransmit, drop, exceed, rcvqueue) = (
        any_up(ProbeCollector::Retransmits),
        any_up(ProbeCollector::Drops),
        probes.is_up(SOCK_EXCEED_BUF_LIMIT.name),
        probes.is_up(SOCK_RCVQUEUE_FULL.name),
    );
    if !(retransmit || drop || exceed || rcvqueue) {
        return Ok(());
    }
    // Per namespace only where both retransmit probes run and sockets carry their namespace:
    // otherwise some of what the kernel counts would be reported unattributed wrongly.
    let by_namespace = ProbeCollector::Retransmits
        .probes()
        .all(|p| probes.is_up(p.name))
        && probes.net_layout_has_namespaces();
    let by_cgroup = cgroups.filter(|_| retransmit && probes.net_layout_has_cgroups());
    let mut map = |name: &str| {
        probes
            .take_map(name)
            .with_context(|| format!("map {name} missing from the eBPF object"))
    };
    let counters = Arc::new(Counters::new(map(maps::NET_COUNTERS)?)?);
    if retransmit {
        out.push(Box::new(retransmits::RetransmitCollector::new(
            map(maps::NET_RETRANSMITS)?,
            counters.clone(),
            peers.clone(),
            by_namespace.then_some(unattributed),
        )?));
    }
    if let Some(labeller) = by_cgroup {
        out.push(Box::new(cgroups::CgroupRetransmits::new(
            map(maps::NET_CGROUP_RETRANSMITS)?,
            counters.clone(),
            peers,
            labeller,
        )?));
    }
    if drop {
        let btf = btf.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        out.push(Box::new(drops::DropCollector::new(
            map(maps::NET_DROP_REASONS)?,
            map(maps::NET_UNSPECIFIED_DROPS)?,
            btf,
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
