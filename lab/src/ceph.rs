//! A real Ceph cluster in the lab, from the distribution's own packages (Debian 12: Ceph
//! 16.2, Pacific): one mon and one mgr (with its prometheus module) on a host `mon`, an OSD
//! on each of the hosts `h1`…`hN` (bluestore on a lab disk, its own stornet-agent), a
//! client host `client`, and a Prometheus (on `mon`) that scrapes the agents and the mgr.
//! Ceph's public and cluster networks are the lab's subnet, so all of its traffic crosses the
//! lab switch, and every lab fault (a port's buffer, MTU, loss; a throttled disk; a CPU quota
//! on a daemon) acts on it.
//!
//! Every daemon runs in its host's namespace with a hostname of its own, in the foreground as
//! a child of the lab; every `ceph`/`rados`/`rbd` call runs inside a namespace ([`cli`]).
//! Configuration, keyrings and data live in one directory named after the lab's process
//! ([`config`]). Coming up to HEALTH_OK has a timeout whose error carries the daemons' last
//! log lines. Dropping the lab stops everything together and removes it; after a `kill -9`,
//! `cargo xtask lab clean` does (the daemons run in the lab's namespaces, its files carry
//! its pid).

pub mod analyze;
pub mod bringup;
pub mod cephfs;
pub mod cli;
pub mod clients;
pub mod config;
pub mod daemon;
pub mod faults;
pub mod mgr;
pub mod osd;

use std::net::SocketAddr;
use std::time::Duration;

use crate::lab::{Host, Lab};
use crate::privilege::{require_root, require_tool};
use crate::promserver::PromServer;

/// Whether `test` can bring a Ceph lab up here (root, the daemons, their clients, Prometheus)
/// with the clients it drives besides (`extra`): fails under CI, skips otherwise, when not.
pub fn can_run(test: &str, extra: &[&str]) -> bool {
    const TOOLS: &[&str] = &[
        "ceph-mon",
        "ceph-mgr",
        "ceph-osd",
        "ceph",
        "rados",
        "prometheus",
    ];
    require_root(test) && TOOLS.iter().chain(extra).all(|t| require_tool(test, t))
}
pub use cephfs::FuseMount;
pub use cli::Clients;
pub use clients::{FioRbd, RadosBench};
pub use config::StateDir;
pub use daemon::Daemon;
pub use osd::Osd;

/// What to build.
#[derive(Clone, Debug)]
pub struct CephSpec {
    /// OSD hosts (one OSD each); pools keep 3 copies, so at least 3.
    pub osds: usize,
    /// Each OSD's disk, bytes (a sparse file in /dev/shm: only what is written uses memory).
    pub osd_size: u64,
    /// Placement groups of the `rbd` pool.
    pub pgs: u32,
    /// `osd_op_complaint_time`: seconds before Ceph reports an op as slow (SLOW_OPS).
    pub complaint_s: u32,
    /// `osd_memory_target`, bytes.
    pub osd_memory: u64,
    /// Seconds between the daemons' reports to the mgr (`mgr_stats_period`), the mgr
    /// exporter's refreshes and Prometheus's scrapes of it: a step of fleet mode over Ceph's
    /// latency needs at least two of them.
    pub stats_period_s: u32,
    /// A stornet-agent on every OSD host.
    pub agents: bool,
    /// A Prometheus on the mon host scraping the agents and the mgr.
    pub prometheus: bool,
    /// How long the cluster may take from nothing to HEALTH_OK.
    pub health_timeout: Duration,
    /// The size of the RBD image `rbd/lab` the fio clients use, bytes.
    pub image_size: u64,
}

impl Default for CephSpec {
    fn default() -> CephSpec {
        CephSpec {
            osds: 3,
            osd_size: 4 << 30,
            pgs: 32,
            complaint_s: 30,
            osd_memory: 1 << 30,
            stats_period_s: 5,
            agents: true,
            prometheus: true,
            health_timeout: Duration::from_secs(150),
            image_size: 1 << 30,
        }
    }
}

