//! Reading a sysfs attribute in three system calls (open, read, close). A scrape reads a
//! hundred of them, and `fs::read_to_string` adds a stat and a second read to each. An
//! attribute's value is at most a page, and sysfs returns it whole to the first read (as a
//! regular file this small is, where the tests make their trees).

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Larger than any attribute's value (a page).
const BUFFER: usize = 4096 + 1;

/// The attribute at `path`, or None if it cannot be read (absent, or refused, as a queue's
/// `wbt_lat_usec` is without writeback throttling).
pub fn read(path: &Path) -> Option<String> {
    let mut file = File::open(path).ok()?;
    let mut buf = [0u8; BUFFER];
    let n = loop {
        match file.read(&mut buf) {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    };
    // A value that fills the buffer is not an attribute's.
    if n == BUFFER {
        return None;
    }
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// The attribute at `path` as a number.
pub fn read_u64(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_whole_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("stornet-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("size"), "2048\n").unwrap();
        std::fs::write(dir.join("bad"), "20x\n").unwrap();
        std::fs::write(dir.join("inflight"), "       3        5\n").unwrap();
        assert_eq!(read_u64(&dir.join("size")), Some(2048));
        assert_eq!(read_u64(&dir.join("bad")), None);
        assert_eq!(read_u64(&dir.join("gone")), None);
        assert_eq!(
            read(&dir.join("inflight")).as_deref(),
            Some("       3        5\n")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_real_attribute_is_read_in_one_piece() {
        // Every Linux host has a loopback interface and its MTU.
        let mtu = read_u64(Path::new("/sys/class/net/lo/mtu")).expect("lo's mtu");
        let whole = std::fs::read_to_string("/sys/class/net/lo/mtu").unwrap();
        assert_eq!(mtu, whole.trim().parse::<u64>().unwrap());
    }
}
