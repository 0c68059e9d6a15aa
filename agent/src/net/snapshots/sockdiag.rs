//! TCP sockets and their `TCP_INFO`, from a sock_diag (INET_DIAG) dump, as `ss -ti` reads them.

use std::mem::offset_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{Result, ensure};

use super::netlink::{Netlink, attr, u32_at, u64_at};

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_INFO: u16 = 2;
const TCP_ESTABLISHED: u32 = 1;
/// `struct inet_diag_msg`: family, state, timer, retrans, `inet_diag_sockid` (48 bytes),
/// expires, rqueue, wqueue, uid, inode.
const INET_DIAG_MSG_LEN: usize = 72;
/// `inet_diag_sockid.idiag_dst`, within `inet_diag_msg`.
const DST_OFFSET: usize = 4 + 20;
/// `inet_diag_sockid.idiag_cookie` (two u32, low word first).
const COOKIE_OFFSET: usize = 4 + 40;
/// `idiag_wqueue`: for TCP, bytes written and not yet acknowledged (`ss`'s Send-Q).
const WQUEUE_OFFSET: usize = 4 + 48 + 8;
/// `tcp_info`'s byte after the window scales: `tcpi_delivery_rate_app_limited` is its low
/// bit (a bit field libc does not name).
const APP_LIMITED_OFFSET: usize = offset_of!(libc::tcp_info, tcpi_snd_rcv_wscale) + 1;

/// One established TCP socket: its peer and what `TCP_INFO` says about the path and the
/// data waiting to go. Fields a kernel's `tcp_info` is too short for are None: sent bytes
/// not yet sent since 4.6, the delivery rate since 4.9, the time limits since 4.10, the
/// delivered counts since 4.18.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    pub peer: IpAddr,
    /// The kernel's identifier of the socket (unique while it lives).
    pub cookie: u64,
    /// Smoothed RTT (`tcpi_rtt`), microseconds.
    pub srtt_us: u32,
    /// Path MTU (`tcpi_pmtu`) and send MSS (`tcpi_snd_mss`), bytes.
    pub pmtu: u32,
    pub snd_mss: u32,
    /// Bytes written and not yet acknowledged: in flight or not sent yet (`idiag_wqueue`).
    pub send_queue: u32,
    /// Bytes written and not sent yet (`tcpi_notsent_bytes`).
    pub notsent: Option<u32>,
    /// The latest delivery rate sample (`tcpi_delivery_rate`), bytes per second, and
    /// whether the application, not the path, limited it (`tcpi_delivery_rate_app_limited`:
    /// the socket had nothing more to send).
    pub delivery_rate: Option<u64>,
    pub app_limited: bool,
    /// Time limits, microseconds since the socket started: with data to send
    /// (`tcpi_busy_time`, which includes the two below), stopped by the receiver's window
    /// (`tcpi_rwnd_limited`), starved by the sender's buffer (`tcpi_sndbuf_limited`).
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// Segments delivered (`tcpi_delivered`), and those acknowledged with an ECN echo
    /// (`tcpi_delivered_ce`).
    pub delivered: Option<u32>,
    pub delivered_ce: Option<u32>,
}

/// Opens a sock_diag socket in the calling thread's network namespace.
pub fn open() -> Result<Netlink> {
    Netlink::open(NETLINK_SOCK_DIAG)
}

