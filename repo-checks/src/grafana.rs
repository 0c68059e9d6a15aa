//! stornet's Grafana dashboards (`dashboards/*.json`): their variables, panels and queries,
//! filling in template variables the way Grafana does, and running every panel's queries
//! against a real Prometheus.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use stornet_lab::promserver::{PromServer, Series};

use crate::promql;

/// The dashboards, relative to the repository root.
pub const DASHBOARDS: [&str; 4] = [
    "dashboards/ceph.json",
    "dashboards/host-storage.json",
    "dashboards/network-congestion.json",
    "dashboards/storage-vs-network.json",
];

/// A dashboard's JSON model.
pub struct Dashboard {
    pub file: String,
    pub json: Value,
}

/// A template variable.
#[derive(Clone, Debug)]
pub struct Variable {
    pub name: String,
    /// `datasource`, `query`, …
    pub kind: String,
    /// The query of a `query` variable.
    pub query: Option<String>,
    pub json: Value,
}

/// A panel that shows data (rows excluded), with its queries.
#[derive(Clone, Debug)]
pub struct Panel {
    pub id: i64,
    pub title: String,
    pub kind: String,
    pub targets: Vec<Target>,
    pub json: Value,
}

#[derive(Clone, Debug)]
pub struct Target {
    pub ref_id: String,
    pub expr: String,
    pub json: Value,
}

impl Dashboard {
    pub fn load(rel: &str) -> Result<Dashboard> {
        let path = crate::repo::path(rel);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let json = serde_json::from_str(&text).with_context(|| format!("parsing {rel}"))?;
        Ok(Dashboard {
            file: rel.to_string(),
            json,
        })
    }

    pub fn load_all() -> Result<Vec<Dashboard>> {
        DASHBOARDS.iter().map(|f| Dashboard::load(f)).collect()
    }

    pub fn title(&self) -> &str {
        self.json["title"].as_str().unwrap_or("")
    }

    pub fn variables(&self) -> Result<Vec<Variable>> {
        let list = self.json["templating"]["list"]
            .as_array()
            .with_context(|| format!("{}: no templating.list", self.file))?;
        list.iter()
            .map(|v| {
                Ok(Variable {
                    name: v["name"]
                        .as_str()
                        .with_context(|| format!("{}: variable without a name", self.file))?
                        .to_string(),
                    kind: v["type"].as_str().unwrap_or("").to_string(),
                    query: match &v["query"] {
                        Value::String(s) => Some(s.clone()),
                        Value::Object(o) => {
                            o.get("query").and_then(|q| q.as_str()).map(String::from)
                        }
                        _ => None,
                    },
                    json: v.clone(),
                })
            })
            .collect()
    }

