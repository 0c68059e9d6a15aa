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
        MetricFamily::new(m.name, m.help, m.kind.into())
    }

    /// An empty family of a metric named elsewhere (the `prometheus` crate's process metrics).
    pub fn new(name: &str, help: &str, kind: MetricKind) -> MetricFamily {
        MetricFamily {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            series: Vec::new(),
        }
    }

    /// Adds a counter or gauge sample.
    pub fn scalar(&mut self, labels: &[(&str, &str)], v: f64) -> &mut Self {
        self.series.push(Series {
            labels: owned(labels),
            value: Value::Scalar(v),
        });
        self
    }

    pub fn histogram(&mut self, labels: &[(&str, &str)], h: HistogramValue) -> &mut Self {
        self.series.push(Series {
            labels: owned(labels),
            value: Value::Histogram(h),
        });
        self
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
    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()>;
}
