//! The collector of the network snapshots: reads the host namespace and the configured ones
//! at each call (every second, in the background, when the agent serves), keeps count of
//! the parts it could not read, and exports them.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tracing::{info, warn};

use super::export::{Families, Interfaces, socket_families};
use super::sockdiag::TcpSocket;
use super::tcp_totals::TcpTotals;
use super::{PART_SOCK_DIAG, Parts, snapshot};
use crate::host::interfaces::InterfaceFilter;
use crate::host::netns::{Namespace, run_in};
use crate::model::{Collector, MetricFamily};
use crate::net::peers::PeerLabels;
use crate::net::unattributed::Unattributed;
use metric_names::labels::{NETNS, SNAPSHOT};
use metric_names::net;

/// Reads the host namespace and the configured ones at every call.
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
    /// Per-peer counters summed over sockets that come and go.
    totals: Mutex<TcpTotals>,
    parts: Parts,
    /// Which interfaces are reported, and which of them by name.
    filter: InterfaceFilter,
    interfaces: Mutex<Interfaces>,
}

/// The `snapshot` label for a namespace that could not be read at all.
const WHOLE: &str = "namespace";

impl SnapshotCollector {
    pub fn new(
        namespaces: Vec<Namespace>,
        peers: Arc<PeerLabels>,
        unattributed: Arc<Unattributed>,
        parts: Parts,
        filter: InterfaceFilter,
        max_interfaces: usize,
    ) -> SnapshotCollector {
        SnapshotCollector {
            namespaces,
            peers,
            failing: Mutex::new(HashSet::new()),
            errors: Mutex::new(BTreeMap::new()),
            unattributed,
            totals: Mutex::new(TcpTotals::default()),
            parts,
            filter,
            interfaces: Mutex::new(Interfaces::new(max_interfaces)),
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
            f.scalar(&[(NETNS, ns), (SNAPSHOT, part)], *n as f64);
        }
        f
    }
}

impl Collector for SnapshotCollector {
    fn name(&self) -> &'static str {
        "network_snapshots"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut fams = Families::new();
        let mut sockets: Vec<(u64, TcpSocket)> = Vec::new();
        // Namespaces whose sockets were read: a socket missing from one of them has closed.
        let mut read = HashSet::new();
        let mut seen = HashSet::new();
        // Every namespace is read before any interface gets a label, so that the places of
        // interfaces gone since the last scrape are free for new ones.
        let mut snaps = Vec::new();
        for ns in std::iter::once(&Namespace::Host).chain(&self.namespaces) {
            let label = ns.label();
            let snap = ns.open().and_then(|(file, id)| {
                // Two entries naming one namespace are read once.
                if !seen.insert(id) {
                    return Ok(None);
                }
                let (parts, filter) = (self.parts, &self.filter);
                run_in(ns, &file, move || snapshot(parts, filter)).map(|s| Some((id.1, s)))
            });
            match snap {
                Ok(None) => continue,
                Ok(Some((inode, mut s))) => {
                    let mut parts = vec![WHOLE];
                    parts.extend(self.parts.labels());
                    self.record(&label, &s.failed, &parts);
                    if let Some(v) = s.retrans_segs {
                        self.unattributed.snmp(inode, &label, v);
                    }
                    fams.up.scalar(&[(NETNS, &label)], 1.0);
                    if !s.failed.iter().any(|(p, _)| *p == PART_SOCK_DIAG) {
                        read.insert(inode);
                    }
                    sockets.extend(
                        std::mem::take(&mut s.sockets)
                            .into_iter()
                            .map(|x| (inode, x)),
                    );
                    snaps.push((label, s));
                }
                Err(e) => {
                    self.record(&label, &[(WHOLE, format!("{e:#}"))], &[WHOLE]);
                    fams.up.scalar(&[(NETNS, &label)], 0.0);
                }
            }
        }
        let mut interfaces = self.interfaces.lock().expect("interface labels");
        interfaces.start(&snaps, &self.filter);
        for (label, s) in &snaps {
            fams.add(label, s, self.parts.netlink, &self.filter, &mut interfaces);
        }
        fams.add_other(&mut interfaces);
        drop(interfaces);
        out.extend(fams.into_vec());
        out.push(self.errors_family());
        if self.parts.sock_diag {
            let mut totals = self.totals.lock().expect("tcp totals");
            out.extend(socket_families(&self.peers, sockets, &read, &mut totals));
        }
        Ok(())
    }
}
