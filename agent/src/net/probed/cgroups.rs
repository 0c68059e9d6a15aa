//! `stornet_tcp_cgroup_retransmits_total{peer,cgroup}` (`[cgroups]`): the probes count per
//! (peer, cgroup id of the socket); here ids become the bounded `cgroup` labels of
//! `crate::cgroups`, peers the labels of `PeerLabels`, and the entries of cgroups that are
//! gone leave the kernel's map, what they counted staying under their label while it lives.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use agent_common::maps;
use agent_common::net::{COUNTER_CGROUP_RETRANS_OVERFLOW, CgroupPeerKey};
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuHashMap};

use super::counters::Counters;
use super::retransmits::peer_addr;
use crate::cgroups::counts::CgroupCounts;
use crate::cgroups::{Labeller, OTHER};
use crate::model::{Collector, MetricFamily};
use crate::net::peers::PeerLabels;
use metric_names::labels::{CGROUP, PEER};

pub struct CgroupRetransmits {
    counters: Arc<Counters>,
    peers: Arc<PeerLabels>,
    state: Mutex<State>,
}

struct State {
    map: PerCpuHashMap<MapData, CgroupPeerKey, u64>,
    /// By peer address.
    counts: CgroupCounts<Option<IpAddr>, u64>,
}

impl CgroupRetransmits {
    pub fn new(
        map: aya::maps::Map,
        counters: Arc<Counters>,
        peers: Arc<PeerLabels>,
        labeller: Labeller,
    ) -> Result<CgroupRetransmits> {
        let map = PerCpuHashMap::try_from(map).context(maps::NET_CGROUP_RETRANSMITS)?;
        Ok(CgroupRetransmits {
            counters,
            peers,
            state: Mutex::new(State {
                map,
                counts: CgroupCounts::new(labeller),
            }),
        })
    }
}

impl State {
    /// This scrape's counts by (peer, label), CPUs summed; drops the kernel's entries of
    /// cgroups that are gone.
    fn snapshot(&mut self) -> Result<BTreeMap<(Option<IpAddr>, String), u64>> {
        let mut keys = Vec::new();
        let mut entries = Vec::new();
        for entry in self.map.iter() {
            let (key, per_cpu) = entry.context(maps::NET_CGROUP_RETRANSMITS)?;
            entries.push((
                peer_addr(&key.peer),
                key.cgroup,
                per_cpu.iter().sum::<u64>(),
            ));
            keys.push(key);
        }
        let scrape = self.counts.scrape(&entries);
        for i in scrape.gone {
            let _ = self.map.remove(&keys[i]);
        }
        Ok(scrape.counts)
    }
}
impl Collector for CgroupRetransmits {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let by_cgroup = self.state.lock().expect("cgroup retransmits").snapshot()?;
        let mut items: Vec<(Option<IpAddr>, (String, u64))> = by_cgroup
            .into_iter()
            .map(|((peer, label), n)| (peer, (label, n)))
            .collect();
        // Pairs that found the map full, even under cgroup `other`.
        let overflow = self.counters.get(COUNTER_CGROUP_RETRANS_OVERFLOW)?;
        if overflow > 0 {
            items.push((None, (OTHER.into(), overflow)));
        }
        let by_peer = self.peers.fold(
            items,
            |(_, n)| *n,
            |a: &mut BTreeMap<String, u64>, (label, n)| *a.entry(label).or_default() += n,
        );
        let mut f = MetricFamily::of(&metric_names::net::TCP_CGROUP_RETRANSMITS_TOTAL);
        for (peer, by_label) in by_peer {
            for (cgroup, n) in by_label {
                f.scalar(&[(PEER, &peer), (CGROUP, &cgroup)], n as f64);
            }
        }
        out.push(f);
        Ok(())
    }
}
