//! The block probes' maps, read into a plain snapshot (CPUs summed) at scrape time.

use std::collections::BTreeMap;

use agent_common::block::{
    BlockControl, COUNTERS, DevOp, ErrorKey, FAST_SLOTS, FastSlot, OpStats, QueueSlot,
};
use anyhow::{Context, Result};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap, PerCpuValues};

use crate::probes::Probes;

/// Everything the block probes counted, summed over CPUs.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub ops: BTreeMap<DevOp, OpStats>,
    /// Requests in flight per device (`dev_t`).
    pub inflight: BTreeMap<u32, i64>,
    pub errors: BTreeMap<ErrorKey, u64>,
    /// The probes' event counters (`UNREC_*`, `STAMP_*`).
    pub counters: [u64; COUNTERS],
}

/// Adds `b` into `a`, slot by slot.
pub fn add_stats(a: &mut OpStats, b: &OpStats) {
    let pairs = a
        .queue
        .iter_mut()
        .zip(&b.queue)
        .chain(a.service.iter_mut().zip(&b.service))
        .chain(a.size.iter_mut().zip(&b.size))
        .chain(a.depth.iter_mut().zip(&b.depth));
    for (x, y) in pairs {
        *x += y;
    }
    a.queue_ns += b.queue_ns;
    a.service_ns += b.service_ns;
    a.bytes += b.bytes;
    a.depth_sum += b.depth_sum;
    a.requeues += b.requeues;
    a.queue_slot = a.queue_slot.max(b.queue_slot);
}

pub struct BlockMaps {
    fast: PerCpuArray<MapData, FastSlot>,
    stats: PerCpuHashMap<MapData, DevOp, OpStats>,
    queues: Array<MapData, QueueSlot>,
    control: Array<MapData, BlockControl>,
    errors: HashMap<MapData, ErrorKey, u64>,
    counters: PerCpuArray<MapData, u64>,
}

fn take(probes: &mut Probes, name: &str) -> Result<aya::maps::Map> {
    probes
        .take_map(name)
        .with_context(|| format!("map {name} missing from the eBPF object"))
}

impl BlockMaps {
    pub fn take(probes: &mut Probes) -> Result<BlockMaps> {
        Ok(BlockMaps {
            fast: PerCpuArray::try_from(take(probes, "BLOCK_FAST")?)?,
            stats: PerCpuHashMap::try_from(take(probes, "BLOCK_STATS")?)?,
            queues: Array::try_from(take(probes, "BLOCK_QUEUES")?)?,
            control: Array::try_from(take(probes, "BLOCK_CONTROL")?)?,
            errors: HashMap::try_from(take(probes, "BLOCK_ERRORS")?)?,
            counters: PerCpuArray::try_from(take(probes, "BLOCK_COUNTERS")?)?,
        })
    }

    /// Writes the settings the probes read: `probe_stamps` makes the issue probe stamp
    /// every dispatch itself.
    pub fn configure(&mut self, probe_stamps: bool) -> Result<()> {
        let ctl = BlockControl {
            probe_stamps: probe_stamps as u32,
            ..Default::default()
        };
        self.control.set(0, ctl, 0).context("writing BLOCK_CONTROL")
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut snap = Snapshot::default();
        // Each CPU's copy of a direct-mapped slot names the (device, op) it holds there.
        for i in 0..FAST_SLOTS {
            let per_cpu = self.fast.get(&i, 0).context("reading BLOCK_FAST")?;
            for slot in per_cpu.iter().filter(|s| s.owner.dev != 0) {
                add_stats(
                    snap.ops.entry(slot.owner).or_insert(OpStats::ZERO),
                    &slot.stats,
                );
            }
        }
        for entry in self.stats.iter() {
            let (key, per_cpu) = entry.context("reading BLOCK_STATS")?;
            let total = snap.ops.entry(key).or_insert(OpStats::ZERO);
            for v in per_cpu.iter() {
                add_stats(total, v);
            }
        }
        // The in-flight count of each device's queue.
        let mut slots: BTreeMap<u32, u32> = BTreeMap::new();
        for (key, s) in &snap.ops {
            if s.queue_slot > 0 {
                slots.insert((s.queue_slot - 1) as u32, key.dev);
            }
        }
        for (id, dev) in slots {
            let slot = self.queues.get(&id, 0).context("reading BLOCK_QUEUES")?;
            if slot.dev == dev {
                *snap.inflight.entry(dev).or_default() += slot.inflight;
            }
        }
        for entry in self.errors.iter() {
            let (key, n) = entry.context("reading BLOCK_ERRORS")?;
            snap.errors.insert(key, n);
        }
        for (i, total) in snap.counters.iter_mut().enumerate() {
            let per_cpu = self
                .counters
                .get(&(i as u32), 0)
                .context("reading BLOCK_COUNTERS")?;
            *total = per_cpu.iter().sum();
        }
        Ok(snap)
    }

    /// Drops what the kernel keeps for devices that no longer exist, so that devices coming
    /// and going (loop devices, hot plug) never fill the maps.
    pub fn forget(&mut self, gone: &[u32]) {
        for i in 0..FAST_SLOTS {
            let Ok(per_cpu) = self.fast.get(&i, 0) else {
                continue;
            };
            if per_cpu.iter().any(|s| gone.contains(&s.owner.dev)) {
                let freed: Vec<FastSlot> = per_cpu
                    .iter()
                    .map(|s| {
                        if gone.contains(&s.owner.dev) {
                            FREE
                        } else {
                            *s
                        }
                    })
                    .collect();
                if let Ok(values) = PerCpuValues::try_from(freed) {
                    let _ = self.fast.set(i, values, 0);
                }
            }
        }
        let stats: Vec<DevOp> = self
            .stats
            .keys()
            .filter_map(Result::ok)
            .filter(|k| gone.contains(&k.dev))
            .collect();
        for k in stats {
            let _ = self.stats.remove(&k);
        }
        let errors: Vec<ErrorKey> = self
            .errors
            .keys()
            .filter_map(Result::ok)
            .filter(|k| gone.contains(&k.dev))
            .collect();
        for k in errors {
            let _ = self.errors.remove(&k);
        }
    }
}

const FREE: FastSlot = FastSlot {
    owner: DevOp { dev: 0, op: 0 },
    stats: OpStats::ZERO,
};
