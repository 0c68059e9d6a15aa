//! The names the agent exports are the ones docs/metrics.md documents, with the labels it
//! gives them. loadgen's analysis is held to the same document (`metric_docs`' unit tests),
//! so a metric renamed in the agent fails here until the docs follow, and then there until
//! loadgen does.

use std::collections::BTreeSet;

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_writes};
use stornet_lab::metric_docs;
use stornet_lab::privilege::require_root;

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
