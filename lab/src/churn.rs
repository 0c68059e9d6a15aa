//! Churn for the agent's bounds: many short-lived TCP peers (each a SYN retransmitted to an
//! address nothing answers) and loop devices that come and go, and the agent's footprint
//! (resident memory, open files) read from /proc.

use std::net::Ipv4Addr;

use anyhow::{Context, Result, ensure};

use crate::netns::{HostPair, Subnet, snmp_field};

/// Resident memory (bytes) and open file descriptors of process `pid`.
pub fn footprint(pid: u32) -> Result<(u64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    Ok((rss_kib * 1024, fds))
}

/// A host pair whose host `a` routes four more /24s through host `b`, which does not forward
/// them: about a thousand addresses to connect to, each a new peer whose SYN the kernel
/// retransmits after its first timeout (1 s). (A next hop that does not answer ARP would not
/// do: the kernel does not retransmit a SYN still queued for its neighbour.)
pub struct PeerSpace {
    pub pair: HostPair,
    _subnets: Vec<Subnet>,
    pub addrs: Vec<Ipv4Addr>,
}

impl PeerSpace {
    pub fn new(tag: &str) -> Result<PeerSpace> {
        let pair = HostPair::new(tag)?;
        let mut subnets = Vec::new();
        let mut addrs = Vec::new();
        for _ in 0..4 {
            let s = Subnet::allocate()?;
            let net = format!("{}/24", s.addr(0));
            let via = pair.b_addr().to_string();
            pair.a
                .ip(&["route", "add", &net, "via", &via, "dev", pair.a_dev])?;
            addrs.extend((2..=251).map(|h| s.addr(h)));
            subnets.push(s);
        }
        Ok(PeerSpace {
            pair,
            _subnets: subnets,
            addrs,
        })
    }

    /// Opens a connection to each address from host `a` (their SYNs go unanswered); they
    /// close when the returned sockets drop.
    pub fn connect(&self, addrs: &[Ipv4Addr]) -> Result<Vec<Pending>> {
        self.pair
            .a
            .enter(|| addrs.iter().map(|a| Pending::connect(*a)).collect())
    }

    /// `RetransSegs` of host `a`.
    pub fn retrans_segs(&self) -> Result<u64> {
        self.pair.a.snmp_tcp("RetransSegs")
    }
}

/// A non-blocking TCP connection still in SYN_SENT; closed on drop.
pub struct Pending(i32);

impl Pending {
    fn connect(a: Ipv4Addr) -> Result<Pending> {
        // SAFETY: a plain socket call; the descriptor is owned by the value returned.
        let fd = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        ensure!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let pending = Pending(fd);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 9u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(a).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `sa` is a valid sockaddr_in of the size given.
        let r = unsafe {
            libc::connect(
                fd,
                (&raw const sa).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let err = std::io::Error::last_os_error();
        ensure!(
            r == 0 || err.raw_os_error() == Some(libc::EINPROGRESS),
            "connect to {a}: {err}"
        );
        Ok(pending)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}

/// `RetransSegs` of the calling thread's network namespace.
pub fn retrans_segs_here() -> Result<u64> {
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
    snmp_field(&snmp, "Tcp:", "RetransSegs")
}
