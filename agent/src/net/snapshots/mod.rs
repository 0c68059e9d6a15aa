//! Scrape-time snapshots in each watched network namespace: interface counters, MTU and speed,
//! pause-frame counters, qdisc statistics (rtnetlink, ethtool) and TCP sockets (sock_diag).
//! Per-packet signals come from here, never from packet hooks.

pub mod ethtool;
pub mod links;
pub mod netlink;
pub mod qdisc;
pub mod sockdiag;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tracing::{info, warn};

use crate::model::{Collector, MetricFamily};
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use crate::netns::{Namespace, run_in};
use ethtool::Ethtool;
use links::Link;
use metric_names::{Metric, net};
use netlink::Netlink;
use qdisc::{Qdisc, handle_name};
use sockdiag::TcpSocket;

/// What one namespace holds at one scrape.
pub struct NetSnapshot {
    pub links: Vec<Link>,
    pub speeds: HashMap<i32, u64>,
    pub pause: HashMap<i32, Vec<(String, u64)>>,
    pub qdiscs: Vec<Qdisc>,
    pub sockets: Vec<TcpSocket>,
    /// `RetransSegs` of the namespace (/proc/net/snmp, as the reading thread sees it).
    pub retrans_segs: Option<u64>,
    /// Parts that could not be read (`PART_*`), with why: a kernel without one netlink
    /// family or ioctl loses that part only.
    pub failed: Vec<(&'static str, String)>,
}

/// The parts of a snapshot besides the links, by the `snapshot` label of
/// `stornet_net_snapshot_errors_total`.
pub const PART_QDISC: &str = "qdisc";
pub const PART_SOCK_DIAG: &str = "sock_diag";
pub const PART_ETHTOOL: &str = "ethtool";
pub const PART_SNMP: &str = "snmp";

/// Which parts a snapshot reads: the snapshot collectors that are enabled (`netlink`,
/// `sock_diag`, `ethtool`), and `snmp` for the retransmit probes' unattributed count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub netlink: bool,
    pub sock_diag: bool,
    pub ethtool: bool,
    pub snmp: bool,
}

impl Parts {
    pub fn of(config: &crate::config::Config) -> Parts {
        use crate::collectors::{ETHTOOL, NETLINK, SOCK_DIAG};
        let on = |n: &str| config.collector_enabled(n);
        Parts {
            netlink: on(NETLINK),
            sock_diag: on(SOCK_DIAG),
            ethtool: on(ETHTOOL),
            snmp: crate::probes::spec::ProbeCollector::Retransmits
                .probes()
                .any(|p| on(p.name)),
        }
    }

    pub fn any(self) -> bool {
        self.netlink || self.sock_diag || self.ethtool || self.snmp
    }

    /// The `snapshot` labels of the parts read, besides the whole namespace.
    fn labels(self) -> Vec<&'static str> {
        [
            (self.netlink, PART_QDISC),
            (self.sock_diag, PART_SOCK_DIAG),
            (self.ethtool, PART_ETHTOOL),
            (self.snmp, PART_SNMP),
        ]
        .into_iter()
        .filter_map(|(on, label)| on.then_some(label))
        .collect()
    }
}

