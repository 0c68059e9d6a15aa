//! stornet's Prometheus rule files (`dashboards/prometheus/`): loading them, the metrics a
//! query needs once recording rules are expanded, and running `promtool` on them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::promql;

/// The rule files, relative to the repository root, in the order Prometheus loads them.
pub const RULE_FILES: [&str; 2] = [
    "dashboards/prometheus/recording-rules.yml",
    "dashboards/prometheus/alerts.yml",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    pub groups: Vec<RuleGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleGroup {
    pub name: String,
    #[serde(default)]
    pub interval: Option<String>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub record: Option<String>,
    #[serde(default)]
    pub alert: Option<String>,
    pub expr: String,
    #[serde(default, rename = "for")]
    pub for_: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

pub fn load(rel: &str) -> Result<RuleFile> {
    let path = crate::repo::path(rel);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {rel}"))
}

/// Every rule of every file in `RULE_FILES`.
pub fn load_all() -> Result<Vec<Rule>> {
    let mut out = Vec::new();
    for f in RULE_FILES {
        for g in load(f)?.groups {
            out.extend(g.rules);
        }
    }
    Ok(out)
}

/// Recording rule name → expression.
pub fn recorded(rules: &[Rule]) -> BTreeMap<String, String> {
    rules
        .iter()
        .filter_map(|r| Some((r.record.clone()?, r.expr.clone())))
        .collect()
}

/// The series names (as a scrape or Prometheus holds them) that `expr` reads, with recording
/// rules replaced by what they read. `ALERTS` stays as it is.
pub fn base_series(expr: &str, recorded: &BTreeMap<String, String>) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut todo = vec![expr.to_string()];
    let mut seen = BTreeSet::new();
    while let Some(e) = todo.pop() {
        for s in promql::selectors(&e)? {
            for name in s.metric_names()? {
                match recorded.get(&name) {
                    Some(inner) if seen.insert(name.clone()) => todo.push(inner.clone()),
                    Some(_) => {}
                    None => {
                        out.insert(name);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Runs `promtool <args>` in `dir`; returns its output, or an error with the output when it
/// fails.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running promtool")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("promtool {} failed:\n{text}", args.join(" "));
    }
    Ok(text)
}

/// `promtool check metrics` on an exposition `text`; returns promtool's lint report (empty
/// when it found nothing), or an error with it when promtool rejects the text.
pub fn check_metrics(text: &str) -> Result<String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running promtool")?;
    // promtool reads all of stdin before it writes, so writing first cannot deadlock.
    child
        .stdin
        .take()
        .context("promtool stdin")?
        .write_all(text.as_bytes())?;
    let out = child.wait_with_output()?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("promtool check metrics failed:\n{report}");
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_recording_rules() {
        let rec: BTreeMap<String, String> = [
            ("a:x:rate5m".to_string(), "rate(x_total[5m])".to_string()),
            (
                "b:x:ratio".to_string(),
                "a:x:rate5m / rate(y_count[5m])".to_string(),
            ),
        ]
        .into();
        let got = base_series("b:x:ratio > 1 or ALERTS", &rec).unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            ["ALERTS", "x_total", "y_count"]
        );
    }
}
