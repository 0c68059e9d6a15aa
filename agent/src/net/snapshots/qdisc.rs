//! Queueing disciplines, their statistics and the rate a shaper lets out, from rtnetlink
//! qdisc and class dumps (`tc -s qdisc`, `tc class`).

use anyhow::{Context, Result, ensure};

use super::netlink::{Netlink, attr, string, u32_at, u64_at};

const RTM_GETQDISC: u16 = 38;
const RTM_GETTCLASS: u16 = 42;
const TCMSG_LEN: usize = 20;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
pub const TC_H_ROOT: u32 = 0xffff_ffff;
const TC_H_INGRESS: u32 = 0xffff_fff1;

/// tbf: `struct tc_tbf_qopt` (its rate, a `struct tc_ratespec`, first), and the 64-bit
/// rate the kernel adds when the rate does not fit 32 bits.
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
/// htb classes: `struct tc_htb_opt` (rate, then ceil, each a `struct tc_ratespec`).
const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_CEIL64: u16 = 7;
/// cake: its bandwidth, 0 when unlimited.
const TCA_CAKE_BASE_RATE64: u16 = 2;
/// `struct tc_ratespec`: cell_log, linklayer, overhead, cell_align, mpu, then the rate (u32,
/// bytes per second).
const RATESPEC_LEN: usize = 12;
const RATESPEC_RATE: usize = 8;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Qdisc {
    pub ifindex: i32,
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    /// The rate a shaper lets out, bytes per second; None for qdiscs that do not shape.
    pub rate: Option<u64>,
}

