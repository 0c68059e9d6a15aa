//! A small netlink client: one request, its dump, and the parsing of messages and attributes
//! (pure functions, so they are tested on captured bytes).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, Result, ensure};

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
/// Attribute type bits that are flags, not the type.
const NLA_TYPE_MASK: u16 = !(1 << 15 | 1 << 14);

/// Netlink messages and attributes are 4-byte aligned.
pub const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message: its type, sequence number and payload (after the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub kind: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// The messages in one datagram.
pub fn messages(mut buf: &[u8]) -> impl Iterator<Item = Result<Message<'_>>> {
    std::iter::from_fn(move || {
        if buf.is_empty() {
            return None;
        }
        let msg = (|| {
            ensure!(
                buf.len() >= NLMSG_HDRLEN,
                "netlink: truncated message header"
            );
            let len = u32_at(buf, 0)? as usize;
            ensure!(
                (NLMSG_HDRLEN..=buf.len()).contains(&len),
                "netlink: message length {len} outside the {} bytes received",
                buf.len()
            );
            let m = Message {
                kind: u16_at(buf, 4)?,
                seq: u32_at(buf, 8)?,
                payload: &buf[NLMSG_HDRLEN..len],
            };
            buf = &buf[align(len).min(buf.len())..];
            Ok(m)
        })();
        if msg.is_err() {
            buf = &[];
        }
        Some(msg)
    })
}

/// The attributes (type without flag bits, payload) in `buf`.
pub fn attrs(mut buf: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8])>> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let attr = (|| {
            let len = u16_at(buf, 0)? as usize;
            ensure!(
                (4..=buf.len()).contains(&len),
                "netlink: attribute length {len} outside the {} bytes left",
                buf.len()
            );
            let a = (u16_at(buf, 2)? & NLA_TYPE_MASK, &buf[4..len]);
            buf = &buf[align(len).min(buf.len())..];
            Ok(a)
        })();
        if attr.is_err() {
            buf = &[];
        }
        Some(attr)
    })
}

/// The payload of attribute `kind` in `buf`, if present.
pub fn attr(buf: &[u8], kind: u16) -> Result<Option<&[u8]>> {
    for a in attrs(buf) {
        let (k, v) = a?;
        if k == kind {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

pub fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).context("netlink: short field")?;
    Ok(u16::from_ne_bytes(s.try_into().expect("2 bytes")))
}

pub fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    let s = b.get(at..at + 4).context("netlink: short field")?;
    Ok(u32::from_ne_bytes(s.try_into().expect("4 bytes")))
}

pub fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    let s = b.get(at..at + 8).context("netlink: short field")?;
    Ok(u64::from_ne_bytes(s.try_into().expect("8 bytes")))
}

/// Appends an attribute (length, type, payload, padding) to a message being built.
pub fn put_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align(buf.len()), 0);
}

