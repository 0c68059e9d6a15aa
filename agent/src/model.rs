//! The agent's plain data model: metric families as collectors produce them, before they are
//! rendered as Prometheus text or JSON.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A histogram with Prometheus semantics: `buckets[i] = (le, cumulative count)`, ascending,
/// without the `+Inf` bucket (that is `count`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Histogram {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Scalar(f64),
    Histogram(Histogram),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub series: Vec<Series>,
}

impl Family {
    pub fn new(name: &str, help: &str, kind: Kind) -> Family {
        Family {
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

    pub fn histogram(&mut self, labels: &[(&str, &str)], h: Histogram) -> &mut Self {
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
    fn collect(&self, out: &mut Vec<Family>) -> anyhow::Result<()>;
}
