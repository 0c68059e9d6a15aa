//! What a record says about the machine loadgen runs on: its name, its addresses (so that
//! a peer's view of it can be matched), and the disks its targets live on (the devices
//! whose block-layer series explain its latency).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The host name, or `localhost`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The IPv4 and IPv6 addresses of this network namespace, without loopback and link-local
/// ones.
pub fn addresses() -> Vec<String> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: cur points into the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and its family says which struct it is.
        let ip: std::net::IpAddr = unsafe {
            match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).into()
                }
                libc::AF_INET6 => {
                    let a = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    std::net::Ipv6Addr::from(a.sin6_addr.s6_addr).into()
                }
                _ => continue,
            }
        };
        let link_local =
            matches!(ip, std::net::IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
        let s = ip.to_string();
        if !ip.is_loopback() && !link_local && !out.contains(&s) {
            out.push(s);
        }
    }
    // SAFETY: list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// The kernel name of the whole disk a path lives on (`loop3` for `/dev/loop3` or a file on
/// it, `nvme0n1` for a file on `nvme0n1p2`); `None` for tmpfs and other filesystems
/// without a block device.
pub fn disk_of(path: &Path) -> Option<String> {
    let md = std::fs::metadata(path).ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sys.join("partition").exists() {
        sys.parent()?.to_path_buf()
    } else {
        sys
    };
    Some(disk.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_leave_out_loopback() {
        assert!(addresses().iter().all(|a| a != "127.0.0.1" && a != "::1"));
        assert!(!hostname().is_empty());
    }

    #[test]
    fn no_disk_for_paths_without_a_block_device() {
        assert_eq!(disk_of(Path::new("/proc/self/stat")), None);
        assert_eq!(disk_of(Path::new("/nonexistent/file")), None);
    }
}
