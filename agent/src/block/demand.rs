//! The block probes that attach on demand, and when they are needed:
//!
//! - the dispatch probe (`block_issue`), while a reported request-based device may not have
//!   its dispatches stamped by the kernel, or a device's requests were seen completing
//!   without that stamp, or an option needs every dispatch (`dispatch_time = "probe"`,
//!   `inflight_at_issue`). The kernel stamps a request's dispatch (`io_start_time_ns`) on
//!   a queue that keeps statistics (`QUEUE_FLAG_STATS`), which writeback throttling turns on
//!   for good when it is set up: a queue whose `wbt_lat_usec` can be read is stamped. Its
//!   passthrough commands are not: the first ones seen without a stamp mark the device.
//! - the bio probes (`block_bio_queue`, `block_bio_completion`), while a reported bio-based
//!   device (one without `mq/`: dm, md, NVMe multipath heads, drbd, zram) holds any sectors.
//!
//! Decided from /sys/block at each scrape (so a scrape after a device appears finds the
//! probes it needs attached) and every second in between.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::DirEntryExt;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agent_common::block::UNREC_NO_DISPATCH_STAMP;
use anyhow::Result;
use tracing::{info, warn};

use super::maps::BlockSnapshot;
use crate::host::devices::{DeviceFilter, hidden_number, proc_table};
use crate::host::sysfs;
use crate::probes::on_demand::OnDemand;

/// How often /sys/block is looked at between scrapes.
const EVERY: Duration = Duration::from_secs(1);

/// What the devices in /sys/block need, by name, with the device numbers that exist.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Reported request-based devices whose kernel may not stamp dispatches.
    pub unstamped: Vec<String>,
    /// Reported bio-based devices.
    pub bio_based: Vec<String>,
    /// Every device in /sys/block with sectors, by number (`dev_t` as the probes give it).
    pub present: BTreeSet<u32>,
    /// Whether any md array exists (a device with an `md/` directory, assembled or not). md
    /// hands its own bio to the devices below on some kernels (5.10), whose completion the
    /// kernel then does not trace: while an array exists, the request completion looks its
    /// bios up.
    pub md_arrays: bool,
}

/// What does not change while a disk exists, kept by its /sys/block entry (name and inode:
/// a disk removed and added again gets a new entry), so that a scan reads only what can
/// change: the size, and (once a second) whether writeback throttling is set up.
#[derive(Default)]
pub struct Known(HashMap<(String, u64), Fixed>);

#[derive(Clone, Copy)]
struct Fixed {
    dev: Option<u32>,
    request_based: bool,
    md: bool,
    /// Whether `queue/wbt_lat_usec` could be read, and when: read again after [`EVERY`].
    throttled: Option<(bool, Instant)>,
}

/// Reads what the reported devices in `sys_block` need.
pub fn needs(sys_block: &Path, filter: &DeviceFilter) -> Needs {
    scan(sys_block, &HashSet::new(), filter, &mut Known::default())
}

/// The disks a `/proc/partitions`-like file lists, by number. The kernel lists only disks
/// with sectors (and leaves some of those out on older kernels): one read that spares a read
/// of `size` per listed disk.
fn listed(partitions: &Path) -> HashSet<u32> {
    proc_table(partitions)
        .into_iter()
        .filter(|(_, f)| f.first().and_then(|b| b.parse::<u64>().ok()) > Some(0))
        .map(|(dev, _)| dev)
        .collect()
}

/// [`needs`], with what `known` holds of the disks seen before; a disk in `listed` has
/// sectors, the others' `size` is read.
fn scan(
    sys_block: &Path,
    listed: &HashSet<u32>,
    filter: &DeviceFilter,
    known: &mut Known,
) -> Needs {
    let mut out = Needs::default();
    let Ok(dir) = std::fs::read_dir(sys_block) else {
        known.0.clear();
        return out;
    };
    let mut entries: Vec<_> = dir.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut seen = HashMap::with_capacity(entries.len());
    for e in entries {
        let (name, path) = (e.file_name().to_string_lossy().into_owned(), e.path());
        let key = (name, e.ino());
        let mut fixed = match known.0.get(&key) {
            Some(f) => *f,
            None => Fixed {
                dev: number(&path),
                request_based: path.join("mq").is_dir(),
                md: path.join("md").is_dir(),
                throttled: None,
            },
        };
        out.md_arrays |= fixed.md;
        // A detached loop device, an unset zram: no sectors, no IO.
        let sectors = match fixed.dev {
            Some(dev) if listed.contains(&dev) => 1,
            _ => sysfs::read_u64(&path.join("size")).unwrap_or(0),
        };
        if sectors > 0 {
            if let Some(dev) = fixed.dev {
                out.present.insert(dev);
            }
            let name = &key.0;
            if filter.allows(name) {
                if !fixed.request_based {
                    out.bio_based.push(name.clone());
                } else if !throttled(&mut fixed, &path) {
                    out.unstamped.push(name.clone());
                }
            }
        }
        seen.insert(key, fixed);
    }
    known.0 = seen;
    out
}

