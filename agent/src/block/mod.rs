//! Block path: the request layout from kernel BTF, the probes' settings, and the collector
//! that turns their maps into `stornet_block_*` families at each scrape.

pub mod cgroups;
pub mod demand;
pub mod export;
pub mod maps;
mod nbd;
pub mod topology;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_common::block::{STAMP_BIO, STAMP_KERNEL, STAMP_PROBE};

use anyhow::Result;
use tracing::warn;

use crate::collectors::probe_spec::{
    BLOCK_BIO_COMPLETION, BLOCK_BIO_QUEUE, BLOCK_ISSUE, ProbeCollector,
};
use crate::config::{BlockConfig, DispatchTime, HistogramDetail};
use crate::host::devices::{DeviceFilter, DeviceLabels, DeviceNames, QueueLimits, proc_table};
use crate::model::{Collector, MetricFamily};
use crate::probes::Probes;
use demand::Demand;
use export::View;
use maps::BlockMaps;

pub struct BlockCollector {
    maps: Mutex<BlockMaps>,
    /// The probes that attach on demand (shared with the thread that looks between scrapes).
    demand: Arc<Mutex<Demand>>,
    /// Per-cgroup counters, when `[cgroups]` is on and the issuer probe is up.
    cgroups: Option<Mutex<cgroups::CgroupCounters>>,
    names: DeviceNames,
    limits: QueueLimits,
    filter: DeviceFilter,
    labels: DeviceLabels,
    fine: bool,
    /// Whether the probes count requests in flight (`inflight_at_issue`).
    track_inflight: bool,
    /// Timed requests of devices that are gone, so that the derived count of kernel dispatch
    /// stamps never goes down.
    retired_timed: AtomicU64,
}

/// Takes the block maps and configures the probes, if any block probe is up. `labeller`:
/// the cgroups to attribute IO to, when `[cgroups]` is on.
pub fn collector(
    probes: &mut Probes,
    config: &BlockConfig,
    labeller: Option<crate::cgroups::Labeller>,
) -> Option<BlockCollector> {
    if !ProbeCollector::Block.probes().any(|p| probes.is_up(p.name)) {
        return None;
    }
    let result = (|| -> Result<BlockCollector> {
        let mut maps = BlockMaps::take(probes)?;
        // Counting per cgroup needs the issuer probe; without it the completion does not try.
        let cgroups = match labeller {
            Some(l) if probes.is_up(crate::collectors::probe_spec::BLOCK_ISSUER.name) => {
                Some(Mutex::new(cgroups::CgroupCounters::take(probes, l)?))
            }
            _ => None,
        };
        maps.configure(
            config.dispatch_time == DispatchTime::Probe,
            config.inflight_at_issue,
            cgroups.is_some(),
        )?;
        let bio = [BLOCK_BIO_COMPLETION.name, BLOCK_BIO_QUEUE.name]
            .into_iter()
            .filter_map(|name| probes.take_on_demand(name))
            .collect();
        let mut demand = Demand::new(
            probes.take_on_demand(BLOCK_ISSUE.name),
            bio,
            config.dispatch_time == DispatchTime::Probe || config.inflight_at_issue,
            config.device_filter(),
        );
        if let Err(e) = demand.reconcile(Path::new("/sys/block")) {
            warn!(error = %format!("{e:#}"), "on-demand block probes");
        }
        maps.look_up_request_bios(demand.md_arrays())?;
        let demand = Arc::new(Mutex::new(demand));
        demand::watch(&demand);
        Ok(BlockCollector {
            maps: Mutex::new(maps),
            demand,
            cgroups,
            names: DeviceNames::default(),
            limits: QueueLimits::default(),
            filter: config.device_filter(),
            labels: DeviceLabels::new(config.max_devices),
            fine: config.histogram == HistogramDetail::Fine,
            track_inflight: config.inflight_at_issue,
            retired_timed: AtomicU64::new(0),
        })
    })();
    match result {
        Ok(c) => Some(c),
        Err(e) => {
            warn!(error = %format!("{e:#}"), "block collector unavailable");
            None
        }
    }
}