    /// Every panel that is not a row, also those inside collapsed rows.
    pub fn panels(&self) -> Result<Vec<Panel>> {
        let mut out = Vec::new();
        let top = self.json["panels"]
            .as_array()
            .with_context(|| format!("{}: no panels", self.file))?;
        let mut stack: Vec<&Value> = top.iter().rev().collect();
        while let Some(p) = stack.pop() {
            let kind = p["type"].as_str().unwrap_or("").to_string();
            if kind == "row" {
                if let Some(inner) = p["panels"].as_array() {
                    stack.extend(inner.iter().rev());
                }
                continue;
            }
            let title = p["title"].as_str().unwrap_or("").to_string();
            let targets = p["targets"]
                .as_array()
                .map(|ts| {
                    ts.iter()
                        .map(|t| Target {
                            ref_id: t["refId"].as_str().unwrap_or("").to_string(),
                            expr: t["expr"].as_str().unwrap_or("").to_string(),
                            json: t.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Panel {
                id: p["id"].as_i64().unwrap_or(-1),
                title,
                kind,
                targets,
                json: p.clone(),
            });
        }
        Ok(out)
    }
}

/// Template variables referenced in `text`: `$name`, `${name}`, `${name:format}`, `[[name]]`.
pub fn variable_refs(text: &str) -> Vec<String> {
    refs(text).into_iter().map(|(_, _, name)| name).collect()
}

/// (start, end, name) of each variable reference.
fn refs(text: &str) -> Vec<(usize, usize, String)> {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let found = if let Some(inner) = rest.strip_prefix("${") {
            // `${name}` or `${name:format}`.
            inner.find('}').map(|close| {
                let name = inner[..close].split(':').next().unwrap_or("");
                (close + 3, name.to_string())
            })
        } else if let Some(inner) = rest.strip_prefix("[[") {
            inner
                .find("]]")
                .map(|close| (close + 4, inner[..close].to_string()))
        } else if b[i] == b'$'
            && b.get(i + 1)
                .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_')
        {
            let len = 1 + b[i + 1..].iter().take_while(|&&c| word(c)).count();
            Some((len, text[i + 1..i + len].to_string()))
        } else {
            None
        };
        match found {
            Some((len, name)) => {
                out.push((i, i + len, name));
                i += len;
            }
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// Replaces every variable reference with its value from `values`; a reference to a
/// variable not in `values` is an error.
pub fn substitute(text: &str, values: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::new();
    let mut last = 0;
    for (start, end, name) in refs(text) {
        let v = values
            .get(&name)
            .with_context(|| format!("unknown variable ${name} in {text:?}"))?;
        out.push_str(&text[last..start]);
        out.push_str(v);
        last = end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// The value Grafana puts into a Prometheus query for a multi-value variable: `(a|b)`, each
/// value with regex characters escaped (inside a PromQL string, so `\\.`). With no values a
/// regex that matches no label value.
pub fn regex_value(values: &[String]) -> String {
    if values.is_empty() {
        return "__no_value__".to_string();
    }
    let escaped: Vec<String> = values
        .iter()
        .map(|v| {
            let mut e = String::new();
            for c in v.chars() {
                match c {
                    '\\' => e.push_str("\\\\\\\\"),
                    '$' | '^' | '*' | '{' | '}' | '[' | ']' | '\'' | '+' | '?' | '.' | '('
                    | ')' | '|' => {
                        e.push_str("\\\\");
                        e.push(c);
                    }
                    '"' => e.push_str("\\\""),
                    _ => e.push(c),
                }
            }
            e
        })
        .collect();
    format!("({})", escaped.join("|"))
}

/// Grafana's `$__rate_interval`: the larger of `$__interval` plus one scrape interval and
/// four scrape intervals.
pub fn rate_interval_secs(interval_s: u64, scrape_s: u64) -> u64 {
    (interval_s + scrape_s).max(4 * scrape_s)
}

/// What one panel's queries returned.
#[derive(Debug)]
pub struct PanelResult {
    pub dashboard: String,
    pub panel: Panel,
    pub queries: Vec<QueryResult>,
}

#[derive(Debug)]
pub struct QueryResult {
    pub ref_id: String,
    /// The query as sent, variables filled in.
    pub query: String,
    pub series: Vec<Series>,
}

impl PanelResult {
    /// Series over all of the panel's queries.
    pub fn series_count(&self) -> usize {
        self.queries.iter().map(|q| q.series.len()).sum()
    }
}

/// A time window to run dashboards over, as Grafana would for that time range.
pub struct Window {
    pub start: f64,
    pub end: f64,
    pub step_s: u64,
    pub scrape_s: u64,
}

/// Fills in the dashboard's variables in order, each `label_values(…)` query asked of
/// Prometheus (with earlier variables filled in), and selects all values.
pub fn resolve_variables(
    d: &Dashboard,
    prom: &PromServer,
    w: &Window,
) -> Result<BTreeMap<String, (Vec<String>, String)>> {
    let mut values = builtins(w);
    let mut resolved = BTreeMap::new();
    for v in d.variables()? {
        match v.kind.as_str() {
            "datasource" => {
                values.insert(v.name.clone(), "prometheus".into());
            }
            "query" => {
                let q = v
                    .query
                    .as_deref()
                    .with_context(|| format!("{}: variable {} has no query", d.file, v.name))?;
                let lv = promql::label_values_query(&substitute(q, &values)?)?;
                let got = prom.label_values(&lv.label, lv.selector.as_deref(), w.start, w.end)?;
                let regex = regex_value(&got);
                values.insert(v.name.clone(), regex.clone());
                resolved.insert(v.name.clone(), (got, regex));
            }
            other => bail!("{}: variable {} of type {other}", d.file, v.name),
        }
    }
    Ok(resolved)
}

fn builtins(w: &Window) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    v.insert(
        "__rate_interval".to_string(),
        format!("{}s", rate_interval_secs(w.step_s, w.scrape_s)),
    );
    v.insert("__interval".to_string(), format!("{}s", w.step_s));
    v.insert(
        "__range".to_string(),
        format!("{}s", (w.end - w.start).round() as u64),
    );
    v
}

/// Runs every panel query of `d` as a range query over `w`, with the variables that
/// `resolve_variables` filled in.
pub fn run_panels(
    d: &Dashboard,
    prom: &PromServer,
    w: &Window,
    vars: &BTreeMap<String, (Vec<String>, String)>,
) -> Result<Vec<PanelResult>> {
    let mut values = builtins(w);
    for (name, (_, regex)) in vars {
        values.insert(name.clone(), regex.clone());
    }
    values.insert("datasource".into(), "prometheus".into());
    let mut out = Vec::new();
    for p in d.panels()? {
        let mut queries = Vec::new();
        for t in &p.targets {
            let q = substitute(&t.expr, &values)?;
            let series: Vec<Series> = prom
                .query_range(&q, w.start, w.end, w.step_s)
                .with_context(|| format!("{} / {}: {}", d.title(), p.title, t.ref_id))?;
            queries.push(QueryResult {
                ref_id: t.ref_id.clone(),
                query: q,
                series,
            });
        }
        out.push(PanelResult {
            dashboard: d.title().to_string(),
            panel: p,
            queries,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_substitutes_variables() {
        let e = r#"rate(m{instance=~"$instance", device=~"${device}", x="[[op]]", y="${peer:regex}"}[$__rate_interval]) and z{a=~"b$"}"#;
        assert_eq!(
            variable_refs(e),
            ["instance", "device", "op", "peer", "__rate_interval"]
        );
        let values: BTreeMap<String, String> = [
            ("instance", "(a)"),
            ("device", "(loop0|sda)"),
            ("op", "read"),
            ("peer", "p"),
            ("__rate_interval", "4s"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            substitute(e, &values).unwrap(),
            r#"rate(m{instance=~"(a)", device=~"(loop0|sda)", x="read", y="p"}[4s]) and z{a=~"b$"}"#
        );
        assert!(substitute("m{a=~\"$nope\"}", &values).is_err());
        assert_eq!(variable_refs("→ $peer …"), ["peer"]);
    }

    #[test]
    fn regex_values_like_grafana() {
        assert_eq!(
            regex_value(&["198.18.0.2".into(), "10.0.0.1".into()]),
            r"(198\\.18\\.0\\.2|10\\.0\\.0\\.1)"
        );
        assert_eq!(regex_value(&[]), "__no_value__");
        assert_eq!(rate_interval_secs(2, 1), 4);
        assert_eq!(rate_interval_secs(60, 15), 75);
    }
}