/// Whether the request-based disk in `dir` has writeback throttling set up (its
/// `queue/wbt_lat_usec` can be read), as read within the last [`EVERY`].
fn throttled(fixed: &mut Fixed, dir: &Path) -> bool {
    match fixed.throttled {
        Some((yes, at)) if at.elapsed() < EVERY => yes,
        _ => {
            let yes = sysfs::read(&dir.join("queue/wbt_lat_usec")).is_some();
            fixed.throttled = Some((yes, Instant::now()));
            yes
        }
    }
}

/// The number the probes give the disk in `dir`: its `dev`, or for a hidden disk its
/// stand-in ([`hidden_number`]).
fn number(dir: &Path) -> Option<u32> {
    match sysfs::read(&dir.join("dev")) {
        Some(s) => {
            let (major, minor) = s.trim().split_once(':')?;
            Some((major.parse::<u32>().ok()? << 20) | minor.parse::<u32>().ok()?)
        }
        None => hidden_number(dir),
    }
}

/// The on-demand block probes and what keeps them attached.
pub struct Demand {
    dispatch: Option<OnDemand>,
    /// Completion first: attached before the entry probe, detached after it.
    bio: Vec<OnDemand>,
    /// An option needs every dispatch.
    dispatch_always: bool,
    filter: DeviceFilter,
    /// Devices whose requests completed without the kernel's dispatch stamp.
    unstamped: BTreeSet<u32>,
    /// Per device, requests counted but not timed, and the probes' `no_dispatch_stamp`
    /// count, at the last scrape.
    untimed: BTreeMap<u32, u64>,
    no_dispatch_stamp: u64,
    /// What the last decision was, to log changes.
    last: (bool, bool),
    /// The disks the last scan saw.
    known: Known,
    /// Whether the last scan saw an md array.
    md_arrays: bool,
    /// The devices with sectors the last scan saw.
    present: BTreeSet<u32>,
}

impl Demand {
    pub fn new(
        dispatch: Option<OnDemand>,
        bio: Vec<OnDemand>,
        dispatch_always: bool,
        filter: DeviceFilter,
    ) -> Demand {
        Demand {
            dispatch,
            bio,
            dispatch_always,
            filter,
            unstamped: BTreeSet::new(),
            untimed: BTreeMap::new(),
            no_dispatch_stamp: 0,
            last: (false, false),
            known: Known::default(),
            md_arrays: false,
            present: BTreeSet::new(),
        }
    }

    /// Whether the last look at /sys/block found an md array.
    pub fn md_arrays(&self) -> bool {
        self.md_arrays
    }

    /// The devices with sectors the last look at /sys/block found, by number.
    pub fn present(&self) -> &BTreeSet<u32> {
        &self.present
    }

    /// Attaches or detaches each probe as the devices in `sys_block` need.
    pub fn reconcile(&mut self, sys_block: &Path) -> Result<()> {
        let listed = listed(Path::new("/proc/partitions"));
        let needs = scan(sys_block, &listed, &self.filter, &mut self.known);
        self.md_arrays = needs.md_arrays;
        self.present = needs.present.clone();
        self.unstamped.retain(|d| needs.present.contains(d));
        let dispatch =
            self.dispatch_always || !needs.unstamped.is_empty() || !self.unstamped.is_empty();
        let bio = !needs.bio_based.is_empty();
        if let Some(p) = &mut self.dispatch {
            p.set(dispatch)?;
        }
        // The completion is attached before the entry and detached after it, so that no
        // bio is timed in without being timed out.
        if bio {
            for p in &mut self.bio {
                p.set(true)?;
            }
        } else {
            for p in self.bio.iter_mut().rev() {
                p.set(false)?;
            }
        }
        if (dispatch, bio) != self.last {
            info!(
                dispatch,
                bio,
                unstamped = ?needs.unstamped,
                seen_unstamped = self.unstamped.len(),
                bio_based = ?needs.bio_based,
                "on-demand block probes"
            );
            self.last = (dispatch, bio);
        }
        Ok(())
    }

