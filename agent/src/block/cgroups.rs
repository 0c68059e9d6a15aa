//! The per-cgroup block counters (`[cgroups]`): the probes count per (device, op, cgroup id);
//! here ids become bounded `cgroup` labels (`crate::cgroups`), the counters of cgroups that
//! are gone leave the kernel's map, and what they counted stays in their label's series
//! while that label lives (`other` never goes down).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};

use agent_common::block::{CgroupKey, CgroupStats, MAX_CGROUP_KEYS};
use agent_common::maps;
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuHashMap};

use crate::cgroups::Labeller;
use crate::cgroups::counts::CgroupCounts;
use crate::kernel::map_batch::{Batch, value_bytes};
use crate::kernel::map_batch::{fd_of, per_cpu, read};
use crate::probes::Probes;

/// Counters by (device `dev_t`, op, `cgroup` label).
pub type ByCgroup = BTreeMap<(u32, u32, String), CgroupStats>;

pub struct CgroupCounters {
    map: PerCpuHashMap<MapData, CgroupKey, CgroupStats>,
    fd: OwnedFd,
    /// The read's buffers, kept from one scrape to the next.
    buffer: Batch,
    /// By (device, op).
    counts: CgroupCounts<(u32, u32), CgroupStats>,
}

impl CgroupCounters {
    pub fn take(probes: &mut Probes, labeller: Labeller) -> Result<CgroupCounters> {
        let map = probes
            .take_map(maps::BLOCK_CGROUPS)
            .with_context(|| format!("map {} missing from the eBPF object", maps::BLOCK_CGROUPS))?;
        let fd = fd_of(&map)?;
        let map: PerCpuHashMap<MapData, CgroupKey, CgroupStats> = PerCpuHashMap::try_from(map)?;
        Ok(CgroupCounters {
            map,
            fd,
            buffer: Batch::default(),
            counts: CgroupCounts::new(labeller),
        })
    }

    /// This scrape's counters by label, CPUs summed; drops the kernel's entries of cgroups
    /// that are gone.
    pub fn snapshot(&mut self) -> Result<ByCgroup> {
        let value = value_bytes(std::mem::size_of::<CgroupStats>(), true)?;
        let batch = &mut self.buffer;
        batch
            .read(
                self.fd.as_fd(),
                std::mem::size_of::<CgroupKey>(),
                value,
                MAX_CGROUP_KEYS as usize,
                256,
            )
            .with_context(|| format!("reading {}", maps::BLOCK_CGROUPS))?;
        let mut entries = Vec::with_capacity(batch.len);
        for i in 0..batch.len {
            let key: CgroupKey = read(batch.key(i));
            let mut sum = CgroupStats::default();
            for v in per_cpu::<CgroupStats>(batch.value(i)) {
                sum.add(&v);
            }
            entries.push(((key.dev, key.op), key.cgroup, sum));
        }
        let scrape = self.counts.scrape(&entries);
        for i in scrape.gone {
            let ((dev, op), cgroup, _) = entries[i];
            let _ = self.map.remove(&CgroupKey { dev, op, cgroup });
        }
        Ok(scrape
            .counts
            .into_iter()
            .map(|(((dev, op), label), v)| ((dev, op, label), v))
            .collect())
    }

    /// Drops what was counted for devices that no longer exist.
    pub fn forget(&mut self, gone: &[u32]) {
        let keys: Vec<CgroupKey> = self
            .map
            .keys()
            .filter_map(Result::ok)
            .filter(|k| gone.contains(&k.dev))
            .collect();
        for k in keys {
            let _ = self.map.remove(&k);
        }
        self.counts.retain(|(dev, _)| !gone.contains(dev));
    }
}