/// A NUL-terminated string attribute.
pub fn string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// The kernel refused a request: its errno, which callers may tell apart (a netlink family
/// or an operation this kernel lacks).
#[derive(Debug)]
pub struct Refused {
    pub kind: u16,
    pub errno: i32,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "netlink request {}: {}",
            self.kind,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

impl std::error::Error for Refused {}

/// A netlink socket of one protocol, in the network namespace of the thread that opened it.
pub struct Netlink {
    fd: OwnedFd,
    seq: u32,
}

impl Netlink {
    pub fn open(protocol: i32) -> Result<Netlink> {
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                protocol,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("opening a netlink socket");
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The kernel answers at once; a timeout only guards a scrape against the unforeseen.
        let tv = libc::timeval {
            tv_sec: Duration::from_secs(5).as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: setsockopt with a valid timeval.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        Ok(Netlink { fd, seq: 0 })
    }

    /// Sends a dump request of `kind` with `body`, and calls `each` with every answer's
    /// payload until the kernel says it is done.
    pub fn dump(&mut self, kind: u16, body: &[u8], each: impl FnMut(&[u8])) -> Result<()> {
        self.exchange(kind, NLM_F_REQUEST | NLM_F_DUMP, body, each)
    }

    /// Sends a request of `kind` for one object with `body`, and calls `each` with the
    /// answer's payload; done at the kernel's acknowledgement.
    pub fn request(&mut self, kind: u16, body: &[u8], each: impl FnMut(&[u8])) -> Result<()> {
        self.exchange(kind, NLM_F_REQUEST | NLM_F_ACK, body, each)
    }

    fn exchange(
        &mut self,
        kind: u16,
        flags: u16,
        body: &[u8],
        mut each: impl FnMut(&[u8]),
    ) -> Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let len = NLMSG_HDRLEN + body.len();
        let mut req = Vec::with_capacity(align(len));
        req.extend_from_slice(&(len as u32).to_ne_bytes());
        req.extend_from_slice(&kind.to_ne_bytes());
        req.extend_from_slice(&flags.to_ne_bytes());
        req.extend_from_slice(&self.seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        req.extend_from_slice(body);
        req.resize(align(len), 0);
        // SAFETY: send(2) of an initialized buffer; the kernel is the destination (autobind).
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                req.as_ptr() as *const libc::c_void,
                req.len(),
                0,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error()).context("netlink send");
        }
        let mut buf = vec![0u8; 1 << 16];
        loop {
            // SAFETY: recv(2) into a buffer of buf.len() bytes. MSG_TRUNC returns the real
            // length, so a datagram larger than the buffer is detected.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error()).context("netlink receive");
            }
            let n = n as usize;
            ensure!(n <= buf.len(), "netlink: {n}-byte datagram truncated");
            for m in messages(&buf[..n]) {
                let m = m?;
                if m.seq != self.seq {
                    continue;
                }
                match m.kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let code = u32_at(m.payload, 0)? as i32;
                        if code != 0 {
                            return Err(Refused { kind, errno: -code }.into());
                        }
                        // An acknowledgement ends a request that was not a dump.
                        if flags & NLM_F_DUMP == 0 {
                            return Ok(());
                        }
                    }
                    _ => each(m.payload),
                }
            }
        }
    }
}

/// Captured datagrams for tests: one hex-encoded datagram per line.
#[cfg(test)]
pub fn datagrams(hex: &str) -> Vec<Vec<u8>> {
    hex.lines()
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

/// The payloads of the data messages (not DONE or ERROR) in captured datagrams.
#[cfg(test)]
pub fn captured_payloads(hex: &str) -> Vec<Vec<u8>> {
    datagrams(hex)
        .iter()
        .flat_map(|d| messages(d).map(|m| m.unwrap()).collect::<Vec<_>>())
        .filter(|m| m.kind != NLMSG_DONE && m.kind != NLMSG_ERROR)
        .map(|m| m.payload.to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_messages_and_attributes() {
        // Two messages: one with attributes (u32 type 4 = 9000, string type 3 = "eth0"),
        // then NLMSG_DONE.
        let mut d = Vec::new();
        let body: Vec<u8> = [
            &8u16.to_ne_bytes()[..],
            &4u16.to_ne_bytes(),
            &9000u32.to_ne_bytes(),
            &9u16.to_ne_bytes(),
            &(3u16 | 1 << 15).to_ne_bytes(),
            b"eth0\0\0\0\0",
        ]
        .concat();
        for (kind, body) in [(16u16, &body[..]), (NLMSG_DONE, &[0u8; 4][..])] {
            d.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
            d.extend_from_slice(&kind.to_ne_bytes());
            d.extend_from_slice(&[0, 0]);
            d.extend_from_slice(&7u32.to_ne_bytes());
            d.extend_from_slice(&[0; 4]);
            d.extend_from_slice(body);
        }
        let msgs: Vec<Message> = messages(&d).map(|m| m.unwrap()).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].kind, msgs[0].seq), (16, 7));
        assert_eq!(msgs[1].kind, NLMSG_DONE);
        let a: Vec<(u16, &[u8])> = attrs(msgs[0].payload).map(|a| a.unwrap()).collect();
        assert_eq!(a.len(), 2);
        assert_eq!(
            u32_at(attr(msgs[0].payload, 4).unwrap().unwrap(), 0).unwrap(),
            9000
        );
        // The nested flag is masked off the type; the string stops at its NUL.
        assert_eq!(string(attr(msgs[0].payload, 3).unwrap().unwrap()), "eth0");
    }

    #[test]
    fn refuses_lengths_beyond_the_data() {
        let mut d = vec![0u8; 16];
        d[..4].copy_from_slice(&64u32.to_ne_bytes());
        assert!(messages(&d).next().unwrap().is_err());
        assert!(messages(&d[..8]).next().unwrap().is_err());
        let bad_attr = [12u8, 0, 1, 0, 0, 0, 0, 0];
        assert!(attrs(&bad_attr).next().unwrap().is_err());
        assert!(attr(&bad_attr, 1).is_err());
    }
}
