//! Block devices: kernel names from device numbers (`/sys/dev/block/MAJ:MIN`, or for a
//! hidden disk without a number, its `diskseq` in `/sys/class/block`, or before 5.15 its
//! name), which devices
//! to report (include/exclude globs), the cap on reported devices (the rest fold into
//! `device="other"`), and queue limits from sysfs (shown for a second after they are read).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_common::block::{
    DISK_NAME_LEN, HIDDEN_MAJOR, MINOR_MASK, dev_major_minor, hidden_name_minor, name_words,
};

/// The `device` label of devices beyond the cap.
pub const OTHER: &str = "other";

/// Resolves and caches `dev_t` → kernel name (`loop3`, `nvme0n1`). A device number can be
/// reused after a device goes away, so a cached name is checked again when asked for.
#[derive(Default)]
pub struct DeviceNames {
    cache: Mutex<HashMap<u32, String>>,
}

impl DeviceNames {
    /// The device's name, or None if it no longer exists.
    pub fn lookup(&self, dev: u32) -> Option<String> {
        let (major, minor) = dev_major_minor(dev);
        let mut cache = self.cache.lock().expect("device cache");
        let name = if major == HIDDEN_MAJOR {
            // Found again without a walk of the devices while the name still holds.
            let known = cache.get(&dev).map(String::as_str);
            hidden(Path::new("/sys/class/block"), minor, known)
        } else {
            resolve(Path::new("/sys/dev/block"), major, minor)
        };
        match &name {
            Some(n) => cache.insert(dev, n.clone()),
            None => cache.remove(&dev),
        };
        name
    }

    /// The device's name; for a device gone since, its last known name, else `MAJ:MIN`.
    pub fn name(&self, dev: u32) -> String {
        if let Some(n) = self.lookup(dev) {
            return n;
        }
        let (major, minor) = dev_major_minor(dev);
        format!("{major}:{minor}")
    }
}

/// Reads the name of `major:minor` under a `/sys/dev/block`-like directory.
pub fn resolve(sys_dev_block: &Path, major: u32, minor: u32) -> Option<String> {
    let link = std::fs::read_link(sys_dev_block.join(format!("{major}:{minor}"))).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// The `dev_t` stornet gives a disk that has none of its own (see [`HIDDEN_MAJOR`]).
pub fn hidden_dev(diskseq: u64) -> u32 {
    (HIDDEN_MAJOR << 20) | (diskseq as u32 & MINOR_MASK)
}

/// The minor the probes give a hidden disk named `name` on kernels without `diskseq`
/// (before 5.15): its name as the kernel's 32-byte, NUL-padded `disk_name`, folded.
pub fn name_minor(name: &str) -> u32 {
    let mut bytes = [0u8; DISK_NAME_LEN];
    let n = name.len().min(DISK_NAME_LEN - 1);
    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
    hidden_name_minor(name_words(&bytes))
}

/// The `dev_t` the probes give the disk in `dir` (under /sys/class/block) when sysfs shows
/// none (no `dev`): by its `diskseq`, or on a kernel without one (before 5.15), by its name.
/// None for a disk with a number of its own.
pub fn hidden_number(dir: &Path) -> Option<u32> {
    if dir.join("dev").exists() {
        return None;
    }
    match std::fs::read_to_string(dir.join("diskseq")) {
        Ok(s) => s.trim().parse::<u64>().ok().map(hidden_dev),
        Err(_) => Some((HIDDEN_MAJOR << 20) | name_minor(dir.file_name()?.to_str()?)),
    }
}

/// Whether `dir` (under /sys/class/block) is the hidden disk the probes give `minor`.
fn is_hidden(dir: &Path, minor: u32) -> bool {
    hidden_number(dir) == Some((HIDDEN_MAJOR << 20) | minor)
}

/// The name of the hidden disk the probes give `minor` ([`hidden_number`]), under a
/// `/sys/class/block`-like directory: `known` (the last name found) if it still is, else
/// whichever is.
pub fn hidden(class_block: &Path, minor: u32, known: Option<&str>) -> Option<String> {
    if let Some(n) = known.filter(|n| is_hidden(&class_block.join(n), minor)) {
        return Some(n.to_string());
    }
    std::fs::read_dir(class_block)
        .ok()?
        .flatten()
        .find(|e| is_hidden(&e.path(), minor))
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

/// Shell-style glob match of a device name: `*` any run, `?` one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative matching with backtracking to the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Which devices are reported: those matching an include pattern (all when there is none)
/// and no exclude pattern.
#[derive(Clone, Debug, Default)]
pub struct DeviceFilter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl DeviceFilter {
    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob_match(p, name)))
            && !self.exclude.iter().any(|p| glob_match(p, name))
    }
}

