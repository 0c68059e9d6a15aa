//! fio's `disk_util`: the block devices the targets live on (a device itself, or the device
//! of a file's filesystem), and what `/sys/block/*/stat` counted on them during the run.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::results::stats::DiskUtil;

/// Counters of one device at the start of the run.
struct Device {
    name: String,
    stat: PathBuf,
    start: [u64; 11],
}

pub struct DiskWatch {
    devices: Vec<Device>,
    start: Instant,
}

/// read/write ios, merges, sectors, ticks, in flight, io_ticks, time in queue.
fn read_stat(p: &Path) -> Option<[u64; 11]> {
    let text = std::fs::read_to_string(p).ok()?;
    let v: Vec<u64> = text
        .split_whitespace()
        .take(11)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    v.try_into().ok()
}

/// The sysfs name and stat file of the device `path` is, or is on.
fn device_of(path: &Path) -> Option<(String, PathBuf)> {
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let dir = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let name = dir.file_name()?.to_string_lossy().into_owned();
    Some((name, dir.join("stat")))
}

impl DiskWatch {
    /// Starts counting on the devices of `paths` (files on filesystems without a block
    /// device, such as tmpfs, have none).
    pub fn start<'a>(paths: impl IntoIterator<Item = &'a Path>) -> DiskWatch {
        let mut devices: Vec<Device> = Vec::new();
        for p in paths {
            if let Some((name, stat)) = device_of(p)
                && !devices.iter().any(|d| d.name == name)
                && let Some(start) = read_stat(&stat)
            {
                devices.push(Device { name, stat, start });
            }
        }
        DiskWatch {
            devices,
            start: Instant::now(),
        }
    }

    /// The counts since the start.
    pub fn finish(&self) -> Vec<DiskUtil> {
        let ms = self.start.elapsed().as_millis().max(1) as f64;
        self.devices
            .iter()
            .filter_map(|d| {
                let now = read_stat(&d.stat)?;
                let delta = |i: usize| now[i].saturating_sub(d.start[i]);
                Some(DiskUtil {
                    name: d.name.clone(),
                    read_ios: delta(0),
                    write_ios: delta(4),
                    read_merges: delta(1),
                    write_merges: delta(5),
                    read_ticks: delta(3),
                    write_ticks: delta(7),
                    in_queue: delta(10),
                    util: (100.0 * delta(9) as f64 / ms).min(100.0),
                })
            })
            .collect()
    }
}
