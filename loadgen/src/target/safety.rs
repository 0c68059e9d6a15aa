//! Before writing to a block device: refuse one that is mounted, used as swap, held by
//! device-mapper or md, or open exclusively by another program; and one that carries a
//! filesystem or partition signature unless the user passed `--force-destroy-data`. Files
//! are written only when the user named them or loadgen created them.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The first bytes of a device that signatures live in: [0, 8 KiB), [32 KiB, +4 KiB) and
/// [64 KiB, +4 KiB), read with three O_DIRECT reads.
pub const PROBE_READS: u64 = 3;

pub struct Probe {
    pub head: Vec<u8>,
    pub at_32k: Vec<u8>,
    pub at_64k: Vec<u8>,
}

fn has(buf: &[u8], at: usize, magic: &[u8]) -> bool {
    buf.get(at..at + magic.len()) == Some(magic)
}

/// Names the filesystem, volume or partition table whose signature the probe shows.
pub fn identify(p: &Probe) -> Option<&'static str> {
    let h = &p.head;
    let ext_magic = [0x53, 0xef];
    let checks: [(bool, &'static str); 14] = [
        (has(h, 1080, &ext_magic), "an ext2/ext3/ext4 filesystem"),
        (has(h, 0, b"XFSB"), "an XFS filesystem"),
        (has(&p.at_64k, 64, b"_BHRfS_M"), "a btrfs filesystem"),
        (
            has(h, 4086, b"SWAPSPACE2") || has(h, 4086, b"SWAP-SPACE"),
            "a swap area",
        ),
        (
            (0..4).any(|s| has(h, s * 512, b"LABELONE")),
            "an LVM physical volume",
        ),
        (has(h, 0, b"LUKS\xba\xbe"), "a LUKS encrypted volume"),
        (
            has(h, 512, b"EFI PART") || has(h, 4096, b"EFI PART"),
            "a GPT partition table",
        ),
        (
            has(h, 1024, &[0x10, 0x20, 0xf5, 0xf2]),
            "an F2FS filesystem",
        ),
        (
            has(h, 4096, &[0xfc, 0x4e, 0x2b, 0xa9]) || has(h, 0, &[0xfc, 0x4e, 0x2b, 0xa9]),
            "a Linux md RAID member",
        ),
        (
            has(h, 0, b"bluestore block device"),
            "a Ceph BlueStore device",
        ),
        (has(h, 3, b"NTFS    "), "an NTFS filesystem"),
        (has(&p.at_32k, 1, b"CD001"), "an ISO 9660 filesystem"),
        (
            has(h, 4096 + 24, &[0xc6, 0x85, 0x73, 0xf6]),
            "a bcache device",
        ),
        // FAT and DOS partition tables share the boot signature; checked last.
        (
            has(h, 510, &[0x55, 0xaa]),
            "an MBR partition table or FAT filesystem",
        ),
    ];
    checks
        .into_iter()
        .find(|(hit, _)| *hit)
        .map(|(_, what)| what)
}

/// Held for the whole run: an exclusive open of the device, so that nobody mounts it while
/// loadgen writes to it.
pub struct DeviceGuard {
    _file: File,
    /// Reads the signature check made (fewer than PROBE_READS on a tiny device).
    pub probe_reads: u64,
}

struct Aligned(Vec<u8>, usize);

impl Aligned {
    fn new(len: usize) -> Aligned {
        let v = vec![0u8; len + 4096];
        let skip = v.as_ptr().align_offset(4096);
        Aligned(v, skip)
    }
    fn buf(&mut self, len: usize) -> &mut [u8] {
        &mut self.0[self.1..self.1 + len]
    }
}

fn read_at(f: &File, off: u64, len: usize, dev_size: u64) -> std::io::Result<Vec<u8>> {
    if off + len as u64 > dev_size {
        return Ok(Vec::new());
    }
    let mut a = Aligned::new(len);
    let n = f.read_at(a.buf(len), off)?;
    Ok(a.buf(len)[..n].to_vec())
}

/// `maj:min` of the device and of its partitions, from sysfs.
fn devnums(sys: &Path, own: &str) -> Vec<String> {
    let mut out = vec![own.to_string()];
    if let Ok(dir) = std::fs::read_dir(sys) {
        for e in dir.flatten() {
            if e.path().join("partition").exists()
                && let Ok(d) = std::fs::read_to_string(e.path().join("dev"))
            {
                out.push(d.trim().to_string());
            }
        }
    }
    out
}