/// Gives at most `max` devices their own `device` label, first come first served, so a
/// device keeps its label for as long as it exists; the rest are `other`.
pub struct DeviceLabels {
    max: usize,
    named: Mutex<Vec<u32>>,
}

impl DeviceLabels {
    pub fn new(max: usize) -> DeviceLabels {
        DeviceLabels {
            max,
            named: Mutex::new(Vec::new()),
        }
    }

    /// Whether `dev` is reported under its own name (taking a free place if there is one).
    pub fn named(&self, dev: u32) -> bool {
        let mut named = self.named.lock().expect("device labels");
        if named.contains(&dev) {
            return true;
        }
        if named.len() < self.max {
            named.push(dev);
            return true;
        }
        false
    }

    /// Frees the places of devices that no longer exist.
    pub fn retain(&self, exists: impl Fn(u32) -> bool) {
        self.named
            .lock()
            .expect("device labels")
            .retain(|&d| exists(d));
    }
}

/// The lines of a procfs table of block devices (`/proc/partitions`, `/proc/diskstats`) that
/// begin with a device's major and minor: the number the probes give it, and the line's
/// fields after those two. A missing file has none.
pub fn proc_table(path: &Path) -> Vec<(u32, Vec<String>)> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let major: u32 = f.next()?.parse().ok()?;
            let minor: u32 = f.next()?.parse().ok()?;
            Some(((major << 20) | minor, f.map(str::to_string).collect()))
        })
        .collect()
}

/// How long read queue limits are shown: they change only when someone writes them, and a
/// scrape would otherwise read two files per device.
const LIMITS_AGE: Duration = Duration::from_secs(1);

