//! Link speed and the driver's pause-frame counters (`ethtool`, `ethtool -S`), over the
//! SIOCETHTOOL ioctl on a socket of the interface's network namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result, ensure};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 0x1;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// Stat counts of real drivers are in the thousands at most; the kernel writes as many
/// values as the driver has at call time, so buffers get room beyond the count read first.
const MAX_STATS: usize = 1 << 16;
const SLACK: usize = 256;

/// An AF_INET datagram socket to issue ethtool ioctls on.
pub struct Ethtool(OwnedFd);

impl Ethtool {
    pub fn open() -> Result<Ethtool> {
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("opening an ethtool socket");
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Ethtool(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// SIOCETHTOOL on `ifname` with `data` (a struct starting with the u32 command).
    fn ioctl(&self, ifname: &str, data: &mut [u8]) -> io::Result<()> {
        // SAFETY: an all-zero ifreq is valid.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        let name = ifname.as_bytes();
        if name.len() >= ifr.ifr_name.len() {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = data.as_mut_ptr() as *mut libc::c_char;
        // SAFETY: the kernel writes within `data`, sized by the caller for the command.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Link speed in bits per second, if the driver knows it.
    pub fn speed_bps(&self, ifname: &str) -> Option<u64> {
        // struct ethtool_cmd: speed (u16) at 12, speed_hi (u16) at 28, in Mb/s.
        let mut cmd = [0u8; 44];
        cmd[..4].copy_from_slice(&ETHTOOL_GSET.to_ne_bytes());
        self.ioctl(ifname, &mut cmd).ok()?;
        let lo = u16::from_ne_bytes([cmd[12], cmd[13]]) as u32;
        let hi = u16::from_ne_bytes([cmd[28], cmd[29]]) as u32;
        let mbps = (hi << 16) | lo;
        // SPEED_UNKNOWN is -1; 0 means no link.
        (mbps != u32::MAX && mbps != 0).then(|| mbps as u64 * 1_000_000)
    }

    /// The driver statistics (`ethtool -S`) whose name says they count pause frames.
    pub fn pause_counters(&self, ifname: &str) -> Result<Vec<(String, u64)>> {
        let n = self.stats_count(ifname)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let cap = n + SLACK;
        // struct ethtool_gstrings: cmd, string_set, len, then len strings of 32 bytes.
        let mut strings = vec![0u8; 12 + cap * ETH_GSTRING_LEN];
        strings[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        strings[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
        strings[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
        self.ioctl(ifname, &mut strings)
            .with_context(|| format!("ETHTOOL_GSTRINGS on {ifname}"))?;
        let names = parse_strings(&strings[12..], n);
        let pause: Vec<usize> = (0..names.len()).filter(|&i| is_pause(&names[i])).collect();
        if pause.is_empty() {
            return Ok(Vec::new());
        }
        // struct ethtool_stats: cmd, n_stats, then n_stats u64 values.
        let mut stats = vec![0u8; 8 + cap * 8];
        stats[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        stats[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
        self.ioctl(ifname, &mut stats)
            .with_context(|| format!("ETHTOOL_GSTATS on {ifname}"))?;
        let got = u32::from_ne_bytes(stats[4..8].try_into().expect("4 bytes")) as usize;
        ensure!(
            got == n,
            "{ifname}: driver statistics changed while reading them"
        );
        Ok(pause
            .into_iter()
            .map(|i| {
                let v = &stats[8 + i * 8..16 + i * 8];
                (
                    names[i].clone(),
                    u64::from_ne_bytes(v.try_into().expect("8")),
                )
            })
            .collect())
    }

    /// How many driver statistics `ifname` has (0 when the driver has none).
    fn stats_count(&self, ifname: &str) -> Result<usize> {
        // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set.
        let mut info = [0u8; 20];
        info[..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
        info[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
        if self.ioctl(ifname, &mut info).is_err() {
            return Ok(0);
        }
        let mask = u64::from_ne_bytes(info[8..16].try_into().expect("8 bytes"));
        if mask & (1 << ETH_SS_STATS) == 0 {
            return Ok(0);
        }
        let n = u32::from_ne_bytes(info[16..20].try_into().expect("4 bytes")) as usize;
        ensure!(
            n <= MAX_STATS,
            "{ifname}: implausible {n} driver statistics"
        );
        Ok(n)
    }
}

/// `n` NUL-padded names of ETH_GSTRING_LEN bytes each.
fn parse_strings(b: &[u8], n: usize) -> Vec<String> {
    b.chunks(ETH_GSTRING_LEN)
        .take(n)
        .map(super::netlink::string)
        .collect()
}

/// Driver statistic names for pause frames differ per driver (`rx_pause_ctrl_phy`,
/// `tx_pause_frames`, `rx_xoff`, `tx_pfc_ena_frames_prio3`, …).
pub fn is_pause(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["pause", "xon", "xoff", "pfc"]
        .iter()
        .any(|w| n.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_counter_names() {
        for n in [
            "rx_pause_ctrl_phy",
            "tx_pause_frames",
            "rx_xoff",
            "tx_pfc_ena_frames_prio3",
        ] {
            assert!(is_pause(n), "{n}");
        }
        for n in ["rx_packets", "peer_ifindex", "rx_queue_0_xdp_drops"] {
            assert!(!is_pause(n), "{n}");
        }
    }

    #[test]
    fn string_sets() {
        let mut b = vec![0u8; 3 * ETH_GSTRING_LEN];
        b[..11].copy_from_slice(b"rx_pause_ok");
        b[32..36].copy_from_slice(b"tx_b");
        assert_eq!(parse_strings(&b, 2), ["rx_pause_ok", "tx_b"]);
    }
}
