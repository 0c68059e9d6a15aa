//! Every metric stornet-agent exports: its name, help text, type and label names, in one
//! place. The agent builds its families from these constants and writes its labels by the
//! names of [`labels`], so a metric or label renamed here is renamed everywhere that reads it
//! through this crate (the analysis, the docs check) at compile time.
//!
//! Grouped by what the metric is about: [`agent`] (the agent itself and its probes), [`block`],
//! [`net`] and [`host`] (its resources). `process_*` metrics come from the `prometheus` crate and are not listed.
//! [`ceph`] lists what stornet reads from a Ceph cluster's own exporter (not the agent's).
#![no_std]

pub mod agent;
pub mod block;
pub mod ceph;
pub mod host;
pub mod labels;
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
    /// The names of the labels of its series, from [`labels`] (a histogram's `le` aside).
    pub labels: &'static [&'static str],
}

impl Metric {
    /// The metric with the label names of its series.
    pub const fn with_labels(self, labels: &'static [&'static str]) -> Metric {
        Metric { labels, ..self }
    }
}

pub(crate) const fn counter(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Counter,
        labels: &[],
    }
}

pub(crate) const fn gauge(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Gauge,
        labels: &[],
    }
}

pub(crate) const fn histogram(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: MetricType::Histogram,
        labels: &[],
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
            let labels: BTreeSet<&str> = m.labels.iter().copied().collect();
            assert_eq!(labels.len(), m.labels.len(), "{}: a label twice", m.name);
            assert!(
                !labels.contains("le"),
                "{}: le is the histogram's own",
                m.name
            );
        }
        assert_eq!(find(block::QUEUE_SECONDS.name), Some(&block::QUEUE_SECONDS));
        assert_eq!(find("stornet_nope"), None);
    }
}
