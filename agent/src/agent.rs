//! Wires probes and collectors together; one `gather` per scrape.

use tracing::{info, warn};

use crate::block;
use crate::cgroups::Labeller;
use crate::collectors::probe_spec::{BLOCK_ISSUER, ProbeSpec, TCP_RETRANSMIT};
use crate::collectors::{self as registry, Snapshot};
use crate::config::Config;
use crate::kernel::btf::KernelBtf;
use crate::model::{Collector, MetricFamily};
use crate::probes::Probes;
use crate::self_metrics::SelfMetrics;

pub struct Agent {
    pub probes: Probes,
    /// The collectors that run (probes and snapshots), by name.
    pub collectors_enabled: Vec<&'static str>,
    collectors: Vec<Box<dyn Collector>>,
    /// The agent's own cost and map fill; reads the probes, so it is not a `Collector`.
    pub self_metrics: SelfMetrics,
}

impl Agent {
    /// Attaches every probe it can and builds the collectors for what is up.
    pub fn start(config: &Config) -> Agent {
        let root = cgroup_root(config);
        let labeller = |probe: &ProbeSpec| {
            let root = root
                .as_ref()
                .filter(|_| config.collector_enabled(probe.name))?;
            Some(Labeller::new(
                root.clone(),
                config.cgroups.patterns(),
                config.cgroups.max_cgroups,
            ))
        };
        let (block_labeller, net_labeller) = (labeller(&BLOCK_ISSUER), labeller(&TCP_RETRANSMIT));
        let wanted = wanted_probes(config, block_labeller.is_some());
        // Read once; dropped when the collectors are built.
        let kernel = KernelBtf::read();
        let mut probes = Probes::load(&wanted, &kernel, net_labeller.is_some());
        // Before collectors take maps out of the object.
        let self_metrics = SelfMetrics::new(&probes, &config.probes);
        let mut collectors: Vec<Box<dyn Collector>> = vec![Box::new(probes.status_collector())];
        if let Some(c) = block::collector(&mut probes, &config.block, block_labeller) {
            collectors.push(Box::new(c));
        }
        let enabled = |name: &str| config.collector_enabled(name);
        for (_, snapshot) in registry::snapshots().filter(|(name, _)| enabled(name)) {
            collectors.extend(snapshot_collector(snapshot, config));
        }
        let snapshots = crate::net::snapshots::Parts::of(config);
        collectors.extend(crate::net::collectors(
            &mut probes,
            &kernel.btf,
            &config.net,
            snapshots,
            net_labeller,
        ));
        Agent {
            probes,
            collectors_enabled: registry::names()
                .filter(|n| config.collector_enabled(n))
                .collect(),
            collectors,
            self_metrics,
        }
    }

    /// Collects every family; a failing collector is logged and skipped.
    pub fn gather(&self) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        for c in &self.collectors {
            if let Err(e) = c.collect(&mut out) {
                warn!(error = %format!("{e:#}"), "collector failed");
            }
        }
        self.self_metrics.collect(&self.probes, &mut out);
        out
    }
}

/// The collector of a snapshot read on its own; the network snapshots share one pass over
/// the namespaces (`net::collectors`, by `net::snapshots::Parts`).
fn snapshot_collector(snapshot: Snapshot, config: &Config) -> Option<Box<dyn Collector>> {
    match snapshot {
        Snapshot::Pressure => Some(Box::new(match &config.pressure.cgroup {
            Some(dir) => crate::host::pressure::Pressure::of_cgroup(dir),
            None => crate::host::pressure::Pressure::default(),
        })),
        Snapshot::BlockTopology => Some(Box::new(block::topology::Topology::new(
            std::path::Path::new("/sys"),
            std::path::Path::new("/proc"),
            config.block.device_filter(),
            config.block.max_devices,
        ))),
        Snapshot::Netlink | Snapshot::SockDiag | Snapshot::Ethtool => None,
    }
}

/// The probes to attach: those enabled, and the issuer probe only when IO is attributed to
/// cgroups (it costs a map update per request).
pub fn wanted_probes(config: &Config, cgroups: bool) -> Vec<&'static str> {
    registry::probes()
        .map(|p| p.name)
        .filter(|p| config.collector_enabled(p))
        .filter(|p| cgroups || *p != BLOCK_ISSUER.name)
        .collect()
}

/// The cgroup v2 root to attribute block IO and retransmits under, when `[cgroups]` names
/// some cgroups and the host has that hierarchy (without one the agent says so and runs
/// without the attribution).
fn cgroup_root(config: &Config) -> Option<std::path::PathBuf> {
    if !config.cgroups.enabled() {
        return None;
    }
    match crate::cgroups::v2_root() {
        Ok(root) => {
            info!(root = %root.display(), "attributing block IO and retransmits to cgroups");
            Some(root)
        }
        Err(e) => {
            warn!(error = %format!("{e:#}"), "[cgroups] is set, but IO cannot be attributed to cgroups on this host; running without it");
            None
        }
    }
}