impl CephSpec {
    /// Without agents or Prometheus: the cluster alone (a benchmark's reference).
    pub fn bare() -> CephSpec {
        CephSpec {
            agents: false,
            prometheus: false,
            ..CephSpec::default()
        }
    }
}

/// The pool every client uses, and the RBD image in it.
pub const POOL: &str = "rbd";
pub const IMAGE: &str = "lab";
/// The lab hosts of the mon (and mgr) and of the clients.
pub const MON_HOST: &str = "mon";
pub const CLIENT_HOST: &str = "client";
/// The mgr exporter's port on the mon host's address.
pub const MGR_METRICS_PORT: u16 = 9283;

/// A running cluster. Dropped in field order: Prometheus, the OSDs (daemons, agents, disks,
/// cgroups), the mgr and mon, the MDS, the directory, then the lab's namespaces.
pub struct CephLab {
    pub prometheus: Option<PromServer>,
    pub osds: Vec<Osd>,
    pub mgr: Option<Daemon>,
    pub mon: Option<Daemon>,
    pub mds: Option<Daemon>,
    pub dir: StateDir,
    pub cli: Clients,
    pub lab: Lab,
    pub fsid: String,
    pub spec: CephSpec,
    /// Seconds from nothing to HEALTH_OK.
    pub bringup_s: f64,
}

impl CephLab {
    pub fn mon_host(&self) -> &Host {
        self.lab.host(MON_HOST)
    }

    pub fn client_host(&self) -> &Host {
        self.lab.host(CLIENT_HOST)
    }

    /// The lab host of OSD `id`.
    pub fn osd_host(&self, id: u32) -> &Host {
        self.lab.host(&self.osd(id).host)
    }

    pub fn osd(&self, id: u32) -> &Osd {
        self.osds
            .iter()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("the cluster has no osd.{id}"))
    }

    pub fn osd_mut(&mut self, id: u32) -> &mut Osd {
        self.osds
            .iter_mut()
            .find(|o| o.id == id)
            .unwrap_or_else(|| panic!("the cluster has no osd.{id}"))
    }

    /// The mgr's Prometheus exporter (reached from inside the lab's namespaces).
    pub fn mgr_metrics_addr(&self) -> SocketAddr {
        SocketAddr::from((self.mon_host().addr, MGR_METRICS_PORT))
    }

    /// Every agent's address, with the OSD host it runs on.
    pub fn agent_targets(&self) -> Vec<(String, SocketAddr)> {
        self.osds
            .iter()
            .filter_map(|o| Some((o.host.clone(), o.agent.as_ref()?.addr)))
            .collect()
    }

    /// `ceph health` (`HEALTH_OK`, …).
    pub fn health(&self) -> anyhow::Result<String> {
        self.cli.health()
    }

    /// The last `n` log lines of the mon and every OSD, for errors.
    pub fn logs(&self, n: usize) -> String {
        let mut v: Vec<String> = Vec::new();
        v.extend(self.mon.iter().map(|d| d.tail(n)));
        v.extend(self.mgr.iter().map(|d| d.tail(n)));
        v.extend(
            self.osds
                .iter()
                .filter_map(|o| o.daemon.as_ref())
                .map(|d| d.tail(n)),
        );
        v.join("\n")
    }

    /// A shell line that enters the client host's namespace with the cluster's
    /// configuration, for a person to run `ceph`, `rados`, `rbd` or fio there.
    pub fn client_shell(&self) -> String {
        format!(
            "ip netns exec {} env CEPH_CONF={} bash",
            self.client_host().ns.name,
            self.dir.conf().display()
        )
    }
}

impl Drop for CephLab {
    fn drop(&mut self) {
        // Every daemon at once: their shutdowns overlap instead of adding up.
        self.prometheus = None;
        let mut all: Vec<&mut Daemon> = self
            .osds
            .iter_mut()
            .filter_map(|o| o.daemon.as_mut())
            .chain(self.mds.as_mut())
            .chain(self.mgr.as_mut())
            .chain(self.mon.as_mut())
            .collect();
        daemon::stop_all(&mut all, Duration::from_secs(3));
    }
}