impl Collector for BlockCollector {
    fn name(&self) -> &'static str {
        "block"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut maps = self.maps.lock().expect("block maps");
        let mut snap = maps.snapshot()?;
        let (md_arrays, present) = {
            let mut demand = self.demand.lock().expect("on-demand probes");
            demand.observe(&snap);
            if let Err(e) = demand.reconcile(Path::new("/sys/block")) {
                warn!(error = %format!("{e:#}"), "on-demand block probes");
            }
            (demand.md_arrays(), demand.present().clone())
        };
        maps.look_up_request_bios(md_arrays)?;
        // One name per device for this scrape, from one read of /proc/diskstats with the
        // requests each disk has in flight; a disk it does not list (hidden, without a
        // number) is looked up in sysfs. A device's name is asked for once per op, error and
        // gauge.
        let stats = diskstats(Path::new("/proc/diskstats"));
        let names: HashMap<u32, Option<String>> = snap
            .ops
            .keys()
            .map(|k| k.dev)
            .chain(snap.errors.keys().map(|k| k.dev))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .map(|d| match stats.get(&d) {
                Some((name, _)) => (d, Some(name.clone())),
                None => (d, self.names.lookup(d)),
            })
            .collect();
        // Gone: not in /sys/block, or without sectors (a detached loop device stays there
        // with a size of 0, and is as gone as an unplugged disk).
        let gone: Vec<u32> = snap
            .ops
            .keys()
            .map(|k| k.dev)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .filter(|d| !present.contains(d) || names[d].is_none())
            .collect();
        if !gone.is_empty() {
            let retired: u64 = snap
                .ops
                .iter()
                .filter(|(k, _)| gone.contains(&k.dev))
                .map(|(_, s)| timed(s))
                .sum();
            self.retired_timed.fetch_add(retired, Ordering::Relaxed);
            maps.forget(&gone);
            if let Some(c) = &self.cgroups {
                c.lock().expect("cgroup counters").forget(&gone);
            }
            self.labels.retain(|d| !gone.contains(&d));
            // Gone from this scrape too, not only from the next one.
            snap.ops.retain(|k, _| !gone.contains(&k.dev));
            snap.inflight.retain(|d, _| !gone.contains(d));
            snap.errors.retain(|k, _| !gone.contains(&k.dev));
        }
        drop(maps);
        // Requests timed with the kernel's dispatch stamp: every timed one the probe did not
        // stamp, and that was not a bio timed by the bio probes
        // (`maps::BlockSnapshot::counters`).
        let timed: u64 =
            self.retired_timed.load(Ordering::Relaxed) + snap.ops.values().map(timed).sum::<u64>();
        snap.counters[STAMP_KERNEL as usize] = timed
            .saturating_sub(snap.counters[STAMP_PROBE as usize])
            .saturating_sub(snap.counters[STAMP_BIO as usize]);
        if !self.track_inflight {
            for dev in snap.ops.keys().map(|k| k.dev).collect::<Vec<_>>() {
                let n = match stats.get(&dev) {
                    Some((_, n)) => Some(*n),
                    None => names
                        .get(&dev)
                        .and_then(Option::as_deref)
                        .and_then(|name| kernel_inflight(Path::new("/sys/block"), name)),
                };
                if let Some(n) = n {
                    snap.inflight.insert(dev, n);
                }
            }
        }
        let name = |dev| match names.get(&dev) {
            Some(n) => n.clone(),
            None => self.names.lookup(dev),
        };
        let view = View {
            fine: self.fine,
            depth: self.track_inflight,
            filter: &self.filter,
            labels: &self.labels,
            name: &name,
            limits: &|name| self.limits.get(Path::new("/sys/block"), name),
        };
        out.extend(export::families(&snap, &view));
        if let Some(c) = &self.cgroups {
            let by_cgroup = c.lock().expect("cgroup counters").snapshot()?;
            out.extend(export::cgroup_families(&by_cgroup, &view));
        }
        Ok(())
    }
}

/// Each block device in a `/proc/diskstats`-like file by number (`dev_t` as the probes give
/// it): its name and the requests it has in flight (the 12th field, the count the `inflight`
/// attribute splits into reads and writes).
fn diskstats(path: &Path) -> HashMap<u32, (String, i64)> {
    proc_table(path)
        .into_iter()
        .filter_map(|(dev, f)| Some((dev, (f.first()?.clone(), f.get(9)?.parse().ok()?))))
        .collect()
}

/// Requests of one (device, op) timed with a dispatch stamp: its service-time observations.
fn timed(s: &agent_common::block::OpStats) -> u64 {
    s.service.iter().sum()
}

/// The kernel's count of a disk's requests in flight (dispatched to the driver, not yet
/// completed): `/sys/block/<name>/inflight`, reads plus writes.
fn kernel_inflight(sys_block: &Path, name: &str) -> Option<i64> {
    let text = crate::host::sysfs::read(&sys_block.join(name).join("inflight"))?;
    let mut sum = 0i64;
    for n in text.split_whitespace() {
        sum += n.parse::<i64>().ok()?;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diskstats_give_each_disk_its_name_and_requests_in_flight() {
        let dir = std::env::temp_dir().join(format!("stornet-diskstats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("diskstats");
        std::fs::write(
            &path,
            "   7       0 loop0 1071 0 30528 95 5 0 8 1 0 100 96 0 0 0 0 0 0\n \
             259       0 nvme0n1 5 0 40 1 7 0 56 2 12 9 3 0 0 0 0 0 0\n \
             259       1 nvme0n1p1 2 0 16 0 3 0 24 1 2 4 1 0 0 0 0 0 0\n \
             8 16 short 1 2 3\n",
        )
        .unwrap();
        let s = diskstats(&path);
        assert_eq!(s[&(7 << 20)], ("loop0".to_string(), 0));
        assert_eq!(s[&(259 << 20)], ("nvme0n1".to_string(), 12));
        assert_eq!(s[&(259 << 20 | 1)], ("nvme0n1p1".to_string(), 2));
        assert!(!s.contains_key(&(8 << 20 | 16)), "a line cut short");
        assert!(diskstats(&dir.join("gone")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn diskstats_agree_with_sysfs_on_this_host() {
        // Every disk /proc/diskstats lists has the name sysfs gives its number.
        for (dev, (name, _)) in diskstats(Path::new("/proc/diskstats")) {
            let sysfs = crate::host::devices::resolve(
                Path::new("/sys/dev/block"),
                dev >> 20,
                dev & agent_common::block::MINOR_MASK,
            );
            assert_eq!(sysfs.as_deref(), Some(name.as_str()), "{dev:#x}");
        }
    }

    #[test]
    fn kernel_inflight_adds_reads_and_writes() {
        let dir = std::env::temp_dir().join(format!("stornet-inflight-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sda")).unwrap();
        std::fs::write(dir.join("sda/inflight"), "       3        5\n").unwrap();
        std::fs::create_dir_all(dir.join("bad")).unwrap();
        std::fs::write(dir.join("bad/inflight"), "3 x\n").unwrap();
        assert_eq!(kernel_inflight(&dir, "sda"), Some(8));
        assert_eq!(kernel_inflight(&dir, "bad"), None);
        assert_eq!(kernel_inflight(&dir, "gone"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
