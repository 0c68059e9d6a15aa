//! Lab disks: loop devices on files in /dev/shm, optionally slowed.
//!
//! Two ways to make a disk slow, which look different to the block layer:
//! - a throttle on the disk itself (cgroup v1 blkio): IO is held *before* it becomes a
//!   request, so the device queue stays short and the delay is above the block layer, as
//!   on a host whose IO is capped by its cgroup;
//! - a short device queue (`queue/nr_requests`) in front of a slow device: the disk is a
//!   loop device over a second, throttled loop device, so its requests wait *in flight*
//!   until the device behind serves them, and the queue fills to its limit, as on a
//!   controller with a shallow queue.
//!
//! Throttles only apply to processes in the disk's cgroup: spawn the load with
//! [`Disk::enter_on_spawn`].

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

use crate::blockdev::LoopDevice;
use crate::cgroup::BlkioCgroup;

/// A blkio throttle: IOs or bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throttle {
    ReadIops(u64),
    WriteIops(u64),
    ReadBps(u64),
    WriteBps(u64),
}

impl Throttle {
    fn apply(self, cg: &BlkioCgroup, devnum: &str) -> Result<()> {
        match self {
            Throttle::ReadIops(n) => cg.throttle_iops(devnum, true, n),
            Throttle::WriteIops(n) => cg.throttle_iops(devnum, false, n),
            Throttle::ReadBps(n) => cg.throttle_bps(devnum, true, n),
            Throttle::WriteBps(n) => cg.throttle_bps(devnum, false, n),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DiskSpec {
    /// Bytes.
    pub size: u64,
    /// `queue/nr_requests`: the most requests the device holds in flight.
    pub queue_depth: Option<u32>,
    /// Throttles of the disk itself (IO held above the block layer).
    pub throttle: Vec<Throttle>,
    /// Throttles of a device behind the disk (requests wait in the disk's queue).
    pub behind: Vec<Throttle>,
}

impl DiskSpec {
    pub fn new(size: u64) -> DiskSpec {
        DiskSpec {
            size,
            ..Default::default()
        }
    }

    pub fn queue_depth(mut self, n: u32) -> DiskSpec {
        self.queue_depth = Some(n);
        self
    }

    pub fn throttle(mut self, t: Throttle) -> DiskSpec {
        self.throttle.push(t);
        self
    }

    /// Serves the disk's requests from a device throttled by `t`.
    pub fn slow_behind(mut self, t: Throttle) -> DiskSpec {
        self.behind.push(t);
        self
    }
}

/// A lab disk. Dropped in field order: the disk, the device behind it, then the cgroup
/// (which the kernel removes only once the load in it has exited).
pub struct Disk {
    pub dev: LoopDevice,
    behind: Option<LoopDevice>,
    cgroup: Option<BlkioCgroup>,
    pub spec: DiskSpec,
}

impl Disk {
    pub fn new(tag: &str, spec: DiskSpec) -> Result<Disk> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let file_tag = format!("lab-{tag}{n}");
        let (dev, behind) = if spec.behind.is_empty() {
            (LoopDevice::new(&file_tag, spec.size)?, None)
        } else {
            let behind = LoopDevice::new(&file_tag, spec.size)?;
            (LoopDevice::over(&behind.dev)?, Some(behind))
        };
        let cgroup = if spec.throttle.is_empty() && spec.behind.is_empty() {
            None
        } else {
            Some(BlkioCgroup::new(&format!("lab-{tag}{n}"))?)
        };
        let disk = Disk {
            dev,
            behind,
            cgroup,
            spec,
        };
        if let Some(cg) = &disk.cgroup {
            for t in &disk.spec.throttle {
                t.apply(cg, &disk.dev.devnum()?)?;
            }
            if let Some(b) = &disk.behind {
                for t in &disk.spec.behind {
                    t.apply(cg, &b.devnum()?)?;
                }
            }
        }
        if let Some(n) = disk.spec.queue_depth {
            // The loop driver's default scheduler may cap nr_requests differently; with
            // none the limit is the tag depth, which nr_requests then sets.
            disk.dev.set_queue_attr("scheduler", "none")?;
            disk.dev
                .set_queue_attr("nr_requests", &n.to_string())
                .with_context(|| format!("a queue of {n} on {}", disk.dev.name))?;
        }
        Ok(disk)
    }

    /// The kernel name (`loop3`).
    pub fn name(&self) -> &str {
        &self.dev.name
    }

    pub fn path(&self) -> &std::path::Path {
        &self.dev.dev
    }

    /// Puts a command's process in the disk's cgroup before it execs, so its IO is
    /// throttled; no-op for a disk without throttles.
    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        match &self.cgroup {
            Some(cg) => cg.enter_on_spawn(cmd),
            None => Ok(()),
        }
    }

    /// Throttles the disk now (a fault injected while a run goes on); a limit of 0 lifts
    /// it. Only for a disk created with a throttle (it has a cgroup): give it a limit it
    /// never reaches, such as 1,000,000 IOPS, to change later.
    pub fn throttle_now(&self, t: Throttle) -> Result<()> {
        let cg = self
            .cgroup
            .as_ref()
            .context("the disk was created without a throttle, so it has no cgroup")?;
        t.apply(cg, &self.dev.devnum()?)
    }

    /// Throttles the device behind the disk now (its requests then wait in the disk's
    /// queue); only for a disk created with `slow_behind` (give it a limit it never
    /// reaches, to change later).
    pub fn throttle_behind_now(&self, t: Throttle) -> Result<()> {
        let (cg, behind) = self
            .cgroup
            .as_ref()
            .zip(self.behind.as_ref())
            .context("the disk was created without a device behind it")?;
        t.apply(cg, &behind.devnum()?)
    }

    /// `queue/nr_requests` as the kernel reports it.
    pub fn nr_requests(&self) -> Result<u32> {
        let p = format!("/sys/block/{}/queue/nr_requests", self.dev.name);
        std::fs::read_to_string(&p)?
            .trim()
            .parse()
            .with_context(|| format!("unreadable {p}"))
    }
}
