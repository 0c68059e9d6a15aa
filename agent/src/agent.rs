//! Wires probes and collectors together; one `gather` per scrape.

use tracing::warn;

use crate::block;
use crate::btf::KernelBtf;
use crate::config::Config;
use crate::model::{Collector, MetricFamily};
use crate::probes::Probes;
use crate::probes::spec::PROBES;
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
        let wanted: Vec<&str> = PROBES
            .iter()
            .map(|p| p.name)
            .filter(|p| config.collector_enabled(p))
            .collect();
        // Read once; dropped when the collectors are built.
        let kernel = KernelBtf::read();
        let mut probes = Probes::load(&wanted, &kernel);
        // Before collectors take maps out of the object.
        let self_metrics = SelfMetrics::new(&probes, &config.probes);
        let mut collectors: Vec<Box<dyn Collector>> = vec![Box::new(probes.status_collector())];
        if let Some(c) = block::collector(&mut probes, &config.block) {
            collectors.push(Box::new(c));
        }
        if config.collector_enabled(crate::collectors::PRESSURE) {
            collectors.push(Box::new(match &config.pressure.cgroup {
                Some(dir) => crate::pressure::Pressure::of_cgroup(dir),
                None => crate::pressure::Pressure::default(),
            }));
        }
        if config.collector_enabled(crate::collectors::BLOCK_TOPOLOGY) {
            collectors.push(Box::new(block::topology::Topology::new(
                std::path::Path::new("/sys"),
                config.block.device_filter(),
                config.block.max_devices,
            )));
        }
        let snapshots = crate::net::snapshots::Parts::of(config);
        collectors.extend(crate::net::collectors(
            &mut probes,
            &kernel.btf,
            &config.net,
            snapshots,
        ));
        Agent {
            probes,
            collectors_enabled: crate::collectors::names()
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
