//! Loop devices on temporary files, whole disks handed to a test (in the `vm` tier's guests),
//! `/sys/block/*/stat`, and direct IO from tests.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// A block device a test counts IOs on, by its kernel name.
pub trait Counted {
    fn name(&self) -> &str;

    fn stat(&self) -> Result<DiskStat> {
        DiskStat::read(self.name())
    }

    /// Waits until the device's IO counters stop moving (at most about 2 s).
    fn settle(&self) {
        let mut last = self.stat().ok();
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let now = self.stat().ok();
            if now == last {
                return;
            }
            last = now;
        }
    }
}

/// Queue attributes (`/sys/block/<dev>/queue/*`) a test changed, with their first values:
/// restored on drop, since the kernel keeps them for the device's next user.
#[derive(Default)]
struct QueueAttrs {
    changed: std::sync::Mutex<Vec<(String, String)>>,
}

impl QueueAttrs {
    fn set(&self, dev: &str, attr: &str, value: &str) -> Result<()> {
        let p = format!("/sys/block/{dev}/queue/{attr}");
        let old = std::fs::read_to_string(&p).with_context(|| format!("reading {p}"))?;
        std::fs::write(&p, value).with_context(|| format!("writing {value} to {p}"))?;
        let mut changed = self.changed.lock().unwrap_or_else(|e| e.into_inner());
        if !changed.iter().any(|(a, _)| a == attr) {
            // `scheduler` reads as `[none] mq-deadline`: the bracketed one is in use.
            let old = old
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
                .unwrap_or(old.trim());
            changed.push((attr.to_string(), old.to_string()));
        }
        Ok(())
    }

    fn restore(&self, dev: &str) {
        let changed = self.changed.lock().map(|c| c.clone()).unwrap_or_default();
        for (attr, old) in changed.iter().rev() {
            let _ = std::fs::write(format!("/sys/block/{dev}/queue/{attr}"), old);
        }
    }
}

/// A whole disk that belongs to the test (a guest's NVMe, virtio-blk, SATA or null_blk disk):
/// used as it is, never partitioned or formatted; changed queue attributes are restored on
/// drop.
pub struct Disk {
    pub dev: PathBuf,
    pub name: String,
    attrs: QueueAttrs,
}

impl Disk {
    /// The disk `/dev/<name>`; fails if it is not a whole disk in /sys/block.
    pub fn existing(name: &str) -> Result<Disk> {
        ensure!(
            Path::new("/sys/block").join(name).is_dir(),
            "{name} is not a disk in /sys/block"
        );
        Ok(Disk {
            dev: PathBuf::from("/dev").join(name),
            name: name.to_string(),
            attrs: QueueAttrs::default(),
        })
    }

    pub fn set_queue_attr(&self, attr: &str, value: &str) -> Result<()> {
        self.attrs.set(&self.name, attr, value)
    }

    /// A sysfs attribute of the disk (`queue/nr_requests`, `device/queue_depth`, …).
    pub fn attr(&self, rel: &str) -> Result<String> {
        let p = format!("/sys/block/{}/{rel}", self.name);
        Ok(std::fs::read_to_string(&p)
            .with_context(|| format!("reading {p}"))?
            .trim()
            .to_string())
    }

    /// Hardware queues of a blk-mq disk (`/sys/block/<dev>/mq/*`).
    pub fn hw_queues(&self) -> Result<usize> {
        Ok(std::fs::read_dir(format!("/sys/block/{}/mq", self.name))?.count())
    }
}

impl Counted for Disk {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.attrs.restore(&self.name);
    }
}

/// A loop device with direct IO on a file in /dev/shm; detached and deleted on drop.
pub struct LoopDevice {
    pub dev: PathBuf,
    pub name: String,
    /// The file this device was made on and deletes on drop (none over another device).
    backing: Option<PathBuf>,
    attrs: QueueAttrs,
    /// The device's number, when it was made for this device (`numbered`) and is removed
    /// from the kernel on drop, not only detached.
    made: Option<u32>,
}

const LOOP_CTL_ADD: libc::c_ulong = 0x4C80;
const LOOP_CTL_REMOVE: libc::c_ulong = 0x4C81;