/// Every qdisc of the socket's network namespace, with the rates of htb's classes.
pub fn dump(nl: &mut Netlink) -> Result<Vec<Qdisc>> {
    let mut out = Vec::new();
    let mut err = None;
    nl.dump(RTM_GETQDISC, &[0; TCMSG_LEN], |p| match parse(p) {
        Ok(q) => out.push(q),
        Err(e) => err = Some(e),
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    // htb keeps its rates in its classes, which are dumped per interface.
    let mut htb: Vec<i32> = out
        .iter()
        .filter(|q| q.kind == "htb")
        .map(|q| q.ifindex)
        .collect();
    htb.sort_unstable();
    htb.dedup();
    for ifindex in htb {
        let classes = classes(nl, ifindex)?;
        for q in out
            .iter_mut()
            .filter(|q| q.kind == "htb" && q.ifindex == ifindex)
        {
            q.rate = htb_rate(q.handle, &classes);
        }
    }
    Ok(out)
}

/// One htb class: its handle, parent and ceiling (bytes per second).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtbClass {
    pub handle: u32,
    pub parent: u32,
    pub ceil: u64,
}

/// The htb classes of interface `ifindex`.
fn classes(nl: &mut Netlink, ifindex: i32) -> Result<Vec<HtbClass>> {
    let mut req = [0u8; TCMSG_LEN];
    req[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    let mut out = Vec::new();
    let mut err = None;
    nl.dump(RTM_GETTCLASS, &req, |p| match parse_htb_class(p) {
        Ok(Some(c)) => out.push(c),
        Ok(None) => {}
        Err(e) => err = Some(e),
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Parses one RTM_NEWTCLASS payload; None for a class of another qdisc kind.
pub fn parse_htb_class(p: &[u8]) -> Result<Option<HtbClass>> {
    ensure!(p.len() >= TCMSG_LEN, "rtnetlink: short class message");
    let a = &p[TCMSG_LEN..];
    if attr(a, TCA_KIND)?.map(string).as_deref() != Some("htb") {
        return Ok(None);
    }
    let opts = attr(a, TCA_OPTIONS)?.context("rtnetlink: htb class without options")?;
    let parms = attr(opts, TCA_HTB_PARMS)?.context("rtnetlink: htb class without parameters")?;
    let ceil = match attr(opts, TCA_HTB_CEIL64)? {
        Some(v) => u64_at(v, 0)?,
        None => u32_at(parms, RATESPEC_LEN + RATESPEC_RATE)?.into(),
    };
    Ok(Some(HtbClass {
        handle: u32_at(p, 8)?,
        parent: u32_at(p, 12)?,
        ceil,
    }))
}

/// What the htb qdisc `handle` lets out: the ceilings of its top classes (those without a
/// parent class), which cannot borrow beyond them, summed. None without classes.
pub fn htb_rate(handle: u32, classes: &[HtbClass]) -> Option<u64> {
    let top: Vec<u64> = classes
        .iter()
        .filter(|c| c.handle >> 16 == handle >> 16 && c.parent == TC_H_ROOT)
        .map(|c| c.ceil)
        .collect();
    (!top.is_empty()).then(|| top.iter().sum())
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
    let stats2 = attr(a, TCA_STATS2)?;
    // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits (u32 each).
    if let Some(queue) = stats2
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
        q.sent_bytes = u64_at(s, 0)?;
        q.sent_packets = u32_at(s, 8)?.into();
        q.drops = u32_at(s, 12)?.into();
        q.overlimits = u32_at(s, 16)?.into();
        q.backlog_packets = u32_at(s, 28)?.into();
        q.backlog_bytes = u32_at(s, 32)?.into();
    }
    // struct gnet_stats_basic: bytes (u64), packets (u32).
    if let Some(basic) = stats2
        .map(|s| attr(s, TCA_STATS_BASIC))
        .transpose()?
        .flatten()
    {
        q.sent_bytes = u64_at(basic, 0)?;
        q.sent_packets = u32_at(basic, 8)?.into();
    }
    if let Some(opts) = attr(a, TCA_OPTIONS)? {
        q.rate = rate(&q.kind, opts)?;
    }
    Ok(q)
}

/// The rate in a tbf's or cake's options, bytes per second.
fn rate(kind: &str, opts: &[u8]) -> Result<Option<u64>> {
    Ok(match kind {
        "tbf" => match attr(opts, TCA_TBF_RATE64)? {
            Some(v) => Some(u64_at(v, 0)?),
            None => attr(opts, TCA_TBF_PARMS)?
                .map(|p| u32_at(p, RATESPEC_RATE).map(u64::from))
                .transpose()?,
        },
        "cake" => attr(opts, TCA_CAKE_BASE_RATE64)?
            .map(|v| u64_at(v, 0))
            .transpose()?
            .filter(|&r| r > 0),
        _ => None,
    })
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
        // `rate 200Mbit`, and what it let out: `Sent 50886 bytes 58 pkt`.
        assert_eq!(tbf.rate, Some(200_000_000 / 8));
        assert_eq!((tbf.sent_bytes, tbf.sent_packets), (50886, 58));
        assert_eq!(q[0].rate, None);
    }

    fn ratespec(rate: u32) -> Vec<u8> {
        let mut r = vec![0u8; RATESPEC_LEN];
        r[RATESPEC_RATE..].copy_from_slice(&rate.to_ne_bytes());
        r
    }

    fn nla(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        crate::net::snapshots::netlink::put_attr(&mut v, kind, payload);
        v
    }

    #[test]
    fn shaper_rates_from_options() {
        // tbf: the 32-bit rate, or the 64-bit one beyond 4 GB/s.
        let parms = [ratespec(5_000_000), ratespec(0), vec![0; 12]].concat();
        assert_eq!(
            rate("tbf", &nla(TCA_TBF_PARMS, &parms)).unwrap(),
            Some(5_000_000)
        );
        let fast = [
            nla(
                TCA_TBF_PARMS,
                &[ratespec(u32::MAX), ratespec(0), vec![0; 12]].concat(),
            ),
            nla(TCA_TBF_RATE64, &12_500_000_000u64.to_ne_bytes()),
        ]
        .concat();
        assert_eq!(rate("tbf", &fast).unwrap(), Some(12_500_000_000));
        // cake: its bandwidth, none when unlimited.
        let cake = |r: u64| nla(TCA_CAKE_BASE_RATE64, &r.to_ne_bytes());
        assert_eq!(rate("cake", &cake(1_250_000)).unwrap(), Some(1_250_000));
        assert_eq!(rate("cake", &cake(0)).unwrap(), None);
        assert_eq!(rate("fq_codel", &cake(5)).unwrap(), None);
    }

    #[test]
    fn htb_class_ceilings() {
        // A class message: tcmsg (handle 1:10, parent root), kind, options with the rate
        // and ceiling of `rate 30mbit ceil 50mbit`.
        let mut msg = vec![0u8; TCMSG_LEN];
        msg[8..12].copy_from_slice(&0x0001_0010u32.to_ne_bytes());
        msg[12..16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
        let opt = [ratespec(3_750_000), ratespec(6_250_000), vec![0; 20]].concat();
        msg.extend(nla(TCA_KIND, b"htb\0"));
        msg.extend(nla(TCA_OPTIONS, &nla(TCA_HTB_PARMS, &opt)));
        let c = parse_htb_class(&msg).unwrap().unwrap();
        assert_eq!(
            (c.handle, c.parent, c.ceil),
            (0x0001_0010, TC_H_ROOT, 6_250_000)
        );
        // The qdisc 1: lets out its top classes' ceilings; a child class borrows within
        // its parent, another qdisc's classes are its own.
        let classes = [
            c,
            HtbClass {
                handle: 0x0001_0020,
                parent: TC_H_ROOT,
                ceil: 2_500_000,
            },
            HtbClass {
                handle: 0x0001_0011,
                parent: 0x0001_0010,
                ceil: 6_250_000,
            },
            HtbClass {
                handle: 0x0002_0001,
                parent: TC_H_ROOT,
                ceil: 1_000,
            },
        ];
        assert_eq!(htb_rate(0x0001_0000, &classes), Some(8_750_000));
        assert_eq!(htb_rate(0x0003_0000, &classes), None);
        let mut tbf_class = msg.clone();
        tbf_class.truncate(TCMSG_LEN);
        tbf_class.extend(nla(TCA_KIND, b"tbf\0"));
        assert_eq!(parse_htb_class(&tbf_class).unwrap(), None);
    }

    #[test]
    fn handle_names() {
        assert_eq!(handle_name(0), "0:");
        assert_eq!(handle_name(0x8001_0000), "8001:");
        assert_eq!(handle_name(0x0001_0002), "1:2");
        assert_eq!(handle_name(TC_H_INGRESS), "ingress");
    }
}
