use std::collections::BTreeSet;

use super::*;

#[test]
fn names_are_unique_and_include_every_probe_and_snapshot() {
    let all: Vec<&str> = names().collect();
    let unique: BTreeSet<&str> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len());
    assert_eq!(probes().count() + snapshots().count(), all.len());
    for p in probes() {
        assert!(is_known(p.name));
    }
    for (name, _) in snapshots() {
        assert!(is_known(name));
    }
    assert!(!is_known("namespace"));
}

#[test]
fn probe_names_programs_and_ready_bits_are_unique() {
    let all: Vec<&ProbeSpec> = probes().collect();
    let mut bits = 0;
    for (i, p) in all.iter().enumerate() {
        assert_eq!(bits & p.ready, 0, "{}: ready bit shared", p.name);
        assert_eq!(p.ready.count_ones(), 1, "{}", p.name);
        bits |= p.ready;
        for q in &all[..i] {
            assert!(p.name != q.name && p.program != q.program, "{}", p.name);
        }
        assert!(!p.metrics.is_empty() && !p.maps.is_empty(), "{}", p.name);
    }
}

/// Every metric the agent declares comes from a collector, or from the agent itself.
#[test]
fn every_metric_has_a_collector() {
    let exported: BTreeSet<&str> = COLLECTORS
        .iter()
        .flat_map(|c| c.exports)
        .map(|m| m.name)
        .collect();
    let own: BTreeSet<&str> = metric_names::agent::ALL.iter().map(|m| m.name).collect();
    for m in metric_names::all() {
        assert!(
            exported.contains(m.name) != own.contains(m.name),
            "{}: exported by no collector, or also the agent's own",
            m.name
        );
    }
}

#[test]
fn the_network_probe_table_of_the_docs_is_this_one() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md"))
        .unwrap();
    let table = network_docs_table();
    assert!(docs.contains(&table), "docs/metrics.md lacks:\n{table}");
}

/// The backticked words of a table cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// docs/agent.md's collector table names every collector once, and every metric a row names
/// (`stornet_block_*` covering a prefix) is one its collectors export.
#[test]
fn the_collector_table_of_the_docs_agrees() {
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/agent.md")).unwrap();
    let rows: Vec<Vec<&str>> = docs
        .lines()
        .skip_while(|l| !l.starts_with("| collector | what it exports |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    let mut named = Vec::new();
    for row in &rows {
        let collectors: Vec<&CollectorSpec> = code_spans(row[1])
            .into_iter()
            .map(|n| {
                named.push(n);
                COLLECTORS.iter().find(|c| c.name == n).unwrap_or_else(|| {
                    panic!("docs/agent.md names collector {n}, not in the registry")
                })
            })
            .collect();
        for metric in code_spans(row[2])
            .into_iter()
            .filter(|s| s.starts_with("stornet_"))
        {
            let covers = |m: &Metric| match metric.strip_suffix('*') {
                Some(prefix) => m.name.starts_with(prefix),
                None => m.name == metric,
            };
            assert!(
                collectors.iter().flat_map(|c| c.exports).any(covers),
                "docs/agent.md: {metric} is not exported by {}",
                row[1]
            );
        }
    }
    named.sort();
    let mut all: Vec<&str> = names().collect();
    all.sort();
    assert_eq!(
        named, all,
        "docs/agent.md's collector table names each collector once"
    );
}