/// `/dev/loop-control`'s `request` (add or remove) for loop device `n`.
fn loop_control(request: libc::c_ulong, n: u32) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    // SAFETY: an ioctl on an open descriptor with an integer argument.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), request, n as libc::c_ulong) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl LoopDevice {
    pub fn new(tag: &str, size: u64) -> Result<LoopDevice> {
        LoopDevice::new_in(Path::new("/dev/shm"), tag, size)
    }

    /// A loop device on a sparse file of `size` bytes in `dir` (which must take O_DIRECT).
    pub fn new_in(dir: &Path, tag: &str, size: u64) -> Result<LoopDevice> {
        let backing = backing_file(dir, tag);
        File::create(&backing)?.set_len(size)?;
        let ld = LoopDevice::attach(&backing, Some(backing.clone()));
        if ld.is_err() {
            let _ = std::fs::remove_file(&backing);
        }
        ld
    }

    /// A loop device whose file holds an MBR partition table of `parts` (start sector,
    /// sectors; type 0x83), attached with partition scanning (`losetup -P`, and `partx -a`
    /// where the kernel reads no partition tables): `<name>p1`, `<name>p2`, … (sfdisk is
    /// not needed).
    pub fn partitioned(tag: &str, size: u64, parts: &[(u32, u32)]) -> Result<LoopDevice> {
        ensure!(parts.len() <= 4, "an MBR holds four primary partitions");
        let backing = backing_file(Path::new("/dev/shm"), tag);
        let file = File::create(&backing)?;
        file.set_len(size)?;
        file.write_all_at(&mbr(parts), 0)?;
        drop(file);
        let ld = LoopDevice::attach_with(&backing, Some(backing.clone()), &["-P"], None);
        if ld.is_err() {
            let _ = std::fs::remove_file(&backing);
        }
        let ld = ld?;
        let part = |i: usize| Path::new("/sys/class/block").join(format!("{}p{i}", ld.name));
        // A kernel built without partition-table parsers (as this lab's) scans nothing: then
        // partx reads the table and adds the partitions itself (BLKPG).
        if !parts.is_empty() && !part(1).exists() {
            let out = Command::new("partx")
                .arg("-a")
                .arg(&ld.dev)
                .output()
                .context("running partx")?;
            ensure!(
                out.status.success(),
                "partx -a {} failed: {}",
                ld.dev.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        for i in 1..=parts.len() {
            ensure!(part(i).exists(), "{} has no partition {i}", ld.name);
        }
        Ok(ld)
    }

    /// Loop device `/dev/loop<n>`, made for this (it must not exist) and removed from the
    /// kernel on drop: its disk, request queue and number go, as a hot-unplugged disk's do.
    pub fn numbered(n: u32, tag: &str, size: u64) -> Result<LoopDevice> {
        loop_control(LOOP_CTL_ADD, n).with_context(|| format!("adding loop device {n}"))?;
        let backing = backing_file(Path::new("/dev/shm"), tag);
        let ld = File::create(&backing)
            .and_then(|f| f.set_len(size))
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                LoopDevice::attach_with(
                    &backing,
                    Some(backing.clone()),
                    &[],
                    Some(&format!("/dev/loop{n}")),
                )
            });
        match ld {
            Ok(mut ld) => {
                ld.made = Some(n);
                Ok(ld)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&backing);
                let _ = loop_control(LOOP_CTL_REMOVE, n);
                Err(e)
            }
        }
    }

    /// Another loop device over this one's file: a second path to the same storage, as a
    /// multipath LUN has.
    pub fn another_path(&self) -> Result<LoopDevice> {
        let file = self.backing.as_ref().context("a loop device over a file")?;
        LoopDevice::attach(file, None)
    }

    /// A loop device with direct IO over another block device (e.g. a loop device whose IO
    /// is throttled: requests then wait in this device's queue).
    pub fn over(device: &Path) -> Result<LoopDevice> {
        LoopDevice::attach(device, None)
    }

    fn attach(target: &Path, backing: Option<PathBuf>) -> Result<LoopDevice> {
        LoopDevice::attach_with(target, backing, &[], None)
    }

    fn attach_with(
        target: &Path,
        backing: Option<PathBuf>,
        extra: &[&str],
        at: Option<&str>,
    ) -> Result<LoopDevice> {
        let losetup = |direct: &str| {
            Command::new("losetup")
                .args(["--show", &format!("--direct-io={direct}")])
                // The named device (`numbered`), or the first free one.
                .arg(at.unwrap_or("-f"))
                .args(extra)
                .arg(target)
                .output()
                .context("running losetup")
        };
        let mut out = losetup("on")?;
        // tmpfs takes O_DIRECT only since Linux 6.6: on older kernels the loop device reads
        // its file through the page cache, which changes nothing the tests count (the IO
        // on the loop device itself).
        if !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("Invalid argument")
        {
            out = losetup("off")?;
        }
        if !out.status.success() {
            bail!(
                "losetup on {} failed: {}",
                target.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let name = dev
            .file_name()
            .context("loop path")?
            .to_string_lossy()
            .into_owned();
        let ld = LoopDevice {
            dev,
            name,
            backing,
            attrs: QueueAttrs::default(),
            made: None,
        };
        // udev and the kernel may read the new device once; let that settle before counting.
        ld.settle();
        Ok(ld)
    }

    pub fn settle(&self) {
        Counted::settle(self)
    }

    pub fn stat(&self) -> Result<DiskStat> {
        Counted::stat(self)
    }

    /// `maj:min` of the device.
    pub fn devnum(&self) -> Result<String> {
        Ok(
            std::fs::read_to_string(format!("/sys/block/{}/dev", self.name))?
                .trim()
                .to_string(),
        )
    }

    /// Sets `queue/<attr>` in sysfs; the old value comes back on drop.
    pub fn set_queue_attr(&self, attr: &str, value: &str) -> Result<()> {
        self.attrs.set(&self.name, attr, value)
    }
}

impl Counted for LoopDevice {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        self.attrs.restore(&self.name);
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        if let Some(b) = &self.backing {
            let _ = std::fs::remove_file(b);
        }
        if let Some(n) = self.made {
            // Busy for a moment after the detach while udev still has it open.
            for _ in 0..50 {
                match loop_control(LOOP_CTL_REMOVE, n) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(100))
                    }
                    _ => break,
                }
            }
        }
    }
}

