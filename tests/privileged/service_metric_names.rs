//! The names the agent exports are the ones docs/metrics.md documents, with the labels it
//! gives them, and each is a constant of the `metric-names` crate with its type: the one
//! source that loadgen's analysis reads its names from, so a metric renamed in the agent is
//! renamed for loadgen too, and fails here until the docs follow.

use std::collections::BTreeSet;

use metric_names::MetricType;

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_writes};
use stornet_lab::privilege::require_root;
use stornet_repo_checks::metric_docs;

#[test]
fn every_exported_series_is_documented() {
    if !require_root("every_exported_series_is_documented") {
        return;
    }
    // The opt-in families on too, and some block IO, so that as many families as the host
    // allows have series.
    let agent = AgentProcess::with_config(
        "[block]\ninflight_at_issue = true\n[probes]\nrun_statistics = true\n",
        &[],
    )
    .unwrap();
    let disk = LoopDevice::new("names", 64 << 20).unwrap();
    direct_writes(&disk.dev, 200, 4096).unwrap();
    let samples = agent.scrape().unwrap();
    let docs = metric_docs::series_names(&metric_docs::load().unwrap());
    let mut names = BTreeSet::new();
    let mut problems = BTreeSet::new();
    for s in samples.iter().filter(|s| s.name.starts_with("stornet_")) {
        names.insert(s.name.as_str());
        if !in_registry(&s.name) {
            problems.insert(format!(
                "{}: not a metric-names constant of its type",
                s.name
            ));
        }
        let Some(d) = docs.get(&s.name) else {
            problems.insert(format!("{}: not in docs/metrics.md", s.name));
            continue;
        };
        for (k, _) in &s.labels {
            if !d.labels.contains(k) {
                problems.insert(format!("{}: label {k} not in docs/metrics.md", s.name));
            }
        }
    }
    println!("{} stornet series names exported, all checked", names.len());
    assert!(
        names.len() >= 40,
        "only {} series names: {names:?}",
        names.len()
    );
    assert!(
        problems.is_empty(),
        "{}",
        problems.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Whether a series name is a metric-names constant: itself (counter, gauge) or a
/// histogram's `_bucket`, `_sum` or `_count`.
fn in_registry(series: &str) -> bool {
    if metric_names::find(series).is_some_and(|m| m.kind != MetricType::Histogram) {
        return true;
    }
    ["_bucket", "_sum", "_count"].iter().any(|suffix| {
        series
            .strip_suffix(suffix)
            .and_then(metric_names::find)
            .is_some_and(|m| m.kind == MetricType::Histogram)
    })
}
