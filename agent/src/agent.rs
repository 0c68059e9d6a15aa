//! Wires probes and collectors together; one `gather` per scrape.

use tracing::warn;

use crate::block;
use crate::config::Config;
use crate::model::{Collector, Family};
use crate::probes::{PROBES, Probes};

pub struct Agent {
    pub probes: Probes,
    collectors: Vec<Box<dyn Collector>>,
}

impl Agent {
    /// Attaches every probe it can and builds the collectors for what is up.
    pub fn start(config: &Config) -> Agent {
        let wanted: Vec<&str> = PROBES
            .iter()
            .map(|p| p.name)
            .filter(|p| config.probe_enabled(p))
            .collect();
        let mut probes = Probes::load(&wanted);
        let mut collectors: Vec<Box<dyn Collector>> = vec![Box::new(probes.status_collector())];
        if let Some(c) = block::collector(&mut probes, &config.block) {
            collectors.push(Box::new(c));
        }
        Agent { probes, collectors }
    }

    /// Collects every family; a failing collector is logged and skipped.
    pub fn gather(&self) -> Vec<Family> {
        let mut out = Vec::new();
        for c in &self.collectors {
            if let Err(e) = c.collect(&mut out) {
                warn!(error = %format!("{e:#}"), "collector failed");
            }
        }
        out
    }
}
