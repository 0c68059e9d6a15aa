//! Every family loadgen's analysis reads is documented, with the labels it keys on: the
//! agent's own names are held to the same document (tests/privileged/service_metric_names.rs),
//! so a metric renamed in the agent cannot leave loadgen reading a name nobody exports.

use loadgen::sampling::agent_signals::{FAMILIES, QUEUE_HISTOGRAM, SERVICE_HISTOGRAM};
use stornet_lab::metric_docs::{load, series_names};

#[test]
fn loadgen_reads_only_documented_metrics() {
    let docs = series_names(&load().unwrap());
    for f in FAMILIES {
        let d = docs.get(f.metric).unwrap_or_else(|| {
            panic!(
                "loadgen reads {}, which docs/metrics.md does not list",
                f.metric
            )
        });
        for l in f.labels {
            assert!(
                d.labels.iter().any(|x| x == l),
                "loadgen keys {} on label {l}, which docs/metrics.md does not give it",
                f.metric
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