    /// Marks the devices whose requests went untimed for want of a dispatch stamp since the
    /// last scrape (the probes count those as `no_dispatch_stamp`, and per device as
    /// requests counted but not timed): the kernel does not stamp some of their requests.
    pub fn observe(&mut self, snap: &BlockSnapshot) {
        let mut untimed: BTreeMap<u32, u64> = BTreeMap::new();
        for (k, s) in &snap.ops {
            let counted: u64 = s.size.iter().sum();
            let timed: u64 = s.service.iter().sum();
            *untimed.entry(k.dev).or_default() += counted.saturating_sub(timed);
        }
        let missed = snap.counters[UNREC_NO_DISPATCH_STAMP as usize];
        if missed > self.no_dispatch_stamp {
            for (dev, n) in &untimed {
                if *n > self.untimed.get(dev).copied().unwrap_or(0) && self.unstamped.insert(*dev) {
                    info!(
                        dev = format!("{}:{}", dev >> 20, dev & 0xfffff),
                        "requests completed without the kernel's dispatch stamp: the dispatch \
                         probe stays attached while the device exists"
                    );
                }
            }
        }
        self.no_dispatch_stamp = missed;
        self.untimed = untimed;
    }
}

/// Reconciles every second while `demand` lives.
pub fn watch(demand: &Arc<Mutex<Demand>>) {
    let weak: Weak<Mutex<Demand>> = Arc::downgrade(demand);
    let spawned = std::thread::Builder::new()
        .name("block-probes".into())
        .spawn(move || {
            while let Some(d) = weak.upgrade() {
                if let Err(e) = d
                    .lock()
                    .expect("on-demand probes")
                    .reconcile(Path::new("/sys/block"))
                {
                    warn!(error = %format!("{e:#}"), "on-demand block probes");
                }
                drop(d);
                std::thread::sleep(EVERY);
            }
        });
    if let Err(e) = spawned {
        warn!(error = %e, "no thread for the on-demand block probes: they follow scrapes only");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(root: &Path, name: &str, sectors: u64, mq: bool, wbt: bool, dev: Option<&str>) {
        let d = root.join(name);
        std::fs::create_dir_all(d.join("queue")).unwrap();
        std::fs::write(d.join("size"), format!("{sectors}\n")).unwrap();
        if mq {
            std::fs::create_dir_all(d.join("mq/0")).unwrap();
        }
        if wbt {
            std::fs::write(d.join("queue/wbt_lat_usec"), "2000\n").unwrap();
        }
        if let Some(dev) = dev {
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
        }
    }

    #[test]
    fn needs_come_from_reported_devices_with_sectors() {
        let root = std::env::temp_dir().join(format!("stornet-demand-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        disk(&root, "loop0", 2048, true, true, Some("7:0"));
        disk(&root, "loop1", 0, true, false, Some("7:1")); // detached
        disk(&root, "sdb", 2048, true, false, Some("8:16")); // no wbt: may be unstamped
        disk(&root, "dm-0", 2048, false, false, Some("253:0"));
        disk(&root, "zram0", 2048, false, false, Some("252:0")); // excluded below
        disk(&root, "md127", 0, false, false, Some("9:127")); // not assembled
        let filter = DeviceFilter {
            include: Vec::new(),
            exclude: vec!["zram*".into()],
        };
        let n = needs(&root, &filter);
        assert_eq!(n.unstamped, ["sdb"]);
        assert_eq!(n.bio_based, ["dm-0"]);
        let present: Vec<u32> = n.present.into_iter().collect();
        assert_eq!(
            present,
            [7 << 20, 8 << 20 | 16, 252 << 20, 253 << 20],
            "devices with sectors, reported or not"
        );
        assert!(!n.md_arrays);
        assert_eq!(needs(&root.join("missing"), &filter), Needs::default());
        std::fs::create_dir_all(root.join("md127/md")).unwrap();
        assert!(
            needs(&root, &filter).md_arrays,
            "an array, assembled or not"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn disks_the_kernel_lists_with_sectors_are_present_without_a_size_read() {
        let root = std::env::temp_dir().join(format!("stornet-listed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(
            root.join("partitions"),
            "major minor  #blocks  name\n\n 254        0  268435456 vda\n   7        1          0 loop1\n 259 0 1024 nvme0n1\n",
        )
        .unwrap();
        let l = listed(&root.join("partitions"));
        assert_eq!(l, HashSet::from([254 << 20, 259 << 20]));
        assert!(listed(&root.join("gone")).is_empty());
        // Listed: present even though the tree's own size says 0 (it is not read).
        let sys = root.join("block");
        disk(&sys, "vda", 0, true, true, Some("254:0"));
        disk(&sys, "loop1", 0, true, true, Some("7:1"));
        let n = scan(&sys, &l, &DeviceFilter::default(), &mut Known::default());
        assert_eq!(n.present.into_iter().collect::<Vec<_>>(), [254 << 20]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_running_kernels_list_agrees_with_sysfs() {
        let l = listed(Path::new("/proc/partitions"));
        let sysfs = needs(Path::new("/sys/block"), &DeviceFilter::default()).present;
        for dev in &l {
            // A partition is listed too; /sys/block holds whole disks only.
            let whole = Path::new("/sys/dev/block")
                .join(format!("{}:{}", dev >> 20, dev & 0xfffff))
                .join("partition");
            assert!(
                whole.exists() || sysfs.contains(dev),
                "{dev:#x} listed, not in sysfs"
            );
        }
    }

    #[test]
    fn a_scan_reads_again_what_a_disk_added_again_under_its_name_is() {
        let root = std::env::temp_dir().join(format!("stornet-known-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let filter = DeviceFilter::default();
        let mut known = Known::default();
        let none = HashSet::new();
        disk(&root, "sdb", 2048, true, true, Some("8:16"));
        let first = scan(&root, &none, &filter, &mut known);
        assert_eq!(first, needs(&root, &filter));
        assert_eq!(
            scan(&root, &none, &filter, &mut known),
            first,
            "from what is known"
        );
        // What can change is read again: writeback throttling after a second, the size at
        // each scan.
        std::fs::remove_file(root.join("sdb/queue/wbt_lat_usec")).unwrap();
        assert_eq!(
            scan(&root, &none, &filter, &mut known),
            first,
            "throttling read a moment ago"
        );
        for f in known.0.values_mut() {
            f.throttled = f.throttled.map(|(yes, at)| (yes, at - EVERY));
        }
        assert_eq!(scan(&root, &none, &filter, &mut known).unstamped, ["sdb"]);
        std::fs::write(root.join("sdb/size"), "0\n").unwrap();
        assert!(scan(&root, &none, &filter, &mut known).present.is_empty());
        // The disk goes and another comes under its name (a new entry, made before the old
        // one goes, so that its inode differs): bio-based, with another number.
        disk(&root, "sdb.new", 2048, false, false, Some("253:4"));
        std::fs::remove_dir_all(root.join("sdb")).unwrap();
        std::fs::rename(root.join("sdb.new"), root.join("sdb")).unwrap();
        let again = scan(&root, &none, &filter, &mut known);
        assert_eq!(again.bio_based, ["sdb"]);
        assert_eq!(
            again.present.into_iter().collect::<Vec<_>>(),
            [253 << 20 | 4]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn devices_seen_untimed_are_marked_while_the_counter_moves() {
        use agent_common::block::{DevOp, OpStats};
        let mut d = Demand::new(None, Vec::new(), false, DeviceFilter::default());
        let snap = |untimed_a: u64, untimed_b: u64, missed: u64| {
            let mut s = BlockSnapshot::default();
            for (dev, n) in [(1u32, untimed_a), (2, untimed_b)] {
                let mut st = OpStats::ZERO;
                st.size[3] = 10 + n;
                st.service[5] = 10;
                s.ops.insert(DevOp { dev, op: 0 }, st);
            }
            s.counters[UNREC_NO_DISPATCH_STAMP as usize] = missed;
            s
        };
        d.observe(&snap(0, 0, 0));
        assert!(d.unstamped.is_empty());
        // Requests counted but not timed, without a missing stamp: never dispatched.
        d.observe(&snap(2, 0, 0));
        assert!(d.unstamped.is_empty());
        d.observe(&snap(2, 3, 3));
        assert_eq!(d.unstamped.iter().copied().collect::<Vec<_>>(), [2]);
    }
}