/// Reads a snapshot of the calling thread's network namespace. Where links are needed
/// (netlink, and ethtool for the interface names) they are required: without them the
/// namespace cannot be read at all; the other parts fail on their own.
pub fn snapshot(parts: Parts) -> Result<NetSnapshot> {
    let mut rt = if parts.netlink || parts.ethtool {
        Some(Netlink::open(libc::NETLINK_ROUTE)?)
    } else {
        None
    };
    let links = match &mut rt {
        Some(rt) => links::dump(rt)?,
        None => Vec::new(),
    };
    let mut failed = Vec::new();
    let mut part = |name: &'static str, r: Result<()>| {
        if let Err(e) = r {
            failed.push((name, format!("{e:#}")));
        }
    };
    let mut qdiscs = Vec::new();
    if let (true, Some(rt)) = (parts.netlink, &mut rt) {
        part(PART_QDISC, qdisc::dump(rt).map(|q| qdiscs = q));
    }
    let mut sockets = Vec::new();
    if parts.sock_diag {
        part(
            PART_SOCK_DIAG,
            sockdiag::open()
                .and_then(|mut s| sockdiag::dump(&mut s))
                .map(|s| sockets = s),
        );
    }
    // /proc/thread-self/net is this thread's namespace (/proc/self/net is the process's).
    let mut retrans_segs = None;
    if parts.snmp {
        part(
            PART_SNMP,
            std::fs::read_to_string("/proc/thread-self/net/snmp")
                .map_err(anyhow::Error::from)
                .and_then(|t| {
                    retrans_segs =
                        Some(crate::net::unattributed::retrans_segs(&t).ok_or_else(|| {
                            anyhow::anyhow!("no Tcp RetransSegs in /proc/net/snmp")
                        })?);
                    Ok(())
                }),
        );
    }
    let mut speeds = HashMap::new();
    let mut pause = HashMap::new();
    if parts.ethtool {
        part(
            PART_ETHTOOL,
            Ethtool::open().map(|eth| {
                for l in links.iter().filter(|l| !l.loopback) {
                    if let Some(s) = eth.speed_bps(&l.name) {
                        speeds.insert(l.index, s);
                    }
                    // Drivers without statistics answer EOPNOTSUPP: no pause counters there.
                    if let Ok(p) = eth.pause_counters(&l.name)
                        && !p.is_empty()
                    {
                        pause.insert(l.index, p);
                    }
                }
            }),
        );
    }
    Ok(NetSnapshot {
        links,
        speeds,
        pause,
        qdiscs,
        sockets,
        retrans_segs,
        failed,
    })
}

/// Per-peer socket statistics, merged over sockets and namespaces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerSockets {
    pub sockets: u64,
    /// Sockets with an RTT sample, their summed and largest smoothed RTT (µs).
    pub with_rtt: u64,
    pub srtt_sum_us: u64,
    pub srtt_max_us: u32,
    /// Smallest path MTU and send MSS over the sockets (0: none known).
    pub pmtu_min: u32,
    pub mss_min: u32,
}

impl PeerSockets {
    pub fn of(s: &TcpSocket) -> PeerSockets {
        PeerSockets {
            sockets: 1,
            with_rtt: u64::from(s.srtt_us > 0),
            srtt_sum_us: s.srtt_us.into(),
            srtt_max_us: s.srtt_us,
            pmtu_min: s.pmtu,
            mss_min: s.snd_mss,
        }
    }

    pub fn merge(&mut self, o: &PeerSockets) {
        // 0 means unknown, not smallest.
        let min = |a: u32, b: u32| match (a, b) {
            (0, x) | (x, 0) => x,
            (a, b) => a.min(b),
        };
        self.sockets += o.sockets;
        self.with_rtt += o.with_rtt;
        self.srtt_sum_us += o.srtt_sum_us;
        self.srtt_max_us = self.srtt_max_us.max(o.srtt_max_us);
        self.pmtu_min = min(self.pmtu_min, o.pmtu_min);
        self.mss_min = min(self.mss_min, o.mss_min);
    }
}

/// Reads the host namespace and the configured ones at every scrape.
pub struct SnapshotCollector {
    namespaces: Vec<Namespace>,
    peers: Arc<PeerLabels>,
    /// Namespaces, and (namespace, part) pairs, that failed at the last scrape: logged when
    /// they fail and when they recover, not at every scrape.
    failing: Mutex<HashSet<(String, &'static str)>>,
    /// Failed reads per (namespace, part) since start.
    errors: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Each namespace's `RetransSegs` goes here, for the retransmit collector.
    unattributed: Arc<Unattributed>,
    parts: Parts,
}

/// The `snapshot` label for a namespace that could not be read at all.
const WHOLE: &str = "namespace";

impl SnapshotCollector {
    pub fn new(
        namespaces: Vec<Namespace>,
        peers: Arc<PeerLabels>,
        unattributed: Arc<Unattributed>,
        parts: Parts,
    ) -> SnapshotCollector {
        SnapshotCollector {
            namespaces,
            peers,
            failing: Mutex::new(HashSet::new()),
            errors: Mutex::new(BTreeMap::new()),
            unattributed,
            parts,
        }
    }

