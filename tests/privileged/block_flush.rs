use std::io::Write;

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::fs::{Mount, TempDir, mkfs_ext4};
use stornet_lab::privilege::require_root;

use anyhow::ensure;

use crate::block_util::{count, settled, up_to_three_times};

/// fsync of a file in an ext4 filesystem on a loop device: the flushes the device receives are
/// counted as `op="flush"`, as many as /sys/block/loopX/stat counts.
#[test]
fn block_fsync_is_counted_as_flush() {
    let test = "block_fsync_is_counted_as_flush";
    if !require_root(test) || !stornet_lab::privilege::require_tool(test, "mkfs.ext4") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let disk = LoopDevice::new("blockflush", 64 << 20).expect("loop device");
    mkfs_ext4(&disk.dev).expect("mkfs.ext4");
    let dir = TempDir::new("blockflush").expect("temp dir");
    let dev = disk.dev.to_string_lossy().into_owned();
    let _mount = Mount::new("ext4", &dev, &dir.path, "noatime").expect("mount");
    let labels = [("device", disk.name.as_str()), ("op", "flush")];
    let flushes =
        |s: &[stornet_lab::metrics::Sample]| count(s, "stornet_block_io_size_bytes", &labels);
    let scrape = || agent.scrape();
    up_to_three_times(test, || {
        let (before, stat0) = settled(&scrape, &disk);
        let mut f = std::fs::File::create(dir.path.join("data"))?;
        for _ in 0..3 {
            f.write_all(&[0x5a; 8192])?;
            f.sync_all()?;
        }
        drop(f);
        let (after, stat1) = settled(&scrape, &disk);
        let sysfs = stat1.flush_ios - stat0.flush_ios;
        ensure!(sysfs >= 1, "fsync sent no flush to {}", disk.name);
        let counted = (flushes(&after) - flushes(&before)) as u64;
        ensure!(
            counted == sysfs,
            "agent flushes on {}: {counted}, sysfs {sysfs}",
            disk.name
        );
        let timed = count(&after, "stornet_block_service_seconds", &labels)
            - count(&before, "stornet_block_service_seconds", &labels);
        ensure!(
            timed as u64 == sysfs,
            "{timed} of {sysfs} flushes have a service time"
        );
        Ok(())
    });
}
