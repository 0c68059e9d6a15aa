//! MTU differences on the path to a peer.

use crate::model::{Host, Interface, Run};
use crate::prose;
use crate::series::{all, last, sum_over};
use crate::thresholds::Thresholds;

/// An interface on the path and its MTU.
#[derive(Clone, Debug, PartialEq)]
struct Mtu {
    host: String,
    interface: String,
    bytes: f64,
}

/// Interfaces that carry traffic (or whose traffic is not known), without loopback.
fn in_use(i: &Interface, n: usize) -> bool {
    let idx = all(n);
    let moved = |s| sum_over(s, &idx);
    match (moved(&i.rx_packets), moved(&i.tx_packets)) {
        (None, None) => true,
        (rx, tx) => rx.unwrap_or(0.0) + tx.unwrap_or(0.0) > 0.0,
    }
}

/// An interface's MTU in interval `i`, or its last one (`None`).
fn mtu_at(s: &crate::model::Series, i: Option<usize>) -> Option<f64> {
    match i {
        Some(i) => crate::series::at(s, i),
        None => last(s),
    }
}

fn mtus(host: &Host, only: Option<&str>, n: usize, i: Option<usize>) -> Vec<Mtu> {
    host.interfaces
        .iter()
        .filter(|(name, iface)| {
            *name != "lo" && only.is_none_or(|o| o == *name) && in_use(iface, n)
        })
        .filter_map(|(name, iface)| {
            Some(Mtu {
                host: host.name.clone(),
                interface: name.clone(),
                bytes: mtu_at(&iface.mtu_bytes, i)?,
            })
        })
        .collect()
}

/// The MTUs at the run's end first, then in each interval from the last back: an MTU
/// lowered for a while (a port whose configuration was lost, then restored) mattered while
/// it lasted.
fn moments(run: &Run) -> impl Iterator<Item = Option<usize>> {
    std::iter::once(None).chain((0..run.len()).rev().map(Some))
}

/// Describes an MTU mismatch on the path from `subject` to `peer` (all of the subject's
/// paths when `peer` is `None`): interfaces on the path with different MTUs, or a path
/// MTU (or MSS) smaller than the interface MTU.
pub fn mismatch(run: &Run, subject: &Host, peer: Option<&str>, t: &Thresholds) -> Option<String> {
    let p = peer.and_then(|a| subject.peers.get(a));
    if let Some(text) = moments(run).find_map(|i| differing(&path(run, subject, peer, i).0)) {
        return Some(text);
    }
    let (_, local_min) = path(run, subject, peer, None);
    let (p, addr, local) = (p?, peer?, local_min?);
    if let Some(pmtu) = last(&p.path_mtu_bytes) {
        return (pmtu < local).then(|| prose::path_mtu_below(addr, pmtu, local));
    }
    let mss = last(&p.mss_bytes)?;
    (mss + t.mss_overhead_bytes < local).then(|| prose::mss_too_small(addr, mss, local))
}

/// The interfaces on the path from `subject` to `peer` (the subject's route interface
/// when known, the peer's host, switches) and the smallest MTU among the subject's own.
fn path(
    run: &Run,
    subject: &Host,
    peer: Option<&str>,
    i: Option<usize>,
) -> (Vec<Mtu>, Option<f64>) {
    let n = run.len();
    let p = peer.and_then(|a| subject.peers.get(a));
    let only = p.and_then(|p| p.interface.as_deref());
    let mut path = mtus(subject, only, n, i);
    let local_min = path.iter().map(|m| m.bytes).reduce(f64::min);
    let others = peer
        .and_then(|a| run.host_with_address(a))
        .into_iter()
        .chain(run.hosts.iter().filter(|h| h.switch));
    for h in others {
        if h.name != subject.name {
            path.extend(mtus(h, None, n, i));
        }
    }
    (path, local_min)
}

/// IPv4 and TCP headers without options: a segment of MSS bytes is at least this much
/// larger on the wire.
const TCP_IP_HEADERS: f64 = 40.0;

/// Describes segments to `peer` too large for an interface on the path: its MSS plus
/// headers above that interface's MTU. Those frames are dropped there (a bridge or switch
/// sends no ICMP, so the sender never learns), unlike MTUs that merely differ.
pub fn oversized(run: &Run, subject: &Host, peer: &str) -> Option<String> {
    let mss = last(&subject.peers.get(peer)?.mss_bytes)?;
    moments(run).find_map(|i| {
        let (path, _) = path(run, subject, Some(peer), i);
        let smallest = path.iter().map(|m| m.bytes).reduce(f64::min)?;
        // Every interface at that MTU: a bridge takes its smallest port's MTU, so the bridge
        // and the port that lowered it are both named, the port among them.
        let at: Vec<(&str, &str)> = path
            .iter()
            .filter(|m| m.bytes == smallest)
            .map(|m| (m.host.as_str(), m.interface.as_str()))
            .collect();
        (mss + TCP_IP_HEADERS > smallest)
            .then(|| prose::segments_too_large(peer, mss + TCP_IP_HEADERS, smallest, &at))
    })
}