    /// Records which parts of a namespace failed this time: counted, and logged once per
    /// failure and once on recovery.
    fn record(&self, ns: &str, failed: &[(&'static str, String)], parts: &[&'static str]) {
        let mut failing = self.failing.lock().expect("failing snapshots");
        let mut errors = self.errors.lock().expect("snapshot errors");
        for &part in parts {
            let key = (ns.to_string(), part);
            match failed.iter().find(|(p, _)| *p == part) {
                Some((_, e)) => {
                    *errors.entry(key.clone()).or_default() += 1;
                    if failing.insert(key) {
                        if part == WHOLE {
                            warn!(namespace = %ns, error = %e, "network namespace unreadable");
                        } else {
                            warn!(namespace = %ns, snapshot = part, error = %e, "network snapshot unreadable; the rest of the namespace is read");
                        }
                    }
                }
                None => {
                    if failing.remove(&key) {
                        info!(namespace = %ns, snapshot = part, "network snapshot readable again");
                    }
                }
            }
        }
    }

    fn errors_family(&self) -> MetricFamily {
        let mut f = MetricFamily::of(&net::SNAPSHOT_ERRORS_TOTAL);
        for ((ns, part), n) in self.errors.lock().expect("snapshot errors").iter() {
            f.scalar(&[("netns", ns), ("snapshot", part)], *n as f64);
        }
        f
    }
}

/// A metric family and how to read its value from a link's or qdisc's statistics.
type LinkValue = fn(&links::LinkStats) -> u64;
type QdiscValue = fn(&Qdisc) -> u64;
type LinkCounter = (MetricFamily, LinkValue);
type QdiscStat = (MetricFamily, QdiscValue);

struct Families {
    up: MetricFamily,
    mtu: MetricFamily,
    speed: MetricFamily,
    counters: Vec<LinkCounter>,
    pause: MetricFamily,
    qdisc: Vec<QdiscStat>,
}

/// Interface counters: the metric, and where its value is in the link's statistics.
const LINK_COUNTERS: &[(Metric, LinkValue)] = &[
    (net::INTERFACE_RECEIVE_BYTES_TOTAL, |s| s.rx_bytes),
    (net::INTERFACE_TRANSMIT_BYTES_TOTAL, |s| s.tx_bytes),
    (net::INTERFACE_RECEIVE_PACKETS_TOTAL, |s| s.rx_packets),
    (net::INTERFACE_TRANSMIT_PACKETS_TOTAL, |s| s.tx_packets),
    (net::INTERFACE_RECEIVE_ERRORS_TOTAL, |s| s.rx_errors),
    (net::INTERFACE_TRANSMIT_ERRORS_TOTAL, |s| s.tx_errors),
    (net::INTERFACE_RECEIVE_DROPPED_TOTAL, |s| s.rx_dropped),
    (net::INTERFACE_TRANSMIT_DROPPED_TOTAL, |s| s.tx_dropped),
    (net::INTERFACE_RECEIVE_MISSED_TOTAL, |s| s.rx_missed),
];

/// qdisc statistics: the metric, and where its value is.
const QDISC_STATS: &[(Metric, QdiscValue)] = &[
    (net::QDISC_DROPS_TOTAL, |q| q.drops),
    (net::QDISC_OVERLIMITS_TOTAL, |q| q.overlimits),
    (net::QDISC_REQUEUES_TOTAL, |q| q.requeues),
    (net::QDISC_BACKLOG_BYTES, |q| q.backlog_bytes),
    (net::QDISC_BACKLOG_PACKETS, |q| q.backlog_packets),
];

impl Families {
    fn new() -> Families {
        Families {
            up: MetricFamily::of(&net::NAMESPACE_UP),
            mtu: MetricFamily::of(&net::INTERFACE_MTU),
            speed: MetricFamily::of(&net::INTERFACE_SPEED_BYTES_PER_SECOND),
            counters: LINK_COUNTERS
                .iter()
                .map(|(m, value)| (MetricFamily::of(m), *value))
                .collect(),
            pause: MetricFamily::of(&net::INTERFACE_PAUSE_FRAMES_TOTAL),
            qdisc: QDISC_STATS
                .iter()
                .map(|(m, value)| (MetricFamily::of(m), *value))
                .collect(),
        }
    }

