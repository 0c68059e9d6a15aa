//! Collectors that read the network probes' maps: retransmits per peer, drops per kernel
//! reason, socket pressure and overflow counters.

pub mod counters;
pub mod drops;
pub mod kallsyms;
pub mod layout;
pub mod retransmits;

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::btf::Btf;
use crate::model::Collector;
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use crate::probes::Probes;
use counters::{Counters, PressureCollector};
use layout::{
    PROBE_DROP, PROBE_RETRANSMIT, PROBE_RETRANSMIT_SYNACK, PROBE_SOCK_EXCEED, PROBE_SOCK_RCVQUEUE,
};

/// Map readers for the network probes that are up.
pub fn collectors(
    probes: &mut Probes,
    peers: Arc<PeerLabels>,
    unattributed: Arc<Unattributed>,
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
