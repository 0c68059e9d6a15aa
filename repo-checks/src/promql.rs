//! The series selectors of a PromQL expression: which metric names it reads and with which
//! label matchers. A small tokenizer, enough to check dashboards and rules against the
//! metrics the agent exports; it does not validate PromQL (promtool and Prometheus do).

use anyhow::{Result, bail};

/// One label matcher, e.g. `device=~"$device"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matcher {
    pub label: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: String,
    pub value: String,
}

/// A vector selector: a metric name and/or label matchers (`{__name__=~"a|b"}` has no name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub name: Option<String>,
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// The metric names this selector can match: its name, or the alternatives of a
    /// `__name__` regex made only of literal names (`a|b`). Anything else is an error.
    pub fn metric_names(&self) -> Result<Vec<String>> {
        if let Some(n) = &self.name {
            return Ok(vec![n.clone()]);
        }
        for m in &self.matchers {
            if m.label != "__name__" {
                continue;
            }
            let names: Vec<String> = match m.op.as_str() {
                "=" => vec![m.value.clone()],
                "=~" => m.value.split('|').map(str::to_string).collect(),
                _ => bail!("negative __name__ matcher {m:?}"),
            };
            if names.iter().all(|n| is_identifier(n)) {
                return Ok(names);
            }
            bail!("__name__ regex {:?} is not a list of names", m.value);
        }
        bail!("selector without a metric name: {self:?}")
    }
}

/// Words that are PromQL syntax, not metric names.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "atan2",
    "inf",
    "nan",
];

/// Aggregation operators: `sum by (a) (x)` puts the grouping between name and parenthesis.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Reads a quoted string starting at `chars[i]` (a quote); returns its value and the index
/// after the closing quote.
fn string_at(chars: &[char], i: usize) -> Result<(String, usize)> {
    let quote = chars[i];
    let mut out = String::new();
    let mut j = i + 1;
    while j < chars.len() {
        let c = chars[j];
        if c == quote {
            return Ok((out, j + 1));
        }
        if c == '\\' && quote != '`' {
            j += 1;
            match chars.get(j) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(&e) => out.push(e),
                None => break,
            }
        } else {
            out.push(c);
        }
        j += 1;
    }
    bail!("unterminated string in PromQL")
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Parses the matchers of `{…}` starting at `chars[i]` (`{`); returns them and the index
/// after `}`.
fn matchers_at(chars: &[char], i: usize) -> Result<(Vec<Matcher>, usize)> {
    let mut out = Vec::new();
    let mut j = i + 1;
    loop {
        j = skip_space(chars, j);
        match chars.get(j) {
            Some('}') => return Ok((out, j + 1)),
            Some(',') => {
                j += 1;
                continue;
            }
            None => bail!("unterminated label matchers"),
            _ => {}
        }
        let start = j;
        while j < chars.len() && ident_char(chars[j]) {
            j += 1;
        }
        let label: String = chars[start..j].iter().collect();
        if label.is_empty() {
            bail!(
                "bad label matcher at {:?}",
                chars[start..].iter().collect::<String>()
            );
        }
        j = skip_space(chars, j);
        let op: String = match (chars.get(j), chars.get(j + 1)) {
            (Some('='), Some('~')) | (Some('!'), Some('=')) | (Some('!'), Some('~')) => {
                chars[j..j + 2].iter().collect()
            }
            (Some('='), _) => "=".into(),
            _ => bail!("label {label}: expected a matcher operator"),
        };
        j = skip_space(chars, j + op.len());
        if !matches!(chars.get(j), Some('"' | '\'' | '`')) {
            bail!("label {label}: expected a quoted value");
        }
        let (value, next) = string_at(chars, j)?;
        out.push(Matcher { label, op, value });
        j = next;
    }
}

