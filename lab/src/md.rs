//! md arrays made through md's sysfs interface (no mdadm in the guests): a RAID0 without a
//! superblock (`metadata_version` none, as `mdadm --build` makes one), so that every write
//! the array gets lands on its members and nothing else does. For stacked-device tests in the
//! vm tier's guests, whose kernels have md. Stopped and cleared on drop.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};

use crate::attempts::tear_down;
use crate::blockdev::Counted;
use crate::fs::write_attr;

/// An md array: its kernel name (`md_stornet…`), node and members.
pub struct MdArray {
    pub name: String,
    pub dev: PathBuf,
    dir: PathBuf,
}

impl MdArray {
    /// A RAID0 over `members` (whole devices) in `chunk_kib` chunks.
    pub fn raid0(tag: &str, members: &[&Path], chunk_kib: u32) -> Result<MdArray> {
        let name = format!("md_{tag}{}", std::process::id());
        write_attr(Path::new("/sys/module/md_mod/parameters/new_array"), &name)?;
        let dir = Path::new("/sys/block").join(&name).join("md");
        let a = MdArray {
            dev: PathBuf::from("/dev").join(&name),
            name,
            dir,
        };
        write_attr(&a.dir.join("metadata_version"), "none")?;
        write_attr(&a.dir.join("level"), "raid0")?;
        write_attr(&a.dir.join("chunk_size"), &(chunk_kib * 1024).to_string())?;
        write_attr(&a.dir.join("raid_disks"), &members.len().to_string())?;
        for (slot, m) in members.iter().enumerate() {
            let member = m
                .file_name()
                .and_then(|n| n.to_str())
                .context("a device path")?;
            let sys = Path::new("/sys/class/block").join(member);
            let devnum = std::fs::read_to_string(sys.join("dev"))?;
            let sectors: u64 = std::fs::read_to_string(sys.join("size"))?.trim().parse()?;
            write_attr(&a.dir.join("new_dev"), devnum.trim())?;
            let d = a.dir.join(format!("dev-{member}"));
            write_attr(&d.join("slot"), &slot.to_string())?;
            write_attr(&d.join("size"), &(sectors / 2).to_string())?;
        }
        write_attr(&a.dir.join("array_state"), "active")?;
        ensure!(a.dev.exists(), "{} did not appear", a.dev.display());
        Ok(a)
    }
}

impl Counted for MdArray {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for MdArray {
    fn drop(&mut self) {
        // `clear` stops the array and releases its members.
        tear_down(&format!("stop md array {}", self.name), || {
            write_attr(&self.dir.join("array_state"), "clear")
        });
    }
}
