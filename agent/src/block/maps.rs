//! The block probes' maps, read into a plain snapshot (CPUs summed) at scrape time, each map
//! in one batch read.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, OwnedFd};

use agent_common::block::{
    BlockControl, CONTROL_SECTION, COUNTERS, DevOp, ErrorKey, FAST_SLOTS, FastSlot, MAX_DEV_OPS,
    MAX_ERROR_KEYS, OpStats, QueueSlot,
};
use anyhow::{Context, Result};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap, PerCpuValues};

use crate::kernel::map_batch::{Batch, fd_of, per_cpu, read, value_bytes};
use crate::probes::Probes;
use agent_common::maps;

/// Everything the block probes counted, summed over CPUs.
#[derive(Clone, Debug, Default)]
pub struct BlockSnapshot {
    pub ops: BTreeMap<DevOp, OpStats>,
    /// Requests in flight per device (`dev_t`): the probes' count when they track it, else
    /// the kernel's (`/sys/block/*/inflight`), filled in by the collector.
    pub inflight: BTreeMap<u32, i64>,
    pub errors: BTreeMap<ErrorKey, u64>,
    /// The probes' event counters (`UNREC_*`, `STAMP_*`).
    pub counters: [u64; COUNTERS],
}

/// Adds `b` into `a`, slot by slot.
pub fn add_stats(a: &mut OpStats, b: &OpStats) {
    for (x, y) in a.additive_mut().into_iter().zip(b.additive()) {
        for (x, y) in x.iter_mut().zip(y) {
            *x += y;
        }
    }
    // Not a count: the device's in-flight slot, the same in every copy that knows it.
    a.queue_slot = a.queue_slot.max(b.queue_slot);
}

/// The (queue slot, device) pairs the probes' copies name, each CPU's copy on its own.
#[derive(Default)]
struct QueuesSeen(BTreeSet<(u32, u32)>);

impl QueuesSeen {
    fn note(&mut self, dev: u32, s: &OpStats) {
        if s.queue_slot > 0 {
            self.0.insert(((s.queue_slot - 1) as u32, dev));
        }
    }
}

pub struct BlockMaps {
    fast: PerCpuArray<MapData, FastSlot>,
    stats: PerCpuHashMap<MapData, DevOp, OpStats>,
    queues: Array<MapData, QueueSlot>,
    control: Array<MapData, BlockControl>,
    /// What was last written to `control`.
    settings: BlockControl,
    errors: HashMap<MapData, ErrorKey, u64>,
    /// Copies of the fds of the maps read at each scrape, for batch reads.
    read_fds: ReadFds,
    /// The buffers of those reads, kept from one scrape to the next.
    buffers: Buffers,
}

#[derive(Default)]
struct Buffers {
    fast: Batch,
    stats: Batch,
    errors: Batch,
    counters: Batch,
}

struct ReadFds {
    fast: OwnedFd,
    stats: OwnedFd,
    errors: OwnedFd,
    counters: OwnedFd,
}

/// Reads the map `fd` of `K` keys and `V` values into `into`.
fn batch<'a, K, V>(
    into: &'a mut Batch,
    fd: &OwnedFd,
    per_cpu: bool,
    max: u32,
    what: &str,
) -> Result<&'a Batch> {
    let value = value_bytes(std::mem::size_of::<V>(), per_cpu)?;
    into.read(
        fd.as_fd(),
        std::mem::size_of::<K>(),
        value,
        max as usize,
        (max as usize).min(256),
    )
    .with_context(|| format!("reading {what}"))?;
    Ok(into)
}

fn take(probes: &mut Probes, name: &str) -> Result<aya::maps::Map> {
    probes
        .take_map(name)
        .with_context(|| format!("map {name} missing from the eBPF object"))
}

impl BlockMaps {
    pub fn take(probes: &mut Probes) -> Result<BlockMaps> {
        let (fast, stats) = (
            take(probes, maps::BLOCK_FAST)?,
            take(probes, maps::BLOCK_STATS)?,
        );
        let (errors, counters) = (
            take(probes, maps::BLOCK_ERRORS)?,
            take(probes, maps::BLOCK_COUNTERS)?,
        );
        let read_fds = ReadFds {
            fast: fd_of(&fast)?,
            stats: fd_of(&stats)?,
            errors: fd_of(&errors)?,
            counters: fd_of(&counters)?,
        };
        // The counters are only read, through their fd.
        drop(counters);
        Ok(BlockMaps {
            fast: PerCpuArray::try_from(fast)?,
            stats: PerCpuHashMap::try_from(stats)?,
            queues: Array::try_from(take(probes, maps::BLOCK_QUEUES)?)?,
            control: Array::try_from(take(probes, CONTROL_SECTION)?)?,
            settings: BlockControl::default(),
            errors: HashMap::try_from(errors)?,
            read_fds,
            buffers: Buffers::default(),
        })
    }

