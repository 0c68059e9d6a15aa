//! Wires probes and collectors together; one `gather` per scrape.

use std::sync::Arc;
use std::time::Duration;

use metric_names::agent as agent_metrics;
use metric_names::labels::COLLECTOR;
use tracing::{info, warn};

use crate::block;
use crate::cgroups::Labeller;
use crate::collectors::background::{self, Background};
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
    /// Attaches every probe it can and builds the collectors for what is up; with
    /// `background`, the slow readers (`collectors::background::NAMES`) read on their own
    /// threads at that interval rather than at each gather.
    pub fn start(config: &Config, background: Option<Duration>) -> Agent {
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
        let mut collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(probes.status_collector()),
            Box::new(crate::self_metrics::map_fill::MapFill::new(&probes)),
        ];
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
        if let Some(interval) = background {
            collectors = collectors
                .into_iter()
                .map(|c| {
                    if background::NAMES.contains(&c.name()) {
                        Background::spawn(c, interval)
                    } else {
                        c
                    }
                })
                .collect();
        }
        Agent {
            probes,
            collectors_enabled: registry::names()
                .filter(|n| config.collector_enabled(n))
                .collect(),
            collectors,
            self_metrics,
        }
    }

    /// Collects every family; a failing collector is logged and skipped, and each says how
    /// long it took and whether it succeeded.
    pub fn gather(&self) -> Gathered {
        let mut out = collect_all(&self.collectors);
        let mut own = Vec::new();
        self.self_metrics.collect(&self.probes, &mut own);
        out.0.push(Arc::new(own));
        out
    }
}

/// What one gather read, reader by reader; the reads of readers refreshed in the background
/// are shared with them, not copied (a thousand series and their labels, at each scrape).
pub struct Gathered(Vec<Arc<Vec<MetricFamily>>>);

impl Gathered {
    /// Every family, in the order read.
    pub fn families(&self) -> Vec<&MetricFamily> {
        self.0.iter().flat_map(|part| part.iter()).collect()
    }
}

/// What `collectors` read, and for each how long it took, whether it succeeded and (for one
/// read in the background) how old its read is; a failing one is logged (what it read before
/// it failed stays).
fn collect_all(collectors: &[Box<dyn Collector>]) -> Gathered {
    let mut parts = Vec::new();
    let mut took = MetricFamily::of(&agent_metrics::SCRAPE_COLLECTOR_DURATION_SECONDS);
    let mut age = MetricFamily::of(&agent_metrics::SCRAPE_COLLECTOR_AGE_SECONDS);
    let mut success = MetricFamily::of(&agent_metrics::SCRAPE_COLLECTOR_SUCCESS);
    for c in collectors {
        let mut own = Vec::new();
        let reading = c.read(&mut own);
        if !own.is_empty() {
            parts.push(Arc::new(own));
        }
        parts.extend(reading.shared);
        let labels = [(COLLECTOR, c.name())];
        took.scalar(&labels, reading.took.as_secs_f64());
        if let Some(a) = reading.age {
            age.scalar(&labels, a.as_secs_f64());
        }
        success.scalar(&labels, if reading.result.is_ok() { 1.0 } else { 0.0 });
        if let Err(e) = reading.result {
            warn!(collector = c.name(), error = %format!("{e:#}"), "collector failed");
        }
    }
    parts.push(Arc::new(vec![took, age, success]));
    Gathered(parts)
}

/// The collector of a snapshot read on its own; the network snapshots share one pass over
/// the namespaces (`net::collectors`, by `net::snapshots::Parts`).
fn snapshot_collector(snapshot: Snapshot, config: &Config) -> Option<Box<dyn Collector>> {
    match snapshot {
        Snapshot::Pressure => Some(Box::new(crate::host::pressure::Pressure::configured(
            config.pressure.cgroup.as_deref(),
            config.pressure.cpu_cgroup.as_deref(),
        ))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    struct Reader(&'static str, bool);

    impl Collector for Reader {
        fn name(&self) -> &'static str {
            self.0
        }

        fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
            let mut f = MetricFamily::of(&metric_names::agent::START_TIME_SECONDS);
            f.scalar(&[], 1.0);
            out.push(f);
            anyhow::ensure!(self.1, "{} cannot read", self.0);
            Ok(())
        }
    }

    fn value(fams: &[&MetricFamily], name: &str, collector: &str) -> Option<f64> {
        let f = fams.iter().find(|f| f.name == name)?;
        let s = f.series.iter().find(|s| {
            s.labels
                .iter()
                .any(|(k, v)| k == COLLECTOR && v == collector)
        })?;
        match s.value {
            Value::Scalar(v) => Some(v),
            _ => None,
        }
    }

    #[test]
    fn each_reader_says_how_long_it_took_and_whether_it_succeeded() {
        let collectors: Vec<Box<dyn Collector>> = vec![
            Box::new(Reader("good", true)),
            Box::new(Reader("bad", false)),
        ];
        let gathered = collect_all(&collectors);
        let out = gathered.families();
        let success = agent_metrics::SCRAPE_COLLECTOR_SUCCESS.name;
        let took = agent_metrics::SCRAPE_COLLECTOR_DURATION_SECONDS.name;
        assert_eq!(value(&out, success, "good"), Some(1.0));
        assert_eq!(value(&out, success, "bad"), Some(0.0));
        assert!(value(&out, took, "good").is_some_and(|t| t >= 0.0));
        assert!(value(&out, took, "bad").is_some());
        let age = agent_metrics::SCRAPE_COLLECTOR_AGE_SECONDS.name;
        assert_eq!(value(&out, age, "good"), None, "read at this scrape");
    }

    #[test]
    fn a_reader_in_the_background_says_how_old_its_read_is() {
        let collectors: Vec<Box<dyn Collector>> = vec![
            Background::spawn(Box::new(Reader("slow", true)), Duration::from_secs(60)),
            Box::new(Reader("fast", true)),
        ];
        let gathered = collect_all(&collectors);
        let out = gathered.families();
        let age = agent_metrics::SCRAPE_COLLECTOR_AGE_SECONDS.name;
        let success = agent_metrics::SCRAPE_COLLECTOR_SUCCESS.name;
        assert!(value(&out, age, "slow").is_some_and(|a| a >= 0.0));
        assert_eq!(value(&out, age, "fast"), None);
        assert_eq!(value(&out, success, "slow"), Some(1.0));
        let started = agent_metrics::START_TIME_SECONDS.name;
        assert_eq!(out.iter().filter(|f| f.name == started).count(), 2);
    }
}