fn differing(path: &[Mtu]) -> Option<String> {
    let mut values: Vec<f64> = path.iter().map(|m| m.bytes).collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    if values.len() < 2 {
        return None;
    }
    let groups: Vec<(f64, Vec<(&str, &str)>)> = values
        .iter()
        .rev()
        .map(|v| {
            let on = path
                .iter()
                .filter(|m| m.bytes == *v)
                .map(|m| (m.host.as_str(), m.interface.as_str()))
                .collect();
            (*v, on)
        })
        .collect();
    Some(prose::mtus_differ(&groups))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Peer;

    fn iface(mtu: f64, n: usize) -> Interface {
        Interface {
            mtu_bytes: vec![Some(mtu); n],
            ..Interface::default()
        }
    }

    fn run(sw_mtu: f64) -> Run {
        let mut h1 = Host {
            name: "h1".into(),
            addresses: vec!["198.18.0.1".into()],
            ..Host::default()
        };
        h1.interfaces.insert("a0".into(), iface(9000.0, 4));
        h1.interfaces.insert("lo".into(), iface(65536.0, 4));
        h1.peers.insert("198.18.0.2".into(), Peer::default());
        let mut h2 = Host {
            name: "h2".into(),
            addresses: vec!["198.18.0.2".into()],
            ..Host::default()
        };
        h2.interfaces.insert("b0".into(), iface(9000.0, 4));
        let mut sw = Host {
            name: "sw".into(),
            switch: true,
            ..Host::default()
        };
        sw.interfaces.insert("sa".into(), iface(sw_mtu, 4));
        Run {
            interval_seconds: 1.0,
            starts: vec![0.0, 1.0, 2.0, 3.0],
            hosts: vec![h1, h2, sw],
        }
    }

    #[test]
    fn segments_larger_than_an_mtu_on_the_path_are_oversized() {
        let with_mss = |sw_mtu: f64, mss: f64| {
            let mut r = run(sw_mtu);
            r.hosts[0].peers.get_mut("198.18.0.2").unwrap().mss_bytes = vec![Some(mss); 4];
            r
        };
        let r = with_mss(1500.0, 8948.0);
        assert_eq!(
            oversized(&r, &r.hosts[0], "198.18.0.2").unwrap(),
            "segments to 198.18.0.2 of up to 8988 bytes are larger than the 1500-byte MTU of sw sa: dropped there"
        );
        // A small MSS fits the smallest MTU (TCP agreed on it), and so do jumbo frames on
        // a jumbo path.
        let r = with_mss(1500.0, 1460.0);
        assert_eq!(oversized(&r, &r.hosts[0], "198.18.0.2"), None);
        let r = with_mss(9000.0, 8948.0);
        assert_eq!(oversized(&r, &r.hosts[0], "198.18.0.2"), None);
        // Without an MSS nothing is known.
        let r = run(1500.0);
        assert_eq!(oversized(&r, &r.hosts[0], "198.18.0.2"), None);
    }

    #[test]
    fn a_bridge_at_its_ports_mtu_is_named_with_the_port() {
        let mut r = run(1500.0);
        r.hosts[0].peers.get_mut("198.18.0.2").unwrap().mss_bytes = vec![Some(8948.0); 4];
        // A bridge takes its smallest port's MTU; the ports at 9000 are not named.
        r.hosts[2].interfaces.insert("br0".into(), iface(1500.0, 4));
        r.hosts[2].interfaces.insert("sb".into(), iface(9000.0, 4));
        assert_eq!(
            oversized(&r, &r.hosts[0], "198.18.0.2").unwrap(),
            "segments to 198.18.0.2 of up to 8988 bytes are larger than the 1500-byte MTU of sw br0, sa: dropped there"
        );
    }

    #[test]
    fn a_switch_port_with_a_smaller_mtu_is_a_mismatch_and_loopback_is_ignored() {
        let r = run(1500.0);
        let t = Thresholds::default();
        let m = mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t).unwrap();
        assert_eq!(
            m,
            "MTUs differ on the path: 9000 on h1 a0, h2 b0; 1500 on sw sa"
        );
        assert!(mismatch(&r, &r.hosts[0], None, &t).is_some());
        let r = run(9000.0);
        assert_eq!(mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t), None);
    }

    #[test]
    fn a_path_mtu_or_mss_below_the_interface_mtu_is_a_mismatch() {
        let t = Thresholds::default();
        let mut r = run(9000.0);
        let p = r.hosts[0].peers.get_mut("198.18.0.2").unwrap();
        p.mss_bytes = vec![Some(8948.0); 4];
        assert_eq!(mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t), None);
        let p = r.hosts[0].peers.get_mut("198.18.0.2").unwrap();
        p.mss_bytes = vec![Some(1448.0); 4];
        assert!(
            mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t)
                .unwrap()
                .starts_with("MSS")
        );
        let p = r.hosts[0].peers.get_mut("198.18.0.2").unwrap();
        p.path_mtu_bytes = vec![Some(1500.0); 4];
        assert_eq!(
            mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t).unwrap(),
            "path MTU to 198.18.0.2 is 1500 bytes, below the 9000-byte interface MTU"
        );
    }

    #[test]
    fn an_mtu_lowered_for_part_of_the_run_is_a_mismatch() {
        let mut r = run(9000.0);
        r.hosts[0].peers.get_mut("198.18.0.2").unwrap().mss_bytes = vec![Some(8948.0); 4];
        r.hosts[2].interfaces.get_mut("sa").unwrap().mtu_bytes =
            vec![Some(9000.0), Some(1500.0), Some(1500.0), Some(9000.0)];
        let t = Thresholds::default();
        assert_eq!(
            mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &t).unwrap(),
            "MTUs differ on the path: 9000 on h1 a0, h2 b0; 1500 on sw sa"
        );
        assert!(oversized(&r, &r.hosts[0], "198.18.0.2").is_some());
    }

    #[test]
    fn an_idle_interface_is_off_the_path() {
        let mut r = run(1500.0);
        let sa = r.hosts[2].interfaces.get_mut("sa").unwrap();
        sa.rx_packets = vec![Some(0.0); 4];
        sa.tx_packets = vec![Some(0.0); 4];
        assert_eq!(
            mismatch(&r, &r.hosts[0], Some("198.18.0.2"), &Thresholds::default()),
            None
        );
    }
}