    /// `interfaces`: whether the netlink collector is on (links may be read for ethtool
    /// alone, and then export nothing of their own).
    fn add(&mut self, ns: &str, snap: &NetSnapshot, interfaces: bool) {
        let names: HashMap<i32, &str> = snap
            .links
            .iter()
            .map(|l| (l.index, l.name.as_str()))
            .collect();
        for l in &snap.links {
            let labels = [("netns", ns), ("interface", l.name.as_str())];
            if let (true, Some(mtu)) = (interfaces, l.mtu) {
                self.mtu.scalar(&labels, mtu as f64);
            }
            if let Some(bps) = snap.speeds.get(&l.index) {
                self.speed.scalar(&labels, *bps as f64 / 8.0);
            }
            if let (true, Some(stats)) = (interfaces, &l.stats) {
                for (f, get) in &mut self.counters {
                    f.scalar(&labels, get(stats) as f64);
                }
            }
            for (name, v) in snap.pause.get(&l.index).into_iter().flatten() {
                self.pause.scalar(
                    &[
                        ("netns", ns),
                        ("interface", l.name.as_str()),
                        ("counter", name),
                    ],
                    *v as f64,
                );
            }
        }
        for q in &snap.qdiscs {
            let dev = names
                .get(&q.ifindex)
                .map(|n| n.to_string())
                .unwrap_or_else(|| q.ifindex.to_string());
            let handle = handle_name(q.handle);
            let parent = handle_name(q.parent);
            let labels = [
                ("netns", ns),
                ("interface", dev.as_str()),
                ("qdisc", q.kind.as_str()),
                ("handle", handle.as_str()),
                ("parent", parent.as_str()),
            ];
            for (f, get) in &mut self.qdisc {
                f.scalar(&labels, get(q) as f64);
            }
        }
    }

    fn into_vec(self) -> Vec<MetricFamily> {
        let mut out = vec![self.up, self.mtu, self.speed];
        out.extend(self.counters.into_iter().map(|(f, _)| f));
        out.push(self.pause);
        out.extend(self.qdisc.into_iter().map(|(f, _)| f));
        out
    }
}

impl Collector for SnapshotCollector {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut fams = Families::new();
        let mut sockets: Vec<TcpSocket> = Vec::new();
        let mut seen = HashSet::new();
        for ns in std::iter::once(&Namespace::Host).chain(&self.namespaces) {
            let label = ns.label();
            let snap = ns.open().and_then(|(file, id)| {
                // Two entries naming one namespace are read once.
                if !seen.insert(id) {
                    return Ok(None);
                }
                let parts = self.parts;
                run_in(ns, &file, move || snapshot(parts)).map(|s| Some((id.1, s)))
            });
            match snap {
                Ok(None) => continue,
                Ok(Some((inode, s))) => {
                    let mut parts = vec![WHOLE];
                    parts.extend(self.parts.labels());
                    self.record(&label, &s.failed, &parts);
                    if let Some(v) = s.retrans_segs {
                        self.unattributed.snmp(inode, &label, v);
                    }
                    fams.up.scalar(&[("netns", &label)], 1.0);
                    fams.add(&label, &s, self.parts.netlink);
                    sockets.extend(s.sockets);
                }
                Err(e) => {
                    self.record(&label, &[(WHOLE, format!("{e:#}"))], &[WHOLE]);
                    fams.up.scalar(&[("netns", &label)], 0.0);
                }
            }
        }
        out.extend(fams.into_vec());
        out.push(self.errors_family());
        out.extend(socket_families(&self.peers, sockets));
        Ok(())
    }
}

/// `stornet_tcp_*{peer}` from the sockets of every namespace read.
pub fn socket_families(peers: &PeerLabels, sockets: Vec<TcpSocket>) -> Vec<MetricFamily> {
    let by_peer = peers.fold(
        sockets.into_iter().map(|s| (Some(s.peer), s)).collect(),
        |_| 1,
        |a: &mut PeerSockets, s| a.merge(&PeerSockets::of(&s)),
    );
    let mut count = MetricFamily::of(&net::TCP_SOCKETS);
    let mut srtt = MetricFamily::of(&net::TCP_SRTT_SECONDS);
    let mut srtt_max = MetricFamily::of(&net::TCP_SRTT_MAX_SECONDS);
    let mut pmtu = MetricFamily::of(&net::TCP_PATH_MTU_BYTES);
    let mut mss = MetricFamily::of(&net::TCP_MSS_BYTES);
    for (peer, p) in by_peer {
        let labels = [("peer", peer.as_str())];
        count.scalar(&labels, p.sockets as f64);
        if p.with_rtt > 0 {
            srtt.scalar(&labels, p.srtt_sum_us as f64 / p.with_rtt as f64 / 1e6);
            srtt_max.scalar(&labels, p.srtt_max_us as f64 / 1e6);
        }
        if p.pmtu_min > 0 {
            pmtu.scalar(&labels, p.pmtu_min as f64);
        }
        if p.mss_min > 0 {
            mss.scalar(&labels, p.mss_min as f64);
        }
    }
    vec![count, srtt, srtt_max, pmtu, mss]
}
