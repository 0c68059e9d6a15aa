//! Device-mapper devices made with `dmsetup` (linear, delay, crypt, multipath), for
//! stacked-device tests in the vm tier's guests, whose kernels have the dm modules. Removed on
//! drop.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

use crate::attempts::tear_down;
use crate::blockdev::Counted;

/// A dm device: its dm name, its kernel name (`dm-N`) and node.
pub struct DmDevice {
    pub dm_name: String,
    pub name: String,
    pub dev: PathBuf,
}

/// `dmsetup`, creating its own device nodes: the guests run no udev.
fn dmsetup(args: &[&str]) -> Result<String> {
    let out = Command::new("dmsetup")
        .args(args)
        .env("DM_DISABLE_UDEV", "1")
        .output()
        .context("running dmsetup (is it installed?)")?;
    ensure!(
        out.status.success(),
        "dmsetup {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Sectors (512 bytes) of a block device.
pub fn sectors(dev: &Path) -> Result<u64> {
    let name = dev
        .file_name()
        .and_then(|n| n.to_str())
        .context("a device path")?;
    let p = format!("/sys/class/block/{name}/size");
    std::fs::read_to_string(&p)
        .with_context(|| format!("reading {p}"))?
        .trim()
        .parse()
        .with_context(|| format!("parsing {p}"))
}

impl DmDevice {
    /// Creates `dm_name` (made unique to this process) with a one-line `table`
    /// (`<start> <sectors> <target> <args>`).
    pub fn create(dm_name: &str, table: &str) -> Result<DmDevice> {
        DmDevice::create_with_uuid(dm_name, table, None)
    }

    /// As [`DmDevice::create`], with a dm uuid made of `uuid_prefix` and the unique name, as
    /// the tools that make dm devices (cryptsetup, LVM, multipathd) mark theirs.
    fn create_with_uuid(dm_name: &str, table: &str, uuid_prefix: Option<&str>) -> Result<DmDevice> {
        let dm_name = format!("stornet-{dm_name}-{}", std::process::id());
        let mut args = vec!["create", &dm_name, "--table", table];
        let uuid = uuid_prefix.map(|p| format!("{p}{dm_name}"));
        if let Some(u) = &uuid {
            args.extend(["--uuid", u.as_str()]);
        }
        dmsetup(&args)?;
        let minor = dmsetup(&["info", "-c", "--noheadings", "-o", "minor", &dm_name])?;
        let name = format!("dm-{}", minor.trim());
        let d = DmDevice {
            dm_name,
            dev: PathBuf::from("/dev").join(&name),
            name,
        };
        ensure!(
            Path::new("/sys/block").join(&d.name).is_dir(),
            "{} ({}) is not in /sys/block",
            d.name,
            d.dm_name
        );
        Ok(d)
    }

    /// A linear device over all of `below`.
    pub fn linear(tag: &str, below: &Path) -> Result<DmDevice> {
        let n = sectors(below)?;
        DmDevice::create(tag, &format!("0 {n} linear {} 0", below.display()))
    }

    /// A device over all of `below` that delays every read and write by `ms` milliseconds.
    pub fn delay(tag: &str, below: &Path, ms: u32) -> Result<DmDevice> {
        let n = sectors(below)?;
        DmDevice::create(tag, &format!("0 {n} delay {} 0 {ms}", below.display()))
    }

    /// A device over all of `below` that encrypts what it writes (AES-CBC, which every
    /// kernel of the vm tier builds in, with dm-crypt's own `plain64` IV).
    pub fn crypt(tag: &str, below: &Path) -> Result<DmDevice> {
        let n = sectors(below)?;
        let table = format!(
            "0 {n} crypt aes-cbc-plain64 {TEST_KEY} 0 {} 0",
            below.display()
        );
        DmDevice::create(tag, &table)
    }

    /// A multipath device (request-based) over `paths`, which must be the same storage,
    /// taken in turn for each request (round-robin), marked as multipathd marks its own.
    pub fn multipath(tag: &str, paths: &[&Path]) -> Result<DmDevice> {
        let n = sectors(paths.first().context("a multipath device needs a path")?)?;
        let list: Vec<String> = paths.iter().map(|p| format!("{} 1", p.display())).collect();
        let table = format!(
            "0 {n} multipath 0 0 1 1 round-robin 0 {} 1 {}",
            paths.len(),
            list.join(" ")
        );
        DmDevice::create_with_uuid(tag, &table, Some("mpath-"))
    }
}

/// The key of [`DmDevice::crypt`]: fixed, since the device holds test data only.
const TEST_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

impl Counted for DmDevice {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for DmDevice {
    fn drop(&mut self) {
        tear_down(&format!("remove dm device {}", self.dm_name), || {
            dmsetup(&["remove", &self.dm_name]).map(drop)
        });
    }
}
