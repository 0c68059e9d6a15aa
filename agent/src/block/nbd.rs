//! The server of an NBD device. The kernel keeps no address for it, only the socket a client
//! process handed in. A client that configures the device by ioctl (`nbd-client -L`, and
//! others that stay to serve `NBD_DO_IT`) holds that socket open while the device is
//! connected, and the kernel names its task in `/sys/block/nbdX/pid`; the peer is then the
//! remote end of the TCP socket among that task's open files, found in the socket table of
//! the task's own network namespace (`/proc/<pid>/net/tcp`, `tcp6`).
//!
//! Reading another process's open files takes ptrace read access: a process with
//! capabilities the agent lacks (the packaged unit keeps only three) hides them, and the
//! peer stays empty, as it does for a device configured over netlink (no process holds its
//! socket) or served over a Unix socket.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// `198.18.0.2:10809` (`[fd00::2]:10809`) for the NBD device whose sysfs directory is `dev`,
/// empty when it cannot be found.
pub fn peer(dev: &Path, proc: &Path) -> String {
    let Some(pid) = std::fs::read_to_string(dev.join("pid"))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return String::new();
    };
    let task = proc.join(pid.to_string());
    let inodes = socket_inodes(&task.join("fd"));
    if inodes.is_empty() {
        return String::new();
    }
    ["net/tcp", "net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(task.join(t)).ok())
        .find_map(|table| remote_of(&table, &inodes))
        .unwrap_or_default()
}

/// The inodes of the sockets among the open files in `fd_dir` (links `socket:[N]`).
fn socket_inodes(fd_dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(fd_dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let target = std::fs::read_link(e.ok()?.path()).ok()?;
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The remote end of the first established socket of `table` (the text of /proc/net/tcp or
/// tcp6) whose inode is among `inodes`.
fn remote_of(table: &str, inodes: &[u64]) -> Option<String> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
        let inode: u64 = f.get(9)?.parse().ok()?;
        (inodes.contains(&inode) && *f.get(3)? == ESTABLISHED).then(|| address(f.get(2)?))?
    })
}

/// `TCP_ESTABLISHED` as the table prints a state.
const ESTABLISHED: &str = "01";

/// `ADDR:PORT` as the table prints it: the address as the kernel's 32-bit words in hex (each
/// in host byte order), the port in hex.
fn address(text: &str) -> Option<String> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    match addr.len() {
        8 => Some(format!("{}:{port}", Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let ip = Ipv6Addr::from(bytes);
            Some(match ip.to_ipv4_mapped() {
                Some(v4) => format!("{v4}:{port}"),
                None => format!("[{ip}]:{port}"),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Four address bytes as the kernel prints their word (host byte order).
    fn word(b: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(b))
    }

    /// A socket table: a listening socket (inode 4001), a closing one (4002) and an
    /// established one (4003), the last two from 198.18.18.1 to 198.18.18.2:10809.
    fn table() -> String {
        let (local, server) = (word([198, 18, 18, 1]), word([198, 18, 18, 2]));
        let lo = word([127, 0, 0, 1]);
        format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: {lo}:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4001 1 0 100 0 0 10 0\n\
   1: {local}:A1B2 {server}:2A39 06 00000000:00000000 00:00000000 00000000     0        0 4002 1 0 20 4 30 10 -1\n\
   2: {local}:A1B4 {server}:2A39 01 00000000:00000000 00:00000000 00000000     0        0 4003 1 0 20 4 30 10 -1\n"
        )
    }

    #[test]
    fn addresses_are_read_as_the_kernel_prints_them() {
        let server = word([198, 18, 18, 2]);
        assert_eq!(
            address(&format!("{server}:2A39")).as_deref(),
            Some("198.18.18.2:10809")
        );
        let v6 = [[0xfd, 0x80, 0, 0], [0; 4], [0; 4], [0, 0, 0, 2]]
            .map(word)
            .concat();
        assert_eq!(
            address(&format!("{v6}:2A39")).as_deref(),
            Some("[fd80::2]:10809")
        );
        let mapped = [[0; 4], [0; 4], [0, 0, 0xff, 0xff], [198, 18, 18, 2]]
            .map(word)
            .concat();
        assert_eq!(
            address(&format!("{mapped}:2A39")).as_deref(),
            Some("198.18.18.2:10809"),
            "an IPv4-mapped address is the IPv4 one"
        );
        assert_eq!(address("0212C6:2A39"), None);
        assert_eq!(address(&server), None, "no port");
        assert_eq!(address("ZZ1212C6:2A39"), None);
    }

    #[test]
    fn only_an_established_socket_of_the_process_is_the_peer() {
        let t = table();
        assert_eq!(remote_of(&t, &[4001]), None, "listening");
        assert_eq!(remote_of(&t, &[4002]), None, "closing");
        assert_eq!(remote_of(&t, &[9999]), None, "not in this namespace");
        assert_eq!(
            remote_of(&t, &[7, 4003]).as_deref(),
            Some("198.18.18.2:10809")
        );
    }

    #[test]
    fn the_peer_is_found_through_the_client_process() {
        let root = std::env::temp_dir().join(format!("stornet-nbd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (dev, proc) = (root.join("sys/nbd0"), root.join("proc"));
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(proc.join("42/fd")).unwrap();
        std::fs::create_dir_all(proc.join("42/net")).unwrap();
        assert_eq!(peer(&dev, &proc), "", "not connected: no pid");
        std::fs::write(dev.join("pid"), "42\n").unwrap();
        assert_eq!(peer(&dev, &proc), "", "no sockets");
        symlink("/dev/nbd0", proc.join("42/fd/3")).unwrap();
        symlink("socket:[4003]", proc.join("42/fd/4")).unwrap();
        assert_eq!(peer(&dev, &proc), "", "no socket table");
        std::fs::write(proc.join("42/net/tcp"), table()).unwrap();
        assert_eq!(peer(&dev, &proc), "198.18.18.2:10809");
        std::fs::write(dev.join("pid"), "43\n").unwrap();
        assert_eq!(peer(&dev, &proc), "", "the process is gone");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
