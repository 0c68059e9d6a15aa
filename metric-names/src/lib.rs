//! Every metric stornet-agent exports: its name, help text and type, in one place. The agent
//! builds its families from these constants, so a metric renamed here is renamed everywhere
//! that reads it through this crate (loadgen's evidence, the docs check) at compile time.
//!
//! Grouped by what the metric is about: [`agent`] (the agent itself and its probes), [`block`],
//! [`net`] and [`host`] (its resources). `process_*` metrics come from the `prometheus` crate and are not listed.
//! [`ceph`] lists what stornet reads from a Ceph cluster's own exporter (not the agent's).
#![no_std]

pub mod agent;
pub mod block;
pub mod ceph;
pub mod host;
pub mod net;

/// The Prometheus metric type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

/// One exported metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricType,
}

pub(crate) const fn counter(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Counter,
    }
}

pub(crate) const fn gauge(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Gauge,
    }
}

pub(crate) const fn histogram(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Histogram,
    }
}

/// Every metric, group by group.
pub fn all() -> impl Iterator<Item = &'static Metric> {
    agent::ALL
        .iter()
        .chain(block::ALL)
        .chain(net::ALL)
        .chain(host::ALL)
}

/// The metric of that name, if the agent exports one.
pub fn find(name: &str) -> Option<&'static Metric> {
    all().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_prefixed_and_suffixed_by_type() {
        let mut seen = BTreeSet::new();
        for m in all() {
            assert!(seen.insert(m.name), "{} twice", m.name);
            assert!(m.name.starts_with("stornet_"), "{}", m.name);
            let total = m.name.ends_with("_total");
            assert_eq!(total, m.kind == MetricType::Counter, "{}", m.name);
            assert!(
                m.help.ends_with('.') && !m.help.contains("  "),
                "{}",
                m.name
            );
        }
        assert_eq!(find(block::QUEUE_SECONDS.name), Some(&block::QUEUE_SECONDS));
        assert_eq!(find("stornet_nope"), None);
    }

    /// docs/metrics.md documents every metric, with its type.
    #[test]
    fn every_metric_is_documented_with_its_type() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md"))
                .unwrap();
        for m in all() {
            let kind = match m.kind {
                MetricType::Counter => "counter",
                MetricType::Gauge => "gauge",
                MetricType::Histogram => "histogram",
            };
            let documented = docs.lines().any(|l| {
                let cells: std::vec::Vec<&str> = l.split('|').map(str::trim).collect();
                cells.len() > 2
                    && cells[1].contains(&std::format!("`{}`", m.name))
                    && cells[2] == kind
            });
            assert!(documented, "{} ({kind}) is not in docs/metrics.md", m.name);
        }
    }
}
