//! The metrics of the `metric-names` crate and docs/metrics.md agree: every metric the agent
//! declares is documented with its type and exactly its label names, and every documented
//! `stornet_` metric is declared.

use std::collections::BTreeMap;

use metric_names::MetricType;
use stornet_repo_checks::metric_docs;

#[test]
fn declared_metrics_are_documented_with_their_type_and_labels() {
    let docs = metric_docs::load().unwrap();
    let by_name: BTreeMap<&str, &metric_docs::MetricDoc> =
        docs.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut problems = Vec::new();
    for m in metric_names::all() {
        let Some(d) = by_name.get(m.name) else {
            problems.push(format!("{}: not in docs/metrics.md", m.name));
            continue;
        };
        let kind = match m.kind {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        };
        if d.kind != kind {
            problems.push(format!("{}: {kind}, documented as {}", m.name, d.kind));
        }
        if d.labels != m.labels {
            problems.push(format!(
                "{}: labels {:?}, documented as {:?}",
                m.name, m.labels, d.labels
            ));
        }
    }
    for d in &docs {
        if metric_names::find(&d.name).is_none() {
            problems.push(format!(
                "{}: documented, but not a metric-names constant",
                d.name
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
