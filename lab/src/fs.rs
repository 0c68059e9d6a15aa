//! Temporary directories and mounts (a filesystem on a loop device, a small tmpfs), removed
//! on drop, also when a test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail};

/// Writes `value` to a sysfs or configfs attribute, naming both in the error.
pub fn write_attr(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing {value:?} to {}", path.display()))
}

/// A fresh directory under the system temp dir, removed (with its contents) on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> Result<TempDir> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "stornet-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir { path })
    }

    /// Writes `text` to `name` in the directory and returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Makes an ext4 filesystem on `dev`, initialized up front so that no background thread
/// writes to it afterwards.
pub fn mkfs_ext4(dev: &Path) -> Result<()> {
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
        .arg(dev))
}

/// A mounted filesystem, unmounted on drop.
pub struct Mount {
    pub target: PathBuf,
}

impl Mount {
    /// `mount -t fstype -o options source target`.
    pub fn new(fstype: &str, source: &str, target: &Path, options: &str) -> Result<Mount> {
        run(Command::new("mount")
            .args(["-t", fstype, "-o", options, source])
            .arg(target))?;
        Ok(Mount {
            target: target.to_path_buf(),
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.target)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Busy (a test thread still holds a file): detach it now, it goes when released.
            let _ = Command::new("umount").arg("-l").arg(&self.target).status();
        }
    }
}
