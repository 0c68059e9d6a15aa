//! The metrics the agent exports, as documented in `docs/metrics.md`: the one list that
//! dashboards and rules are checked against.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

/// One documented metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricDoc {
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
    pub labels: Vec<String>,
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let inner = line
        .strip_prefix('|')
        .unwrap_or(line)
        .strip_suffix('|')
        .unwrap_or(line);
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// The backticked words of a table cell.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Metrics from every markdown table whose header starts with `metric | type | labels`.
/// A labels cell of `same` repeats the row above; several names in one cell share a row.
pub fn parse(text: &str) -> Vec<MetricDoc> {
    let mut out = Vec::new();
    let mut in_table = false;
    let mut previous: Vec<String> = Vec::new();
    for line in text.lines() {
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        let c = cells(line);
        if c.len() >= 3 && c[0] == "metric" && c[1] == "type" && c[2] == "labels" {
            in_table = true;
            continue;
        }
        if !in_table || c.len() < 3 || c[0].starts_with("---") {
            continue;
        }
        let labels: Vec<String> = if c[2] == "same" {
            previous.clone()
        } else {
            c[2].split(',')
                .map(|l| l.trim().trim_matches('`').to_string())
                .filter(|l| !l.is_empty())
                .collect()
        };
        previous = labels.clone();
        for name in code_spans(&c[0]) {
            if !name.starts_with("stornet_") {
                continue;
            }
            out.push(MetricDoc {
                name,
                kind: c[1].to_string(),
                labels: labels.clone(),
            });
        }
    }
    out
}

/// `docs/metrics.md` of this repository.
pub fn load() -> Result<Vec<MetricDoc>> {
    let path = crate::repo::path("docs/metrics.md");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse(&text))
}

/// Every series name a scrape can contain, mapped to its documented metric: histograms add
/// `_bucket` (with label `le`), `_sum` and `_count`, and keep their own name for the native
/// histogram a protobuf scrape stores.
pub fn series_names(docs: &[MetricDoc]) -> BTreeMap<String, MetricDoc> {
    let mut out = BTreeMap::new();
    for d in docs {
        if d.kind == "histogram" {
            out.insert(d.name.clone(), d.clone());
            for suffix in ["_bucket", "_sum", "_count"] {
                let mut s = d.clone();
                if suffix == "_bucket" {
                    s.labels.push("le".into());
                }
                out.insert(format!("{}{suffix}", d.name), s);
            }
        } else {
            out.insert(d.name.clone(), d.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
# metrics

| metric | type | labels | meaning |
|---|---|---|---|
| `stornet_probe_up` | gauge | probe | 1 when up |
| `stornet_block_queue_seconds` | histogram | device, op | queue time |

| probe | hook | feeds |
|---|---|---|
| `tcp_retransmit` | `tp_btf/x` | `stornet_tcp_retransmits_total` |

| metric | type | labels | meaning |
|---|---|---|---|
| `stornet_a_total`, `stornet_b_total` | counter | namespace, interface | a and b |
| `stornet_c_total` | counter | same | c |
| `stornet_d` | gauge | | d |
";

    #[test]
    fn parses_metric_tables_only() {
        let d = parse(DOC);
        let names: Vec<&str> = d.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "stornet_probe_up",
                "stornet_block_queue_seconds",
                "stornet_a_total",
                "stornet_b_total",
                "stornet_c_total",
                "stornet_d"
            ]
        );
        assert_eq!(d[3].labels, ["namespace", "interface"]);
        assert_eq!(d[4].labels, ["namespace", "interface"]);
        assert!(d[5].labels.is_empty());
        let s = series_names(&d);
        assert!(s.contains_key("stornet_block_queue_seconds_bucket"));
        assert!(s.contains_key("stornet_block_queue_seconds_count"));
        assert!(
            s.contains_key("stornet_block_queue_seconds"),
            "the native histogram"
        );
        assert_eq!(
            s["stornet_block_queue_seconds_bucket"].labels,
            ["device", "op", "le"]
        );
    }

    #[test]
    fn the_repository_documents_metrics() {
        let d = load().unwrap();
        assert!(d.iter().any(|m| m.name == "stornet_probe_up"), "{d:?}");
    }
}
