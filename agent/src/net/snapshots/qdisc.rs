//! Queueing disciplines and their statistics, from an rtnetlink qdisc dump (`tc -s qdisc`).

use anyhow::{Context, Result, ensure};

use super::netlink::{Netlink, attr, string, u32_at};

const RTM_GETQDISC: u16 = 38;
const TCMSG_LEN: usize = 20;
const TCA_KIND: u16 = 1;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
const TC_H_ROOT: u32 = 0xffff_ffff;
const TC_H_INGRESS: u32 = 0xffff_fff1;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Qdisc {
    pub ifindex: i32,
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
}

/// Every qdisc of the socket's network namespace.
pub fn dump(nl: &mut Netlink) -> Result<Vec<Qdisc>> {
    let mut out = Vec::new();
    let mut err = None;
    nl.dump(RTM_GETQDISC, &[0; TCMSG_LEN], |p| match parse(p) {
        Ok(q) => out.push(q),
        Err(e) => err = Some(e),
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Parses one RTM_NEWQDISC payload (`struct tcmsg` and attributes).
pub fn parse(p: &[u8]) -> Result<Qdisc> {
    ensure!(p.len() >= TCMSG_LEN, "rtnetlink: short qdisc message");
    let a = &p[TCMSG_LEN..];
    let mut q = Qdisc {
        ifindex: u32_at(p, 4)? as i32,
        handle: u32_at(p, 8)?,
        parent: u32_at(p, 12)?,
        kind: attr(a, TCA_KIND)?
            .map(string)
            .context("rtnetlink: qdisc without a kind")?,
        ..Qdisc::default()
    };
    // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits (u32 each).
    if let Some(queue) = attr(a, TCA_STATS2)?
        .map(|s| attr(s, TCA_STATS_QUEUE))
        .transpose()?
        .flatten()
    {
        q.backlog_packets = u32_at(queue, 0)?.into();
        q.backlog_bytes = u32_at(queue, 4)?.into();
        q.drops = u32_at(queue, 8)?.into();
        q.requeues = u32_at(queue, 12)?.into();
        q.overlimits = u32_at(queue, 16)?.into();
    } else if let Some(s) = attr(a, TCA_STATS)? {
        // struct tc_stats: bytes (u64), packets, drops, overlimits, bps, pps, qlen, backlog.
        q.drops = u32_at(s, 12)?.into();
        q.overlimits = u32_at(s, 16)?.into();
        q.backlog_packets = u32_at(s, 28)?.into();
        q.backlog_bytes = u32_at(s, 32)?.into();
    }
    Ok(q)
}

/// A handle as `tc` prints it: `8001:` for a qdisc, `8001:1` for a class.
pub fn handle_name(h: u32) -> String {
    match h {
        TC_H_ROOT => "root".into(),
        TC_H_INGRESS => "ingress".into(),
        _ if h & 0xffff == 0 => format!("{:x}:", h >> 16),
        _ => format!("{:x}:{:x}", h >> 16, h & 0xffff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::snapshots::netlink::captured_payloads;

    /// A qdisc dump captured after a transfer through a 16 kB tbf: `tc -s qdisc` showed
    /// `tbf 8007: root … (dropped 26, overlimits 0 requeues 0)`.
    #[test]
    fn parses_a_captured_qdisc_dump() {
        let q: Vec<Qdisc> = captured_payloads(include_str!("testdata/qdisc.hex"))
            .iter()
            .map(|p| parse(p).unwrap())
            .collect();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].kind, "noqueue");
        let tbf = &q[1];
        assert_eq!(tbf.kind, "tbf");
        assert_eq!(handle_name(tbf.handle), "8007:");
        assert_eq!(handle_name(tbf.parent), "root");
        assert_eq!((tbf.drops, tbf.overlimits, tbf.requeues), (26, 0, 0));
        assert_eq!((tbf.backlog_bytes, tbf.backlog_packets), (0, 0));
        assert_eq!(tbf.ifindex, 2);
    }

    #[test]
    fn handle_names() {
        assert_eq!(handle_name(0), "0:");
        assert_eq!(handle_name(0x8001_0000), "8001:");
        assert_eq!(handle_name(0x0001_0002), "1:2");
        assert_eq!(handle_name(TC_H_INGRESS), "ingress");
    }
}
