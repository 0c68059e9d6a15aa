//! The kernel's standard pause-frame statistics (`ethtool -I -a`), from the `ethtool`
//! generic netlink family: one dump of `ETHTOOL_MSG_PAUSE_GET` with statistics covers every
//! interface of the namespace whose driver has pause parameters. Drivers fill them in their
//! own way (`get_pause_stats`, Linux 5.10+); a counter the driver does not report is absent,
//! not 0. Unlike the driver's named counters (`ethtool -S`), these mean the same everywhere.

use std::collections::HashMap;

use anyhow::{Context, Result};

use super::netlink::{Netlink, Refused, attr, attrs, put_attr, u16_at, u32_at, u64_at};

const NETLINK_GENERIC: i32 = 16;
const GENL_HDRLEN: usize = 4;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const FAMILY: &str = "ethtool";
const ETHTOOL_GENL_VERSION: u8 = 1;
const ETHTOOL_MSG_PAUSE_GET: u8 = 21;
const ETHTOOL_A_PAUSE_HEADER: u16 = 1;
const ETHTOOL_A_PAUSE_STATS: u16 = 5;
const ETHTOOL_A_HEADER_DEV_INDEX: u16 = 1;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_STATS: u32 = 1 << 2;
const ETHTOOL_A_PAUSE_STAT_TX_FRAMES: u16 = 2;
const ETHTOOL_A_PAUSE_STAT_RX_FRAMES: u16 = 3;
const NLA_F_NESTED: u16 = 1 << 15;

/// Pause frames one interface received and sent, where its driver reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseStats {
    pub rx_frames: Option<u64>,
    pub tx_frames: Option<u64>,
}

/// Pause statistics by interface index, for the calling thread's network namespace. A
/// kernel without ethtool netlink (before 5.6, or built without it) has none.
pub fn dump() -> Result<HashMap<i32, PauseStats>> {
    let mut nl = Netlink::open(NETLINK_GENERIC)?;
    let Some(family) = family_id(&mut nl)? else {
        return Ok(HashMap::new());
    };
    let mut out = HashMap::new();
    let mut err = None;
    nl.dump(family, &request(), |p| match parse(p) {
        Ok(Some((index, s))) => {
            out.insert(index, s);
        }
        Ok(None) => {}
        Err(e) => err = Some(e),
    })
    .context("ETHTOOL_MSG_PAUSE_GET")?;
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The id of the ethtool family, None where the kernel has no such family.
fn family_id(nl: &mut Netlink) -> Result<Option<u16>> {
    let mut body = vec![CTRL_CMD_GETFAMILY, 1, 0, 0];
    put_attr(
        &mut body,
        CTRL_ATTR_FAMILY_NAME,
        format!("{FAMILY}\0").as_bytes(),
    );
    let mut id = None;
    let r = nl.request(GENL_ID_CTRL, &body, |p| {
        id = p
            .get(GENL_HDRLEN..)
            .and_then(|a| attr(a, CTRL_ATTR_FAMILY_ID).ok().flatten())
            .and_then(|v| u16_at(v, 0).ok());
    });
    match r {
        Err(e)
            if e.downcast_ref::<Refused>()
                .is_some_and(|r| r.errno == libc::ENOENT) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.context("resolving the ethtool netlink family")),
        Ok(()) => id
            .map(Some)
            .context("the ethtool netlink family has no id in the answer"),
    }
}

/// `ETHTOOL_MSG_PAUSE_GET` for every interface, with statistics.
fn request() -> Vec<u8> {
    let mut header = Vec::new();
    put_attr(
        &mut header,
        ETHTOOL_A_HEADER_FLAGS,
        &ETHTOOL_FLAG_STATS.to_ne_bytes(),
    );
    let mut body = vec![ETHTOOL_MSG_PAUSE_GET, ETHTOOL_GENL_VERSION, 0, 0];
    put_attr(&mut body, ETHTOOL_A_PAUSE_HEADER | NLA_F_NESTED, &header);
    body
}

/// One answer: the interface's index and its statistics; None without statistics.
pub fn parse(p: &[u8]) -> Result<Option<(i32, PauseStats)>> {
    let a = p
        .get(GENL_HDRLEN..)
        .context("ethtool netlink: short message")?;
    let header = attr(a, ETHTOOL_A_PAUSE_HEADER)?.context("ethtool netlink: no header")?;
    let index =
        attr(header, ETHTOOL_A_HEADER_DEV_INDEX)?.context("ethtool netlink: no interface index")?;
    let index = u32_at(index, 0)? as i32;
    let Some(stats) = attr(a, ETHTOOL_A_PAUSE_STATS)? else {
        return Ok(None);
    };
    let mut s = PauseStats::default();
    for x in attrs(stats) {
        let (kind, v) = x?;
        match kind {
            ETHTOOL_A_PAUSE_STAT_TX_FRAMES => s.tx_frames = Some(u64_at(v, 0)?),
            ETHTOOL_A_PAUSE_STAT_RX_FRAMES => s.rx_frames = Some(u64_at(v, 0)?),
            _ => {}
        }
    }
    Ok((s.rx_frames.is_some() || s.tx_frames.is_some()).then_some((index, s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer as the kernel builds it: the header (index 3, name), the pause settings,
    /// and the statistics with their padding attribute.
    fn answer(stats: &[(u16, u64)]) -> Vec<u8> {
        let mut header = Vec::new();
        put_attr(&mut header, ETHTOOL_A_HEADER_DEV_INDEX, &3u32.to_ne_bytes());
        put_attr(&mut header, 2, b"eth0\0");
        let mut st = Vec::new();
        put_attr(&mut st, 1, &[]);
        for (k, v) in stats {
            put_attr(&mut st, *k, &v.to_ne_bytes());
        }
        let mut p = vec![22, 1, 0, 0];
        put_attr(&mut p, ETHTOOL_A_PAUSE_HEADER | NLA_F_NESTED, &header);
        put_attr(&mut p, 3, &[1]);
        put_attr(&mut p, 4, &[1]);
        if !stats.is_empty() {
            put_attr(&mut p, ETHTOOL_A_PAUSE_STATS | NLA_F_NESTED, &st);
        }
        p
    }

    #[test]
    fn parses_pause_statistics() {
        let p = answer(&[
            (ETHTOOL_A_PAUSE_STAT_TX_FRAMES, 2),
            (ETHTOOL_A_PAUSE_STAT_RX_FRAMES, 1),
        ]);
        assert_eq!(
            parse(&p).unwrap(),
            Some((
                3,
                PauseStats {
                    rx_frames: Some(1),
                    tx_frames: Some(2)
                }
            ))
        );
        // A driver reporting one direction only: the other stays unknown.
        let tx = parse(&answer(&[(ETHTOOL_A_PAUSE_STAT_TX_FRAMES, 9)])).unwrap();
        assert_eq!(tx.unwrap().1.rx_frames, None);
        // Pause settings without statistics.
        assert_eq!(parse(&answer(&[])).unwrap(), None);
        assert!(parse(&[22, 1]).is_err());
    }

    #[test]
    fn the_request_asks_for_statistics() {
        let r = request();
        assert_eq!(r[..2], [ETHTOOL_MSG_PAUSE_GET, ETHTOOL_GENL_VERSION]);
        let header = attr(&r[GENL_HDRLEN..], ETHTOOL_A_PAUSE_HEADER)
            .unwrap()
            .unwrap();
        let flags = attr(header, ETHTOOL_A_HEADER_FLAGS).unwrap().unwrap();
        assert_eq!(u32_at(flags, 0).unwrap(), ETHTOOL_FLAG_STATS);
    }
}
