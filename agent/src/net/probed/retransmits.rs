//! `stornet_tcp_retransmits_total{peer}` from the kernel's per-peer retransmit map.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use agent_common::maps;
use agent_common::net::{AF_INET, AF_INET6, COUNTER_RETRANS_OVERFLOW, PeerKey};
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuHashMap};

use super::counters::Counters;
use crate::model::{Collector, MetricFamily};
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use metric_names::labels::PEER;

pub struct RetransmitCollector {
    map: Mutex<PerCpuHashMap<MapData, PeerKey, u64>>,
    counters: Arc<Counters>,
    peers: Arc<PeerLabels>,
    /// Where the probes' counts meet the namespaces' own (None where the kernel's layout
    /// gives no namespace of a socket).
    unattributed: Option<Arc<Unattributed>>,
}

/// The address of a kernel peer key; None for a family stornet does not know.
pub fn peer_addr(k: &PeerKey) -> Option<IpAddr> {
    match k.family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
            k.addr[0], k.addr[1], k.addr[2], k.addr[3],
        ))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(k.addr))),
        _ => None,
    }
}

impl RetransmitCollector {
    pub fn new(
        map: aya::maps::Map,
        counters: Arc<Counters>,
        peers: Arc<PeerLabels>,
        unattributed: Option<Arc<Unattributed>>,
    ) -> Result<RetransmitCollector> {
        Ok(RetransmitCollector {
            map: Mutex::new(PerCpuHashMap::try_from(map).context(maps::NET_RETRANSMITS)?),
            counters,
            peers,
            unattributed,
        })
    }
}

impl Collector for RetransmitCollector {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut items = Vec::new();
        let mut by_namespace: HashMap<u64, u64> = HashMap::new();
        {
            let map = self.map.lock().expect("retransmit map");
            for entry in map.iter() {
                let (key, per_cpu) = entry?;
                let n = per_cpu.iter().sum::<u64>();
                *by_namespace.entry(key.netns.into()).or_default() += n;
                items.push((peer_addr(&key), n));
            }
        }
        // Retransmits whose peer found the map full belong to some unlabelled peer.
        items.push((None, self.counters.get(COUNTER_RETRANS_OVERFLOW)?));
        let by_label = self.peers.fold(items, |v| *v, |a: &mut u64, v| *a += v);
        let mut f = MetricFamily::of(&metric_names::net::TCP_RETRANSMITS_TOTAL);
        for (peer, n) in by_label {
            if n > 0 || peer != crate::net::peers::OTHER {
                f.scalar(&[(PEER, &peer)], n as f64);
            }
        }
        out.push(f);
        if let Some(u) = &self.unattributed {
            out.push(u.family(&by_namespace));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_keys_to_addresses() {
        let mut k = PeerKey {
            family: AF_INET,
            _pad: 0,
            netns: 0,
            addr: [0; 16],
        };
        k.addr[..4].copy_from_slice(&[198, 18, 3, 2]);
        assert_eq!(peer_addr(&k), Some("198.18.3.2".parse().unwrap()));
        k.family = AF_INET6;
        k.addr = "fd00::7".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!(peer_addr(&k), Some("fd00::7".parse().unwrap()));
        k.family = 0;
        assert_eq!(peer_addr(&k), None);
    }
}