    /// Writes the settings the probes read: `probe_stamps` makes the issue probe stamp
    /// every dispatch itself; `track_inflight` makes the probes count requests in flight;
    /// `cgroups` makes the completion count per issuing cgroup.
    pub fn configure(
        &mut self,
        probe_stamps: bool,
        track_inflight: bool,
        cgroups: bool,
    ) -> Result<()> {
        self.write(BlockControl {
            probe_stamps: probe_stamps as u32,
            track_inflight: track_inflight as u32,
            cgroups: cgroups as u32,
            ..self.settings
        })
    }

    /// Whether the request completion looks a request's bios up among those timed through
    /// a bio-based device (`BlockControl::bios_in_requests`); written only when it changes.
    pub fn look_up_request_bios(&mut self, on: bool) -> Result<()> {
        if (self.settings.bios_in_requests != 0) == on {
            return Ok(());
        }
        self.write(BlockControl {
            bios_in_requests: on as u32,
            ..self.settings
        })
    }

    fn write(&mut self, ctl: BlockControl) -> Result<()> {
        self.control
            .set(0, ctl, 0)
            .with_context(|| format!("writing {CONTROL_SECTION}"))?;
        self.settings = ctl;
        Ok(())
    }

    pub fn snapshot(&mut self) -> Result<BlockSnapshot> {
        let mut snap = BlockSnapshot::default();
        let (fds, buf) = (&self.read_fds, &mut self.buffers);
        // Each CPU's copy of a direct-mapped slot names the (device, op) it holds there.
        let mut queues = QueuesSeen::default();
        let fast =
            batch::<u32, FastSlot>(&mut buf.fast, &fds.fast, true, FAST_SLOTS, maps::BLOCK_FAST)?;
        for i in 0..fast.len {
            for slot in per_cpu::<FastSlot>(fast.value(i)).filter(|s| s.owner.dev != 0) {
                queues.note(slot.owner.dev, &slot.stats);
                add_stats(
                    snap.ops.entry(slot.owner).or_insert(OpStats::ZERO),
                    &slot.stats,
                );
            }
        }
        let stats = batch::<DevOp, OpStats>(
            &mut buf.stats,
            &fds.stats,
            true,
            MAX_DEV_OPS,
            maps::BLOCK_STATS,
        )?;
        for i in 0..stats.len {
            let key: DevOp = read(stats.key(i));
            let total = snap.ops.entry(key).or_insert(OpStats::ZERO);
            for v in per_cpu::<OpStats>(stats.value(i)) {
                queues.note(key.dev, &v);
                add_stats(total, &v);
            }
        }
        // The in-flight count of each device's queue. Every queue a device was seen on
        // counts, as long as the queue still names it: a device removed and added again
        // under the same number gets a new queue, and the old one must not hide it.
        for (id, dev) in queues.0 {
            let slot = self
                .queues
                .get(&id, 0)
                .with_context(|| format!("reading {}", maps::BLOCK_QUEUES))?;
            if slot.dev == dev {
                *snap.inflight.entry(dev).or_default() += slot.inflight;
            }
        }
        let errors = batch::<ErrorKey, u64>(
            &mut buf.errors,
            &fds.errors,
            false,
            MAX_ERROR_KEYS,
            maps::BLOCK_ERRORS,
        )?;
        for i in 0..errors.len {
            snap.errors
                .insert(read(errors.key(i)), read(errors.value(i)));
        }
        let counters = batch::<u32, u64>(
            &mut buf.counters,
            &fds.counters,
            true,
            COUNTERS as u32,
            maps::BLOCK_COUNTERS,
        )?;
        for i in 0..counters.len {
            let index: u32 = read(counters.key(i));
            if let Some(total) = snap.counters.get_mut(index as usize) {
                *total = per_cpu::<u64>(counters.value(i)).sum();
            }
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
