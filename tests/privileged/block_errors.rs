use std::os::unix::fs::FileExt;

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{AlignedBuf, LoopDevice, open_direct};
use stornet_lab::fs::{Mount, TempDir};
use stornet_lab::metrics::sum;
use stornet_lab::privilege::require_root;

use anyhow::ensure;

use crate::block_util::{settled, up_to_three_times};

/// A loop device whose backing file lies on a 1 MiB tmpfs: writes past the first MiB fail.
/// With direct IO to the file (tmpfs takes it since 6.6) they fail with ENOSPC, through the
/// page cache (older kernels) with EIO. The agent counts exactly the failed writes as
/// `stornet_block_errors_total{op="write"}` with the status the errno comes from (`nospc`,
/// `ioerr`), whichever form the kernel's tracepoint passes it in.
#[test]
fn block_write_errors_are_counted_by_status() {
    if !require_root("block_write_errors_are_counted_by_status") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let dir = TempDir::new("blockerr").expect("temp dir");
    let _tmpfs = Mount::new("tmpfs", "stornet-test", &dir.path, "size=1m").expect("tmpfs");
    let disk = LoopDevice::new_in(&dir.path, "blockerr", 16 << 20).expect("loop device");
    let scrape = || agent.scrape();
    // Failed writes by the status their errno comes from.
    let write_64 = || -> anyhow::Result<(u64, u64)> {
        let f = open_direct(&disk.dev, true)?;
        let buf = AlignedBuf::new(64 << 10, 0xee);
        let (mut nospc, mut ioerr) = (0, 0);
        for i in 0..64u64 {
            match f.write_at(buf.as_slice(), i * (64 << 10)) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => nospc += 1,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => ioerr += 1,
                Err(e) => panic!("write {i}: unexpected error {e}"),
            }
        }
        Ok((nospc, ioerr))
    };
    // Fill the tmpfs first: at its edge a request can be written in part.
    write_64().expect("filling");
    up_to_three_times("block_write_errors_are_counted_by_status", || {
        let (before, _) = settled(&scrape, &disk);
        let (nospc, ioerr) = write_64()?;
        let (after, _) = settled(&scrape, &disk);
        assert!(
            nospc + ioerr >= 32,
            "only {} of 64 writes failed",
            nospc + ioerr
        );
        for (label, failed) in [("nospc", nospc), ("ioerr", ioerr)] {
            let labels = [
                ("device", disk.name.as_str()),
                ("op", "write"),
                ("error", label),
            ];
            let counted = sum(&after, "stornet_block_errors_total", &labels)
                - sum(&before, "stornet_block_errors_total", &labels);
            ensure!(
                counted as u64 == failed,
                "agent {label} errors on {}: {counted}, failed writes {failed}",
                disk.name
            );
        }
        Ok(())
    });
}
