//! Every family loadgen's analysis reads is documented, with the labels it keys on. Its names
//! are the agent's own constants (the `metric-names` crate), which the agent exports
//! (tests/privileged/service_metric_names.rs) and docs/metrics.md documents.

use diagnose::signals::{FAMILIES, QUEUE_HISTOGRAM, SERVICE_HISTOGRAM};
use stornet_repo_checks::metric_docs::{load, series_names};

#[test]
fn loadgen_reads_only_documented_metrics() {
    let docs = series_names(&load().unwrap());
    for f in FAMILIES {
        let series = f.series();
        let d = docs.get(&series).unwrap_or_else(|| {
            panic!("loadgen reads {series}, which docs/metrics.md does not list")
        });
        for l in f.labels {
            assert!(
                d.labels.iter().any(|x| x == l),
                "loadgen keys {series} on label {l}, which docs/metrics.md does not give it"
            );
        }
    }
    for h in [QUEUE_HISTOGRAM, SERVICE_HISTOGRAM] {
        assert!(
            docs.contains_key(&format!("{h}_bucket")),
            "loadgen reads the histogram {h}, which docs/metrics.md does not list"
        );
    }
}
