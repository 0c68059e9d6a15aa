use std::os::unix::fs::FileExt;

use stornet_tests::agent::AgentProcess;
use stornet_tests::blockdev::{AlignedBuf, LoopDevice, open_direct};
use stornet_tests::fs::{Mount, TempDir};
use stornet_tests::metrics::sum;
use stornet_tests::privilege::require_root;

use anyhow::ensure;

use crate::block_util::{settled, up_to_three_times};

/// A loop device whose backing file lies on a 1 MiB tmpfs: writes past the first MiB fail
/// with ENOSPC. The agent counts exactly the failed writes as
/// `stornet_block_errors_total{op="write",error="nospc"}`.
#[test]
fn block_write_errors_are_counted_by_status() {
    if !require_root("block_write_errors_are_counted_by_status") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let dir = TempDir::new("blockerr").expect("temp dir");
    let _tmpfs = Mount::new("tmpfs", "stornet-test", &dir.path, "size=1m").expect("tmpfs");
    let disk = LoopDevice::new_in(&dir.path, "blockerr", 16 << 20).expect("loop device");
    let labels = [
        ("device", disk.name.as_str()),
        ("op", "write"),
        ("error", "nospc"),
    ];
    let scrape = || agent.scrape();
    let write_64 = || -> anyhow::Result<u64> {
        let f = open_direct(&disk.dev, true)?;
        let buf = AlignedBuf::new(64 << 10, 0xee);
        let mut failed = 0;
        for i in 0..64u64 {
            match f.write_at(buf.as_slice(), i * (64 << 10)) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => failed += 1,
                Err(e) => panic!("write {i}: unexpected error {e}"),
            }
        }
        Ok(failed)
    };
    // Fill the tmpfs first: at its edge a request can be written in part.
    write_64().expect("filling");
    up_to_three_times("block_write_errors_are_counted_by_status", || {
        let (before, _) = settled(&scrape, &disk);
        let failed = write_64()?;
        let (after, _) = settled(&scrape, &disk);
        assert!(failed >= 32, "only {failed} of 64 writes failed");
        let counted = sum(&after, "stornet_block_errors_total", &labels)
            - sum(&before, "stornet_block_errors_total", &labels);
        ensure!(
            counted as u64 == failed,
            "agent nospc errors on {}: {counted}, failed writes {failed}",
            disk.name
        );
        Ok(())
    });
}