/// The file a test's loop device `tag` is made on, in `dir`.
fn backing_file(dir: &Path, tag: &str) -> PathBuf {
    dir.join(format!("stornet-test-{tag}-{}.img", std::process::id()))
}

/// A master boot record with primary Linux partitions `parts` (start sector, sectors): the
/// table at byte 446, 16 bytes an entry (status, CHS start, type, CHS end, LBA start, sectors),
/// and the signature 0x55 0xAA at 510. CHS fields are left zero; Linux reads the LBA fields.
pub fn mbr(parts: &[(u32, u32)]) -> [u8; 512] {
    let mut b = [0u8; 512];
    for (i, (start, sectors)) in parts.iter().enumerate() {
        let e = &mut b[446 + 16 * i..446 + 16 * (i + 1)];
        e[4] = 0x83;
        e[8..12].copy_from_slice(&start.to_le_bytes());
        e[12..16].copy_from_slice(&sectors.to_le_bytes());
    }
    b[510] = 0x55;
    b[511] = 0xAA;
    b
}

/// A zram device of its own (`/sys/class/zram-control/hot_add`): a bio-based device, made
/// without any tool (the zram module is loaded if it is not built in); without a size until
/// [`Zram::set_size`]. Reset and removed on drop.
pub struct Zram {
    pub dev: PathBuf,
    pub name: String,
    id: u32,
}

impl Zram {
    pub fn new() -> Result<Zram> {
        let control = Path::new("/sys/class/zram-control");
        if !control.exists() {
            // No devices of its own: the test adds one.
            let _ = Command::new("modprobe")
                .args(["zram", "num_devices=0"])
                .status();
        }
        let id: u32 = std::fs::read_to_string(control.join("hot_add"))
            .with_context(|| format!("adding a zram device ({})", control.display()))?
            .trim()
            .parse()
            .context("zram hot_add")?;
        let name = format!("zram{id}");
        Ok(Zram {
            dev: PathBuf::from("/dev").join(&name),
            name,
            id,
        })
    }

    pub fn set_size(&self, bytes: u64) -> Result<()> {
        let p = format!("/sys/block/{}/disksize", self.name);
        std::fs::write(&p, bytes.to_string()).with_context(|| format!("writing {p}"))
    }

    /// Back to no size (its pages freed).
    pub fn reset(&self) -> Result<()> {
        let p = format!("/sys/block/{}/reset", self.name);
        std::fs::write(&p, "1").with_context(|| format!("writing {p}"))
    }
}

impl Counted for Zram {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        let _ = self.reset();
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.id.to_string());
    }
}

/// The first fields of `/sys/block/<dev>/stat` (Documentation/block/stat.rst).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_sectors: u64,
    pub write_ios: u64,
    pub write_sectors: u64,
    pub in_flight: u64,
    pub discard_ios: u64,
    pub flush_ios: u64,
}