/// A device's queue limits, as (`limit` label, value).
pub type Limits = Vec<(&'static str, u64)>;

/// Queue limits ([`queue_limits`]) as read within the last [`LIMITS_AGE`].
#[derive(Default)]
pub struct QueueLimits {
    read: Mutex<HashMap<String, (Instant, Limits)>>,
}

impl QueueLimits {
    pub fn get(&self, sys_block: &Path, name: &str) -> Limits {
        let now = Instant::now();
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.retain(|_, (at, _)| now.duration_since(*at) < LIMITS_AGE);
        if let Some((_, limits)) = read.get(name) {
            return limits.clone();
        }
        let limits = queue_limits(sys_block, name);
        read.insert(name.to_string(), (now, limits.clone()));
        limits
    }
}

/// A device's queue limits from sysfs: `queue/nr_requests` (requests the block layer lets
/// wait or run per hardware queue) and `device/queue_depth` (commands the device takes at
/// once, where the driver reports it, e.g. SCSI).
pub fn queue_limits(sys_block: &Path, name: &str) -> Limits {
    let read =
        |rel: &str| -> Option<u64> { super::sysfs::read_u64(&sys_block.join(name).join(rel)) };
    let mut out = Vec::new();
    if let Some(n) = read("queue/nr_requests") {
        out.push(("nr_requests", n));
    }
    if let Some(n) = read("device/queue_depth") {
        out.push(("device_queue_depth", n));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("stornet-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn resolves_symlink_names() {
        let dir = temp_dir("devtest");
        let link = dir.join("7:3");
        std::os::unix::fs::symlink("../../devices/virtual/block/loop3", &link).unwrap();
        assert_eq!(resolve(&dir, 7, 3).as_deref(), Some("loop3"));
        assert_eq!(resolve(&dir, 7, 4), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hidden_disks_are_found_by_their_sequence_number() {
        let dir = temp_dir("hidden");
        for (name, dev, seq) in [
            ("nvme1n1", Some("259:3"), "17"),
            ("nvme1c1n1", None, "16"),
            ("nvme2c2n1", None, "1048594"),
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            std::fs::write(dir.join(name).join("diskseq"), format!("{seq}\n")).unwrap();
            if let Some(d) = dev {
                std::fs::write(dir.join(name).join("dev"), d).unwrap();
            }
        }
        let minor = |seq: u64| hidden_dev(seq) & MINOR_MASK;
        assert_eq!(hidden_dev(16) >> 20, HIDDEN_MAJOR);
        assert_eq!(hidden(&dir, minor(16), None).as_deref(), Some("nvme1c1n1"));
        // Only the low 20 bits of the sequence number are kept.
        assert_eq!(
            hidden(&dir, minor(1_048_594), None).as_deref(),
            Some("nvme2c2n1")
        );
        // A disk with a number of its own is never taken for a hidden one.
        assert_eq!(hidden(&dir, minor(17), None), None);
        // A name known from before is checked, not trusted: a stale one is looked up again.
        assert_eq!(
            hidden(&dir, minor(16), Some("nvme2c2n1")).as_deref(),
            Some("nvme1c1n1")
        );
        assert_eq!(
            hidden(&dir, minor(16), Some("nvme1c1n1")).as_deref(),
            Some("nvme1c1n1")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Before 5.15 (no `diskseq`), the probes name a hidden disk by its name's words.
    #[test]
    fn hidden_disks_without_a_sequence_number_are_found_by_name() {
        let dir = temp_dir("hidden-names");
        for (name, dev) in [
            ("nvme1n1", Some("259:3")),
            ("nvme1c1n1", None),
            ("nvme1c2n1", None),
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            if let Some(d) = dev {
                std::fs::write(dir.join(name).join("dev"), d).unwrap();
            }
        }
        // The words the probe reads from `disk_name`: "nvme1c1n1", a NUL, and whatever the
        // driver's buffer held after it (5.10's NVMe copies all 32 bytes of a stack buffer).
        let mut bytes = [0xa5u8; 32];
        bytes[..9].copy_from_slice(b"nvme1c1n1");
        bytes[9] = 0;
        bytes[20] = 0;
        let minor = hidden_name_minor(name_words(&bytes));
        assert_eq!(minor, name_minor("nvme1c1n1"));
        assert_ne!(minor, name_minor("nvme1c2n1"));
        assert_eq!(hidden(&dir, minor, None).as_deref(), Some("nvme1c1n1"));
        assert_eq!(
            hidden(&dir, name_minor("nvme1c2n1"), None).as_deref(),
            Some("nvme1c2n1")
        );
        // A disk with a number of its own is never taken for a hidden one.
        assert_eq!(hidden(&dir, name_minor("nvme1n1"), None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn globs() {
        assert!(glob_match("loop*", "loop3"));
        assert!(glob_match("loop*", "loop"));
        assert!(!glob_match("loop*", "xloop3"));
        assert!(glob_match("nvme?n1", "nvme0n1"));
        assert!(!glob_match("nvme?n1", "nvme10n1"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*n*1", "nvme0n1"));
        assert!(glob_match("sd*a", "sdaa"));
        assert!(!glob_match("sd*a", "sdab"));
        assert!(glob_match("vda", "vda"));
        assert!(!glob_match("vda", "vdb"));
    }

    #[test]
    fn filter_includes_then_excludes() {
        let all = DeviceFilter::default();
        assert!(all.allows("sda"));
        let f = DeviceFilter {
            include: vec!["sd*".into(), "nvme*".into()],
            exclude: vec!["sdb".into()],
        };
        assert!(f.allows("sda"));
        assert!(f.allows("nvme0n1"));
        assert!(!f.allows("sdb"));
        assert!(!f.allows("loop0"));
    }

    #[test]
    fn labels_are_first_come_and_freed_when_devices_go() {
        let l = DeviceLabels::new(2);
        assert!(l.named(10));
        assert!(l.named(20));
        assert!(!l.named(30), "third device folds into other");
        assert!(l.named(10), "a named device stays named");
        l.retain(|d| d != 10);
        assert!(l.named(30), "a freed place goes to the next device");
        assert!(!l.named(10));
    }

    #[test]
    fn reads_queue_limits() {
        let dir = temp_dir("qlimits");
        std::fs::create_dir_all(dir.join("sda/queue")).unwrap();
        std::fs::create_dir_all(dir.join("sda/device")).unwrap();
        std::fs::create_dir_all(dir.join("loop0/queue")).unwrap();
        std::fs::write(dir.join("sda/queue/nr_requests"), "64\n").unwrap();
        std::fs::write(dir.join("sda/device/queue_depth"), "31\n").unwrap();
        std::fs::write(dir.join("loop0/queue/nr_requests"), "128\n").unwrap();
        assert_eq!(
            queue_limits(&dir, "sda"),
            [("nr_requests", 64), ("device_queue_depth", 31)]
        );
        assert_eq!(queue_limits(&dir, "loop0"), [("nr_requests", 128)]);
        assert!(queue_limits(&dir, "nope").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
