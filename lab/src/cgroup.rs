//! A cgroup v1 blkio group with IOPS throttles, for slow-device tests. Processes are put in
//! it before they exec (so every IO they make is throttled); it is removed on drop, after
//! they have exited.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";

pub struct BlkioCgroup {
    pub path: PathBuf,
}

impl BlkioCgroup {
    /// Creates `/sys/fs/cgroup/blkio/stornet-test-<tag>-<pid>`.
    pub fn new(tag: &str) -> Result<BlkioCgroup> {
        if !std::path::Path::new(BLKIO_ROOT)
            .join("blkio.throttle.read_iops_device")
            .exists()
        {
            bail!("cgroup v1 blkio throttling is not available at {BLKIO_ROOT}");
        }
        let path =
            PathBuf::from(BLKIO_ROOT).join(format!("stornet-test-{tag}-{}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(BlkioCgroup { path })
    }

    /// Caps reads (`read`) or writes of device `maj:min` at `iops`.
    pub fn throttle_iops(&self, devnum: &str, read: bool, iops: u64) -> Result<()> {
        let op = if read { "read" } else { "write" };
        self.throttle(&format!("blkio.throttle.{op}_iops_device"), devnum, iops)
    }

    /// Caps reads (`read`) or writes of device `maj:min` at `bytes` per second.
    pub fn throttle_bps(&self, devnum: &str, read: bool, bytes: u64) -> Result<()> {
        let op = if read { "read" } else { "write" };
        self.throttle(&format!("blkio.throttle.{op}_bps_device"), devnum, bytes)
    }

    fn throttle(&self, file: &str, devnum: &str, value: u64) -> Result<()> {
        let file = self.path.join(file);
        std::fs::write(&file, format!("{devnum} {value}"))
            .with_context(|| format!("writing {}", file.display()))
    }

    /// Makes `cmd` join this cgroup in the child, before it execs.
    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        let procs = CString::new(self.path.join("cgroup.procs").to_string_lossy().as_bytes())?;
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (open, write, close) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) == 1;
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if ok { Ok(()) } else { Err(err) }
            })
        };
        Ok(())
    }
}

impl Drop for BlkioCgroup {
    fn drop(&mut self) {
        // The group can only be removed once it is empty; its processes have exited by now.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("warning: could not remove {}", self.path.display());
    }
}
