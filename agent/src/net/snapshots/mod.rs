//! Scrape-time snapshots in each watched network namespace: interface counters, MTU and speed,
//! pause-frame counters, qdisc statistics and rates (rtnetlink, ethtool) and TCP sockets
//! (sock_diag, /proc/net/netstat). Per-packet signals come from here, never from packet hooks.

pub mod collector;
pub mod ethtool;
pub mod export;
pub mod links;
pub mod netlink;
pub mod netstat;
pub mod pause_stats;
pub mod qdisc;
pub mod sockdiag;
pub mod tcp_totals;

use std::collections::HashMap;

use anyhow::Result;

use crate::host::interfaces::InterfaceFilter;
use ethtool::Ethtool;
use links::Link;
use netlink::Netlink;
use pause_stats::PauseStats;
use qdisc::Qdisc;
use sockdiag::TcpSocket;

/// What one namespace holds at one scrape.
pub struct NetSnapshot {
    pub links: Vec<Link>,
    pub speeds: HashMap<i32, u64>,
    /// The driver's pause-frame counters by name (`ethtool -S`), and the kernel's standard
    /// ones (`ethtool -I -a`), by interface index.
    pub pause: HashMap<i32, Vec<(String, u64)>>,
    pub pause_stats: HashMap<i32, PauseStats>,
    pub qdiscs: Vec<Qdisc>,
    pub sockets: Vec<TcpSocket>,
    /// `RetransSegs` of the namespace (/proc/net/snmp, as the reading thread sees it).
    pub retrans_segs: Option<u64>,
    /// `TCPDeliveredCE` of the namespace (/proc/net/netstat).
    pub delivered_ce: Option<u64>,
    /// Parts that could not be read (`PART_*`), with why: a kernel without one netlink
    /// family or ioctl loses that part only.
    pub failed: Vec<(&'static str, String)>,
}

/// The parts of a snapshot besides the links, by the `snapshot` label of
/// `stornet_net_snapshot_errors_total`.
pub const PART_QDISC: &str = "qdisc";
pub const PART_SOCK_DIAG: &str = "sock_diag";
pub const PART_ETHTOOL: &str = "ethtool";
pub const PART_PAUSE_STATS: &str = "pause_stats";
pub const PART_SNMP: &str = "snmp";
pub const PART_NETSTAT: &str = "netstat";

/// Which parts a snapshot reads: the snapshot collectors that are enabled (`netlink`,
/// `sock_diag` with the namespace's ECN count from /proc/net/netstat, `ethtool` with the
/// standard pause statistics), and `snmp` for the retransmit probes' unattributed count.
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
            snmp: crate::collectors::probe_spec::ProbeCollector::Retransmits
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
            (self.sock_diag, PART_NETSTAT),
            (self.ethtool, PART_ETHTOOL),
            (self.ethtool, PART_PAUSE_STATS),
            (self.snmp, PART_SNMP),
        ]
        .into_iter()
        .filter_map(|(on, label)| on.then_some(label))
        .collect()
    }
}

/// Reads a snapshot of the calling thread's network namespace. Where links are needed
/// (netlink, and ethtool for the interface names) they are required: without them the
/// namespace cannot be read at all; the other parts fail on their own. Interfaces `filter`
/// leaves out are not asked for their ethtool statistics.
pub fn snapshot(parts: Parts, filter: &InterfaceFilter) -> Result<NetSnapshot> {
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
    let mut delivered_ce = None;
    if parts.sock_diag {
        part(
            PART_NETSTAT,
            std::fs::read_to_string("/proc/thread-self/net/netstat")
                .map_err(anyhow::Error::from)
                .and_then(|t| {
                    delivered_ce = netstat::tcp_ext(&t, "TCPDeliveredCE")?;
                    Ok(())
                }),
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
    let mut pause_stats = HashMap::new();
    if parts.ethtool {
        part(
            PART_ETHTOOL,
            Ethtool::open().map(|eth| {
                for l in links
                    .iter()
                    .filter(|l| !l.loopback && filter.allows(&l.name))
                {
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
        part(
            PART_PAUSE_STATS,
            pause_stats::dump().map(|p| pause_stats = p),
        );
    }
    Ok(NetSnapshot {
        links,
        speeds,
        pause,
        pause_stats,
        qdiscs,
        sockets,
        retrans_segs,
        delivered_ce,
        failed,
    })
}

/// Per-peer socket statistics at one scrape, merged over sockets and namespaces. Sums
/// that are None: no socket's `tcp_info` has the field (an older kernel).
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
    /// Bytes written and not yet acknowledged, and those not sent yet, summed.
    pub send_queue_bytes: u64,
    pub notsent_bytes: Option<u64>,
    /// Delivery rates summed over the sockets with data not yet acknowledged (an idle
    /// socket keeps its last sample, which does not count), and how many of those had
    /// their latest sample limited by the application, not the path.
    pub delivery_rate: Option<u64>,
    pub app_limited: u64,
}

/// Sums of fields a kernel may lack: None only when every part is None.
pub fn add_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
    }
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
            send_queue_bytes: s.send_queue.into(),
            notsent_bytes: s.notsent.map(u64::from),
            delivery_rate: s
                .delivery_rate
                .map(|r| if s.send_queue > 0 { r } else { 0 }),
            app_limited: u64::from(s.send_queue > 0 && s.app_limited),
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
        self.send_queue_bytes += o.send_queue_bytes;
        self.notsent_bytes = add_known(self.notsent_bytes, o.notsent_bytes);
        self.delivery_rate = add_known(self.delivery_rate, o.delivery_rate);
        self.app_limited += o.app_limited;
    }
}