/// Every established TCP socket (IPv4 and IPv6) of the socket's network namespace, which must
/// be the calling thread's.
pub fn dump(nl: &mut Netlink) -> Result<Vec<TcpSocket>> {
    let mut out = Vec::new();
    let mut err = None;
    for (family, sockstat, prefix) in [
        (libc::AF_INET as u8, "sockstat", "TCP:"),
        (libc::AF_INET6 as u8, "sockstat6", "TCP6:"),
    ] {
        // A dump walks the kernel's whole table of established sockets, which all namespaces
        // share (hundreds of thousands of buckets), even when this namespace has no socket
        // of the family: skip it then.
        let path = format!("/proc/thread-self/net/{sockstat}");
        if let Ok(text) = std::fs::read_to_string(&path)
            && tcp_in_use(&text, prefix) == Some(0)
        {
            continue;
        }
        nl.dump(SOCK_DIAG_BY_FAMILY, &request(family), |p| match parse(p) {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {}
            Err(e) => err = Some(e),
        })?;
    }
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// TCP sockets in use (hashed: listening or connected) from a sockstat file's `prefix` line,
/// e.g. `TCP: inuse 3 orphan 0 tw 2 alloc 4 mem 1`.
fn tcp_in_use(sockstat: &str, prefix: &str) -> Option<u64> {
    let rest = sockstat.lines().find_map(|l| l.strip_prefix(prefix))?;
    let mut words = rest.split_whitespace();
    while let Some(w) = words.next() {
        if w == "inuse" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// `struct inet_diag_req_v2` asking for TCP sockets in ESTABLISHED with `TCP_INFO`.
fn request(family: u8) -> [u8; 56] {
    let mut r = [0u8; 56];
    r[0] = family;
    r[1] = libc::IPPROTO_TCP as u8;
    r[2] = 1 << (INET_DIAG_INFO - 1);
    r[4..8].copy_from_slice(&(1u32 << TCP_ESTABLISHED).to_ne_bytes());
    r
}

/// Parses one `inet_diag_msg` with its attributes; None for a socket without `TCP_INFO`.
pub fn parse(p: &[u8]) -> Result<Option<TcpSocket>> {
    ensure!(p.len() >= INET_DIAG_MSG_LEN, "sock_diag: short message");
    let dst = &p[DST_OFFSET..DST_OFFSET + 16];
    let peer = match p[0] as i32 {
        libc::AF_INET => IpAddr::V4(Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3])),
        libc::AF_INET6 => {
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(dst).expect("16 bytes"))).to_canonical()
        }
        f => anyhow::bail!("sock_diag: unexpected family {f}"),
    };
    let Some(info) = attr(&p[INET_DIAG_MSG_LEN..], INET_DIAG_INFO)? else {
        return Ok(None);
    };
    // struct tcp_info is UAPI and only grows; libc mirrors its layout. The kernel sends as
    // much of it as it has: later fields are absent on older kernels.
    let field = |off: usize| u32_at(info, off);
    let newer = |off: usize| u32_at(info, off).ok();
    let newer64 = |off: usize| u64_at(info, off).ok();
    Ok(Some(TcpSocket {
        peer,
        cookie: u64::from(u32_at(p, COOKIE_OFFSET)?)
            | u64::from(u32_at(p, COOKIE_OFFSET + 4)?) << 32,
        srtt_us: field(offset_of!(libc::tcp_info, tcpi_rtt))?,
        pmtu: field(offset_of!(libc::tcp_info, tcpi_pmtu))?,
        snd_mss: field(offset_of!(libc::tcp_info, tcpi_snd_mss))?,
        send_queue: u32_at(p, WQUEUE_OFFSET)?,
        notsent: newer(offset_of!(libc::tcp_info, tcpi_notsent_bytes)),
        delivery_rate: newer64(offset_of!(libc::tcp_info, tcpi_delivery_rate)),
        app_limited: info.get(APP_LIMITED_OFFSET).is_some_and(|b| b & 1 != 0),
        busy_us: newer64(offset_of!(libc::tcp_info, tcpi_busy_time)),
        rwnd_limited_us: newer64(offset_of!(libc::tcp_info, tcpi_rwnd_limited)),
        sndbuf_limited_us: newer64(offset_of!(libc::tcp_info, tcpi_sndbuf_limited)),
        delivered: newer(offset_of!(libc::tcp_info, tcpi_delivered)),
        delivered_ce: newer(offset_of!(libc::tcp_info, tcpi_delivered_ce)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::snapshots::netlink::captured_payloads;

    /// A sock_diag dump captured in a lab namespace: both ends of one connection over
    /// loopback (198.19.245.2 to itself).
    #[test]
    fn parses_a_captured_socket_dump() {
        let socks: Vec<TcpSocket> = captured_payloads(include_str!("testdata/sockdiag.hex"))
            .iter()
            .map(|p| parse(p).unwrap().unwrap())
            .collect();
        assert_eq!(socks.len(), 2);
        for s in &socks {
            assert_eq!(s.peer, "198.19.245.2".parse::<IpAddr>().unwrap());
            assert_eq!(s.pmtu, 65535);
            assert!(s.srtt_us > 0 && s.srtt_us < 1_000_000);
            assert!(s.snd_mss > 0);
            // Idle: nothing queued, nothing limited, the handshake delivered.
            assert_eq!((s.send_queue, s.notsent), (0, Some(0)));
            assert_eq!(
                (s.busy_us, s.rwnd_limited_us, s.sndbuf_limited_us),
                (Some(0), Some(0), Some(0))
            );
            assert_eq!((s.delivered, s.delivered_ce), (Some(1), Some(0)));
            assert!(s.app_limited);
        }
        assert_ne!(socks[0].cookie, socks[1].cookie);
    }

    /// A kernel whose `tcp_info` ends before a field leaves that field unknown.
    #[test]
    fn an_older_kernels_shorter_tcp_info() {
        let full = &captured_payloads(include_str!("testdata/sockdiag.hex"))[0];
        let info = attr(&full[INET_DIAG_MSG_LEN..], INET_DIAG_INFO)
            .unwrap()
            .unwrap();
        let cut = |len: usize| {
            let mut p = full[..INET_DIAG_MSG_LEN].to_vec();
            p.extend_from_slice(&((4 + len) as u16).to_ne_bytes());
            p.extend_from_slice(&INET_DIAG_INFO.to_ne_bytes());
            p.extend_from_slice(&info[..len]);
            parse(&p).unwrap().unwrap()
        };
        // 4.9: up to the delivery rate.
        let s = cut(offset_of!(libc::tcp_info, tcpi_busy_time));
        assert_eq!((s.notsent, s.delivery_rate), (Some(0), Some(0)));
        assert_eq!((s.busy_us, s.delivered_ce), (None, None));
        // 4.10: the time limits, not yet the delivered segments.
        let s = cut(offset_of!(libc::tcp_info, tcpi_delivered));
        assert_eq!((s.busy_us, s.sndbuf_limited_us), (Some(0), Some(0)));
        assert_eq!(s.delivered, None);
    }

    #[test]
    fn sockets_in_use_come_from_sockstat() {
        let v4 = "sockets: used 14\nTCP: inuse 3 orphan 0 tw 206 alloc 4 mem 71\nUDP: inuse 0\n";
        assert_eq!(tcp_in_use(v4, "TCP:"), Some(3));
        let v6 = "TCP6: inuse 0\nUDP6: inuse 0\n";
        assert_eq!(tcp_in_use(v6, "TCP6:"), Some(0));
        assert_eq!(tcp_in_use(v6, "TCP:"), None);
        assert_eq!(tcp_in_use("TCP: inuse x\n", "TCP:"), None);
    }

    #[test]
    fn request_asks_for_established_tcp_with_info() {
        let r = request(libc::AF_INET6 as u8);
        assert_eq!(r[0] as i32, libc::AF_INET6);
        assert_eq!(r[1] as i32, libc::IPPROTO_TCP);
        assert_eq!(r[2], 1 << (INET_DIAG_INFO - 1));
        assert_eq!(u32::from_ne_bytes(r[4..8].try_into().unwrap()), 1 << 1);
    }
}