/// Every vector selector in `expr`.
pub fn selectors(expr: &str) -> Result<Vec<Selector>> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if matches!(c, '"' | '\'' | '`') {
            i = string_at(&chars, i)?.1;
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '[' {
            // Range or subquery: durations only.
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            let (matchers, next) = matchers_at(&chars, i)?;
            out.push(Selector {
                name: None,
                matchers,
            });
            i = next;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            // A number (1, 0.9, 1e-9, 0x1f); durations only occur after `offset`/in ranges.
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '.'
                    || ((chars[i] == '-' || chars[i] == '+') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = skip_space(&chars, i);
            let lower = word.to_ascii_lowercase();
            if LABEL_LISTS.contains(&lower.as_str()) {
                // `by (a, b)`: skip the label list.
                if chars.get(next) == Some(&'(') {
                    let close = chars[next..]
                        .iter()
                        .position(|&c| c == ')')
                        .map(|p| next + p + 1);
                    match close {
                        Some(c) => i = c,
                        None => bail!("unterminated label list after {word}"),
                    }
                }
            } else if KEYWORDS.contains(&lower.as_str()) {
                if lower == "offset" {
                    // Skip the duration.
                    let mut j = next;
                    while j < chars.len() && chars[j].is_ascii_alphanumeric() {
                        j += 1;
                    }
                    i = j;
                }
            } else if chars.get(next) == Some(&'(') || AGGREGATIONS.contains(&lower.as_str()) {
                // A function or aggregation.
            } else if chars.get(next) == Some(&'{') {
                let (matchers, after) = matchers_at(&chars, next)?;
                out.push(Selector {
                    name: Some(word),
                    matchers,
                });
                i = after;
            } else {
                out.push(Selector {
                    name: Some(word),
                    matchers: Vec::new(),
                });
            }
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// A Grafana `label_values(selector, label)` or `label_values(label)` variable query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelValuesQuery {
    pub selector: Option<String>,
    pub label: String,
}

/// Parses a `label_values(…)` query; other query forms are errors.
pub fn label_values_query(q: &str) -> Result<LabelValuesQuery> {
    let inner = q
        .trim()
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| anyhow::anyhow!("not a label_values(…) query: {q:?}"))?;
    let (selector, label) = match inner.rsplit_once(',') {
        Some((s, l)) => (Some(s.trim().to_string()), l.trim()),
        None => (None, inner.trim()),
    };
    if !is_identifier(label) {
        bail!("label_values: bad label name {label:?} in {q:?}");
    }
    Ok(LabelValuesQuery {
        selector,
        label: label.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        selectors(expr)
            .unwrap()
            .iter()
            .flat_map(|s| s.metric_names().unwrap())
            .collect()
    }

    #[test]
    fn finds_metric_names_not_functions_or_labels() {
        let e = r#"histogram_quantile(0.99, sum by (instance, le) (rate(stornet_block_queue_seconds_bucket{device=~"$device", op!="flush"}[$__rate_interval])))
            and on (instance) group_left () rate(x_count[5m] offset 1h) > 1e-9"#;
        assert_eq!(names(e), ["stornet_block_queue_seconds_bucket", "x_count"]);
        let s = &selectors(e).unwrap()[0];
        assert_eq!(
            s.matchers,
            [
                Matcher {
                    label: "device".into(),
                    op: "=~".into(),
                    value: "$device".into()
                },
                Matcher {
                    label: "op".into(),
                    op: "!=".into(),
                    value: "flush".into()
                }
            ]
        );
    }

    #[test]
    fn recording_rule_names_and_bare_selectors() {
        assert_eq!(
            names("instance_peer:stornet_tcp_retransmits:rate5m > 1 or ALERTS"),
            ["instance_peer:stornet_tcp_retransmits:rate5m", "ALERTS"]
        );
        assert_eq!(
            names(r#"count_values without (instance) ("mtu", m{a="b,c}"})"#),
            ["m"]
        );
        assert_eq!(
            names(r#"{__name__=~"a_total|b", instance=~"x"}"#),
            ["a_total", "b"]
        );
        assert!(
            selectors(r#"{__name__=~"a.*"}"#).unwrap()[0]
                .metric_names()
                .is_err()
        );
        assert!(selectors(r#"m{a="b"#).is_err());
    }

    #[test]
    fn label_values_queries() {
        assert_eq!(
            label_values_query(
                r#"label_values(stornet_block_inflight{instance=~"$instance"}, device)"#
            )
            .unwrap(),
            LabelValuesQuery {
                selector: Some(r#"stornet_block_inflight{instance=~"$instance"}"#.into()),
                label: "device".into()
            }
        );
        assert_eq!(
            label_values_query("label_values(job)").unwrap().selector,
            None
        );
        assert!(label_values_query("query_result(up)").is_err());
    }
}
