//! The agent's plain data model: metric families as collectors produce them, before they are
//! rendered as Prometheus text or JSON.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

/// A histogram with Prometheus semantics: `buckets[i] = (le, cumulative count)`, ascending,
/// without the `+Inf` bucket (that is `count`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HistogramValue {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Scalar(f64),
    Histogram(HistogramValue),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricFamily {
    pub name: String,
    pub help: String,
    pub kind: MetricKind,
    pub series: Vec<Series>,
    /// The label names its series must carry, in order, when it is one of the agent's
    /// metrics (`metric_names::Metric::labels`); tests check every series added.
    #[serde(skip)]
    pub declared: Option<&'static [&'static str]>,
}

impl From<metric_names::MetricType> for MetricKind {
    fn from(t: metric_names::MetricType) -> MetricKind {
        use metric_names::MetricType;
        match t {
            MetricType::Counter => MetricKind::Counter,
            MetricType::Gauge => MetricKind::Gauge,
            MetricType::Histogram => MetricKind::Histogram,
        }
    }
}

impl MetricFamily {
    /// An empty family of one of the agent's metrics (name, help and type from
    /// `metric_names`).
    pub fn of(m: &metric_names::Metric) -> MetricFamily {
        MetricFamily {
            declared: Some(m.labels),
            ..MetricFamily::new(m.name, m.help, m.kind.into())
        }
    }

    /// An empty family of a metric named elsewhere (the `prometheus` crate's process metrics).
    pub fn new(name: &str, help: &str, kind: MetricKind) -> MetricFamily {
        MetricFamily {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            series: Vec::new(),
            declared: None,
        }
    }

    /// Adds a counter or gauge sample.
    pub fn scalar(&mut self, labels: &[(&str, &str)], v: f64) -> &mut Self {
        self.check_labels(labels);
        self.series.push(Series {
            labels: owned(labels),
            value: Value::Scalar(v),
        });
        self
    }

    pub fn histogram(&mut self, labels: &[(&str, &str)], h: HistogramValue) -> &mut Self {
        self.check_labels(labels);
        self.series.push(Series {
            labels: owned(labels),
            value: Value::Histogram(h),
        });
        self
    }
}

impl MetricFamily {
    /// A series of one of the agent's metrics has exactly the label names `metric_names`
    /// declares for it (which docs/metrics.md is checked against). Checked by the unit tests,
    /// which run the exporters, and in debug builds; the released agent trusts them.
    fn check_labels(&self, labels: &[(&str, &str)]) {
        if !cfg!(any(test, debug_assertions)) {
            return;
        }
        if let Some(declared) = self.declared {
            assert!(
                labels.iter().map(|(k, _)| *k).eq(declared.iter().copied()),
                "{}: labels {:?}, declared {:?}",
                self.name,
                labels.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                declared
            );
        }
    }
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Anything that contributes metric families to a scrape.
pub trait Collector: Send + Sync {
    /// The reader's name in `stornet_scrape_collector_*{collector}`.
    fn name(&self) -> &'static str;
    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()>;

    /// Collects, and says how the read went: a reader refreshed apart from the scrape
    /// (`collectors::background`) tells of its last read rather than of the copy.
    fn read(&self, out: &mut Vec<MetricFamily>) -> Reading {
        let start = std::time::Instant::now();
        let result = self.collect(out);
        Reading {
            result,
            took: start.elapsed(),
            age: None,
            shared: None,
        }
    }
}

/// How a collection went.
pub struct Reading {
    pub result: anyhow::Result<()>,
    /// How long the read took.
    pub took: std::time::Duration,
    /// How long ago the read began, for a reader that does not read at each scrape.
    pub age: Option<std::time::Duration>,
    /// What such a reader read last, shared with the scrape rather than copied into `out`.
    pub shared: Option<std::sync::Arc<Vec<MetricFamily>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use metric_names::block;
    use metric_names::labels::{DEVICE, OP};

    #[test]
    fn series_with_the_declared_labels_are_taken() {
        let mut f = MetricFamily::of(&block::REQUEUES_TOTAL);
        f.scalar(&[(DEVICE, "vda"), (OP, "read")], 1.0);
        assert_eq!(f.series.len(), 1);
    }

    #[test]
    #[should_panic(expected = "stornet_block_requeues_total: labels")]
    fn a_series_without_its_declared_labels_is_refused() {
        MetricFamily::of(&block::REQUEUES_TOTAL).scalar(&[(DEVICE, "vda")], 1.0);
    }
}