/// Checks a block device before loadgen writes to it, opened through `open` (its path, or the
/// job service's descriptor of it). Err is a one-line refusal.
pub fn check_block_device(
    path: &Path,
    open: &Path,
    dev_size: u64,
    force: bool,
) -> Result<DeviceGuard, String> {
    let shown = path.display();
    let meta = std::fs::metadata(open).map_err(|e| format!("{shown}: {e}"))?;
    let rdev = meta.rdev();
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let own = format!("{maj}:{min}");
    let sys = Path::new("/sys/dev/block").join(&own);
    let nums = devnums(&sys, &own);

    if let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in mi.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 4 && nums.iter().any(|n| n == f[2]) {
                return Err(format!(
                    "{shown} is mounted at {} (device {}): loadgen does not write to mounted devices",
                    f[4], f[2]
                ));
            }
        }
    }
    if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
        for line in swaps.lines().skip(1) {
            if let Some(dev) = line.split_whitespace().next()
                && let Ok(m) = std::fs::metadata(dev)
                && nums.contains(&format!(
                    "{}:{}",
                    libc::major(m.rdev()),
                    libc::minor(m.rdev())
                ))
            {
                return Err(format!("{shown} is in use as swap ({dev})"));
            }
        }
    }
    if let Ok(holders) = std::fs::read_dir(sys.join("holders")) {
        let names: Vec<String> = holders
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !names.is_empty() {
            return Err(format!(
                "{shown} is in use by {} (device-mapper or md): loadgen does not write to it",
                names.join(", ")
            ));
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_DIRECT)
        .open(open)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EBUSY) {
                format!("{shown} is held open exclusively by another program (a filesystem, RAID, or volume manager): loadgen does not write to it")
            } else {
                format!("{shown}: {e}")
            }
        })?;
    let read = |off, len| {
        read_at(&file, off, len, dev_size)
            .map_err(|e| format!("{shown}: reading to check for signatures: {e}"))
    };
    let probe = Probe {
        head: read(0, 8192)?,
        at_32k: read(32768, 4096)?,
        at_64k: read(65536, 4096)?,
    };
    if let Some(what) = identify(&probe)
        && !force
    {
        return Err(format!(
            "{shown} holds {what}; writing would destroy it (pass --force-destroy-data to write anyway)"
        ));
    }
    let probe_reads = [(0, 8192), (32768, 4096), (65536, 4096)]
        .iter()
        .filter(|&&(off, len)| off + len <= dev_size)
        .count() as u64;
    Ok(DeviceGuard {
        _file: file,
        probe_reads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank() -> Probe {
        Probe {
            head: vec![0; 8192],
            at_32k: vec![0; 4096],
            at_64k: vec![0; 4096],
        }
    }

    #[test]
    fn signatures_are_recognised() {
        assert_eq!(identify(&blank()), None);
        let mut p = blank();
        p.head[1080..1082].copy_from_slice(&[0x53, 0xef]);
        assert_eq!(identify(&p), Some("an ext2/ext3/ext4 filesystem"));
        let mut p = blank();
        p.head[0..4].copy_from_slice(b"XFSB");
        assert!(identify(&p).unwrap().contains("XFS"));
        let mut p = blank();
        p.at_64k[64..72].copy_from_slice(b"_BHRfS_M");
        assert!(identify(&p).unwrap().contains("btrfs"));
        let mut p = blank();
        p.head[4086..4096].copy_from_slice(b"SWAPSPACE2");
        assert!(identify(&p).unwrap().contains("swap"));
        let mut p = blank();
        p.head[512..520].copy_from_slice(b"LABELONE");
        assert!(identify(&p).unwrap().contains("LVM"));
        let mut p = blank();
        p.head[512..520].copy_from_slice(b"EFI PART");
        p.head[510..512].copy_from_slice(&[0x55, 0xaa]);
        assert!(identify(&p).unwrap().contains("GPT"));
        let mut p = blank();
        p.head[510..512].copy_from_slice(&[0x55, 0xaa]);
        assert!(identify(&p).unwrap().contains("MBR"));
        // A device too small for the far probes still gets checked.
        let mut p = blank();
        p.at_64k.clear();
        p.at_32k.clear();
        assert_eq!(identify(&p), None);
    }
}
