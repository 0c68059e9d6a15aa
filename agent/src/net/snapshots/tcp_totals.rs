//! Per-peer counters from per-socket ones: the time limits of `TCP_INFO` (busy, receive
//! window, send buffer) and the segments delivered, with and without an ECN echo.
//!
//! Each socket's counters only grow, but their sum over a peer's sockets falls when one
//! closes. So the last values of every socket are kept by (namespace, cookie), and a socket
//! gone from a namespace that was read at this scrape adds its last values to its peer's
//! total of closed sockets: a peer's counter is that total plus its open sockets' values,
//! and never falls (peer labels never move). What a socket counted between its last scrape
//! and its close is not seen. A namespace that could not be read keeps its sockets' last
//! values until it is read again. Memory: the sockets of the last scrape, and one total per
//! peer label (bounded by the peer cap).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::add_known;
use super::sockdiag::TcpSocket;

/// Counters of one socket, or summed over a peer's sockets. None: the kernel lacks the
/// field (before 4.10 for the time limits, 4.18 for the delivered segments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpCounts {
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub delivered: Option<u64>,
    pub delivered_ce: Option<u64>,
}

impl TcpCounts {
    pub fn of(s: &TcpSocket) -> TcpCounts {
        TcpCounts {
            busy_us: s.busy_us,
            rwnd_limited_us: s.rwnd_limited_us,
            sndbuf_limited_us: s.sndbuf_limited_us,
            delivered: s.delivered.map(u64::from),
            delivered_ce: s.delivered_ce.map(u64::from),
        }
    }

    fn fields(&mut self) -> [&mut Option<u64>; 5] {
        [
            &mut self.busy_us,
            &mut self.rwnd_limited_us,
            &mut self.sndbuf_limited_us,
            &mut self.delivered,
            &mut self.delivered_ce,
        ]
    }

    fn add(&mut self, mut o: TcpCounts) {
        for (a, b) in self.fields().into_iter().zip(o.fields()) {
            *a = add_known(*a, *b);
        }
    }

    /// Field by field, the larger: a socket's counters never fall, even if a namespace and
    /// a cookie were ever reused.
    fn at_least(mut self, mut o: TcpCounts) -> TcpCounts {
        for (a, b) in self.fields().into_iter().zip(o.fields()) {
            *a = (*a).max(*b);
        }
        self
    }
}

/// A socket by its namespace (inode) and cookie.
type SocketKey = (u64, u64);

#[derive(Default)]
pub struct TcpTotals {
    /// Each socket of the last scrape: its peer label and counters.
    open: HashMap<SocketKey, (String, TcpCounts)>,
    /// Per peer label, the last counters of its sockets since closed.
    closed: BTreeMap<String, TcpCounts>,
}

impl TcpTotals {
    /// The per-peer counters after this scrape: `sockets` are (peer label, namespace,
    /// socket) of every socket read now, `read` the namespaces whose sockets were read.
    pub fn update<'a>(
        &mut self,
        sockets: impl IntoIterator<Item = (&'a str, u64, &'a TcpSocket)>,
        read: &HashSet<u64>,
    ) -> BTreeMap<String, TcpCounts> {
        let mut open = HashMap::new();
        for (label, ns, s) in sockets {
            let key = (ns, s.cookie);
            let mut counts = TcpCounts::of(s);
            if let Some((_, last)) = self.open.get(&key) {
                counts = counts.at_least(*last);
            }
            open.insert(key, (label.to_string(), counts));
        }
        for (key, (label, last)) in self.open.drain() {
            if open.contains_key(&key) {
                continue;
            }
            if read.contains(&key.0) {
                self.closed.entry(label).or_default().add(last);
            } else {
                open.insert(key, (label, last));
            }
        }
        self.open = open;
        let mut out = self.closed.clone();
        for (label, counts) in self.open.values() {
            out.entry(label.clone()).or_default().add(*counts);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket(cookie: u64, busy_us: u64, delivered: u32) -> TcpSocket {
        TcpSocket {
            peer: "198.18.0.2".parse().unwrap(),
            cookie,
            srtt_us: 100,
            pmtu: 1500,
            snd_mss: 1448,
            send_queue: 0,
            notsent: Some(0),
            delivery_rate: Some(0),
            app_limited: false,
            busy_us: Some(busy_us),
            rwnd_limited_us: Some(busy_us / 2),
            sndbuf_limited_us: Some(0),
            delivered: Some(delivered),
            delivered_ce: Some(delivered / 10),
        }
    }

    fn busy(t: &BTreeMap<String, TcpCounts>, label: &str) -> Option<u64> {
        t.get(label).and_then(|c| c.busy_us)
    }

    #[test]
    fn a_closed_socket_keeps_counting_for_its_peer() {
        let mut t = TcpTotals::default();
        let read = HashSet::from([1]);
        let (a, b) = (socket(10, 1000, 100), socket(11, 500, 50));
        let first = t.update([("p", 1, &a), ("p", 1, &b)], &read);
        assert_eq!(busy(&first, "p"), Some(1500));
        assert_eq!(first["p"].delivered_ce, Some(15));
        // b closed; a went on: b's last values stay in the peer's total.
        let a2 = socket(10, 3000, 300);
        let second = t.update([("p", 1, &a2)], &read);
        assert_eq!(busy(&second, "p"), Some(3500));
        assert_eq!(second["p"].delivered, Some(350));
        // Every socket closed: the counter stays where it was.
        let third = t.update([], &read);
        assert_eq!(busy(&third, "p"), Some(3500));
        assert_eq!(third["p"].rwnd_limited_us, Some(1750));
    }

    #[test]
    fn an_unread_namespace_keeps_its_sockets_until_read_again() {
        let mut t = TcpTotals::default();
        let a = socket(10, 1000, 100);
        assert_eq!(
            busy(&t.update([("p", 7, &a)], &HashSet::from([7])), "p"),
            Some(1000)
        );
        // Namespace 7 unreadable: its socket neither closes nor counts twice.
        let unread = t.update([], &HashSet::new());
        assert_eq!(busy(&unread, "p"), Some(1000));
        let a2 = socket(10, 2000, 200);
        let back = t.update([("p", 7, &a2)], &HashSet::from([7]));
        assert_eq!(busy(&back, "p"), Some(2000));
    }

    #[test]
    fn peers_and_namespaces_are_apart_and_missing_fields_stay_unknown() {
        let mut t = TcpTotals::default();
        let read = HashSet::from([1, 2]);
        // One cookie in two namespaces (older kernels count cookies per namespace).
        let (a, b) = (socket(10, 1000, 100), socket(10, 10, 1));
        let mut old = socket(12, 0, 0);
        old.busy_us = None;
        old.delivered = None;
        old.delivered_ce = None;
        let out = t.update([("p", 1, &a), ("q", 2, &b), ("r", 1, &old)], &read);
        assert_eq!(busy(&out, "p"), Some(1000));
        assert_eq!(busy(&out, "q"), Some(10));
        assert_eq!(busy(&out, "r"), None);
        assert_eq!(out["r"].delivered_ce, None);
        assert_eq!(out["r"].rwnd_limited_us, Some(0));
    }
}
