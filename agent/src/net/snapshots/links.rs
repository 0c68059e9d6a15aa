//! Interfaces and their counters, from an rtnetlink link dump (`ip -s link`).

use anyhow::{Context, Result, ensure};

use super::netlink::{Netlink, attr, string, u32_at, u64_at};

const RTM_GETLINK: u16 = 18;
const IFINFOMSG_LEN: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_STATS64: u16 = 23;
const IFF_LOOPBACK: u32 = 0x8;

/// `struct rtnl_link_stats64`: the fields stornet reports, by position (u64 each).
const STATS64_FIELDS: usize = 16;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    /// The NIC's receive ring was full (`rx_missed_errors`).
    pub rx_missed: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: i32,
    pub name: String,
    pub loopback: bool,
    pub mtu: Option<u32>,
    pub stats: Option<LinkStats>,
}

/// Every interface of the socket's network namespace.
pub fn dump(nl: &mut Netlink) -> Result<Vec<Link>> {
    let mut out = Vec::new();
    let mut err = None;
    // struct ifinfomsg, all zero: every family, every interface.
    nl.dump(RTM_GETLINK, &[0; IFINFOMSG_LEN], |p| match parse(p) {
        Ok(l) => out.push(l),
        Err(e) => err = Some(e),
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Parses one RTM_NEWLINK payload (`struct ifinfomsg` and attributes).
pub fn parse(p: &[u8]) -> Result<Link> {
    ensure!(p.len() >= IFINFOMSG_LEN, "rtnetlink: short link message");
    let index = u32_at(p, 4)? as i32;
    let flags = u32_at(p, 8)?;
    let a = &p[IFINFOMSG_LEN..];
    let name = attr(a, IFLA_IFNAME)?
        .map(string)
        .with_context(|| format!("rtnetlink: interface {index} has no name"))?;
    let mtu = attr(a, IFLA_MTU)?.map(|v| u32_at(v, 0)).transpose()?;
    let stats = attr(a, IFLA_STATS64)?.map(stats64).transpose()?;
    Ok(Link {
        index,
        name,
        loopback: flags & IFF_LOOPBACK != 0,
        mtu,
        stats,
    })
}

fn stats64(v: &[u8]) -> Result<LinkStats> {
    ensure!(
        v.len() >= STATS64_FIELDS * 8,
        "rtnetlink: IFLA_STATS64 of {} bytes",
        v.len()
    );
    let f = |i: usize| u64_at(v, i * 8);
    Ok(LinkStats {
        rx_packets: f(0)?,
        tx_packets: f(1)?,
        rx_bytes: f(2)?,
        tx_bytes: f(3)?,
        rx_errors: f(4)?,
        tx_errors: f(5)?,
        rx_dropped: f(6)?,
        tx_dropped: f(7)?,
        rx_missed: f(15)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::snapshots::netlink::captured_payloads;

    /// A link dump captured in a lab namespace after a short transfer: loopback and a veth
    /// shaped by tbf.
    #[test]
    fn parses_a_captured_link_dump() {
        let links: Vec<Link> = captured_payloads(include_str!("testdata/link.hex"))
            .iter()
            .map(|p| parse(p).unwrap())
            .collect();
        assert_eq!(links.len(), 2);
        let lo = &links[0];
        assert_eq!(
            (lo.name.as_str(), lo.loopback, lo.mtu),
            ("lo", true, Some(65536))
        );
        let veth = &links[1];
        assert_eq!((veth.name.as_str(), veth.loopback), ("veth-a", false));
        assert_eq!(veth.mtu, Some(1500));
        let s = veth.stats.as_ref().unwrap();
        // The sending side of a transfer: data out, ACKs in.
        assert_eq!((s.tx_packets, s.tx_bytes), (38, 46642));
        assert_eq!((s.rx_packets, s.rx_bytes), (38, 2997));
        assert_eq!((s.rx_dropped, s.tx_dropped, s.rx_errors), (0, 0, 0));
    }
}
