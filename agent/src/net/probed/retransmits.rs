//! `stornet_tcp_retransmits_total{peer}` from the kernel's per-peer retransmit map.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};

use agent_common::maps;
use agent_common::net::{AF_INET, AF_INET6, COUNTER_RETRANS_OVERFLOW, MAX_PEER_ENTRIES, PeerKey};
use anyhow::{Context, Result};

use super::counters::Counters;
use crate::kernel::map_batch::{Batch, fd_of, per_cpu, read, value_bytes};
use crate::model::{Collector, MetricFamily};
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use metric_names::labels::PEER;

pub struct RetransmitCollector {
    /// The per-peer map, read in batches into buffers kept between scrapes (a map walk
    /// would take two system calls per peer).
    map: OwnedFd,
    buffer: Mutex<Batch>,
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
            map: fd_of(&map).context(maps::NET_RETRANSMITS)?,
            buffer: Mutex::new(Batch::default()),
            counters,
            peers,
            unattributed,
        })
    }
}

impl Collector for RetransmitCollector {
    fn name(&self) -> &'static str {
        "tcp_retransmits"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut items = Vec::new();
        let mut by_namespace: HashMap<u64, u64> = HashMap::new();
        {
            let mut batch = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
            batch
                .read(
                    self.map.as_fd(),
                    std::mem::size_of::<PeerKey>(),
                    value_bytes(std::mem::size_of::<u64>(), true)?,
                    MAX_PEER_ENTRIES as usize,
                    256,
                )
                .context(maps::NET_RETRANSMITS)?;
            for i in 0..batch.len {
                let key: PeerKey = read(batch.key(i));
                let n = per_cpu::<u64>(batch.value(i)).sum::<u64>();
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