impl DiskStat {
    pub fn read(dev: &str) -> Result<DiskStat> {
        let text = std::fs::read_to_string(format!("/sys/block/{dev}/stat"))?;
        let f: Vec<u64> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        ensure!(f.len() >= 11, "short /sys/block/{dev}/stat: {text:?}");
        Ok(DiskStat {
            read_ios: f[0],
            read_sectors: f[2],
            write_ios: f[4],
            write_sectors: f[6],
            in_flight: f[8],
            discard_ios: f.get(11).copied().unwrap_or(0),
            flush_ios: f.get(15).copied().unwrap_or(0),
        })
    }
}

/// A scrape and the device's sysfs counters, taken while the device was quiet: retried until
/// sysfs reads the same before and after the scrape.
pub fn settled<T>(scrape: &dyn Fn() -> Result<T>, disk: &dyn Counted) -> (T, DiskStat) {
    let (samples, mut stats) = settled_all(scrape, &[disk]);
    (samples, stats.remove(0))
}

/// [`settled`] for several devices at once (the layers of a stack): every one quiet.
pub fn settled_all<T>(
    scrape: &dyn Fn() -> Result<T>,
    disks: &[&dyn Counted],
) -> (T, Vec<DiskStat>) {
    let stats = || -> Vec<DiskStat> {
        disks
            .iter()
            .map(|d| d.stat().expect("sysfs stat"))
            .collect()
    };
    disks.iter().for_each(|d| d.settle());
    for _ in 0..50 {
        let before = stats();
        let samples = scrape().expect("scrape");
        if stats() == before && before.iter().all(|s| s.in_flight == 0) {
            return (samples, before);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let names: Vec<&str> = disks.iter().map(|d| d.name()).collect();
    panic!("{} did not go quiet", names.join(", "));
}

/// A 4 KiB-aligned buffer for O_DIRECT.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    pub fn new(len: usize, fill: u8) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("layout");
        // SAFETY: non-zero size layout; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "allocation failed");
        // SAFETY: ptr is valid for len bytes.
        unsafe { std::ptr::write_bytes(ptr, fill, len) };
        AlignedBuf { ptr, len }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: valid for len bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: valid for len bytes while self lives, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).expect("layout");
        // SAFETY: allocated in new with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

pub fn open_direct(path: &Path, write: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("opening {} with O_DIRECT", path.display()))
}

/// `n` sequential O_DIRECT writes of `size` bytes from offset 0.
pub fn direct_writes(path: &Path, n: u64, size: usize) -> Result<()> {
    let f = open_direct(path, true)?;
    let buf = AlignedBuf::new(size, 0xab);
    for i in 0..n {
        f.write_all_at(buf.as_slice(), i * size as u64)?;
    }
    Ok(())
}

/// `n` sequential O_DIRECT reads of `size` bytes from offset 0.
pub fn direct_reads(path: &Path, n: u64, size: usize) -> Result<()> {
    let f = open_direct(path, false)?;
    let mut buf = AlignedBuf::new(size, 0);
    for i in 0..n {
        f.read_exact_at(buf.as_mut_slice(), i * size as u64)?;
    }
    Ok(())
}

/// A filesystem mounted on a fresh directory; unmounted and the directory removed on drop.
pub struct Mount {
    pub dir: PathBuf,
}

impl Mount {
    pub fn new(dev: &Path, tag: &str) -> Result<Mount> {
        let dir = std::env::temp_dir().join(format!("stornet-mnt-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let st = Command::new("mount").arg(dev).arg(&dir).status()?;
        if !st.success() {
            let _ = std::fs::remove_dir(&dir);
            bail!("mount {} {} failed", dev.display(), dir.display());
        }
        Ok(Mount { dir })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Reads `len` bytes at `offset` of a device with O_DIRECT.
pub fn read_direct(path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let f = open_direct(path, false)?;
    let mut buf = AlignedBuf::new(len, 0);
    f.read_exact_at(buf.as_mut_slice(), offset)?;
    Ok(buf.as_slice().to_vec())
}

/// Writes `data` (a multiple of 512 bytes) at `offset` of a device with O_DIRECT.
pub fn write_direct(path: &Path, offset: u64, data: &[u8]) -> Result<()> {
    let f = open_direct(path, true)?;
    let mut buf = AlignedBuf::new(data.len(), 0);
    buf.as_mut_slice().copy_from_slice(data);
    f.write_all_at(buf.as_slice(), offset)?;
    Ok(())
}
