//! A reader for the Prometheus text exposition format (version 0.0.4), as stornet-agent and
//! any other exporter serve it: `# HELP` / `# TYPE` comments, samples with optional labels,
//! values (`NaN`, `+Inf`, `-Inf` included) and an optional timestamp.

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Labels in the order they appear.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

type Labels = Vec<(String, String)>;

/// Parses every sample.
pub fn parse(text: &str) -> Result<Vec<Sample>, String> {
    parse_filtered(text, |_| true)
}

/// Parses the samples whose metric name `keep` accepts; the labels of the others are not
/// even read, which keeps scraping a large exporter cheap.
pub fn parse_filtered(text: &str, keep: impl Fn(&str) -> bool) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        let name_end = line
            .find(|c: char| c == '{' || c.is_ascii_whitespace())
            .ok_or_else(|| err("no value"))?;
        let name = &line[..name_end];
        if !valid_name(name) {
            return Err(err("bad metric name"));
        }
        if !keep(name) {
            continue;
        }
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(inner) = rest.strip_prefix('{') {
            let (l, after) = parse_labels(inner).map_err(|e| err(&e))?;
            labels = l;
            rest = after;
        }
        let mut fields = rest.split_ascii_whitespace();
        let value = fields
            .next()
            .ok_or_else(|| err("no value"))
            .and_then(|v| parse_value(v).ok_or_else(|| err("bad value")))?;
        if let Some(ts) = fields.next()
            && ts.parse::<i64>().is_err()
        {
            return Err(err("bad timestamp"));
        }
        if fields.next().is_some() {
            return Err(err("unexpected text after the value"));
        }
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(out)
}

fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// Reads `k="v",...}`; returns the labels and the text after the closing brace.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((out, rest));
        }
        let eq = s.find('=').ok_or("label without `=`")?;
        let key = s[..eq].trim();
        if !valid_name(key) || key.contains(':') {
            return Err(format!("bad label name {key:?}"));
        }
        let rest = s[eq + 1..].trim_start();
        let rest = rest.strip_prefix('"').ok_or("label value without quotes")?;
        let mut value = String::new();
        let mut end = None;
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => return Err("unterminated label value".into()),
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.ok_or("unterminated label value")?;
        out.push((key.to_string(), value));
        s = rest[end + 1..].trim_start();
        if let Some(r) = s.strip_prefix(',') {
            s = r;
        } else if !s.starts_with('}') {
            return Err("labels not separated by `,`".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_exporters_serve() {
        let text = "# HELP stornet_tcp_retransmits_total Segments.\n\
                    # TYPE stornet_tcp_retransmits_total counter\n\
                    stornet_tcp_retransmits_total{peer=\"198.18.0.2\"} 1874\n\
                    stornet_block_queue_seconds_bucket{device=\"loop3\",op=\"write\",le=\"+Inf\"} 12\n\
                    up 1 1700000000000\n\
                    odd{a=\"x\\\"y\\\\z\\n\", b = \"\" ,} NaN\n\
                    neg -Inf\n\
                    sci 1.5e-3\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!(s[0].label("peer"), Some("198.18.0.2"));
        assert_eq!(s[0].value, 1874.0);
        assert_eq!(s[1].label("le"), Some("+Inf"));
        assert_eq!(s[2].name, "up");
        assert_eq!(s[3].label("a"), Some("x\"y\\z\n"));
        assert_eq!(s[3].label("b"), Some(""));
        assert!(s[3].value.is_nan());
        assert_eq!(s[4].value, f64::NEG_INFINITY);
        assert_eq!(s[5].value, 0.0015);
    }

    #[test]
    fn a_filter_skips_unwanted_metrics_without_reading_them() {
        let text = "a_total{x=\"1\"} 1\nb_bucket{le=\"1\"} 2\n";
        let s = parse_filtered(text, |n| n == "a_total").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "a_total");
    }

    #[test]
    fn malformed_lines_are_refused_with_their_number() {
        for (text, what) in [
            ("ok 1\nbroken\n", "line 2: no value"),
            ("x{a=\"1 2\n", "line 1: unterminated label value"),
            ("x{a=\"1\" 2\n", "line 1: labels not separated"),
            ("x{a=1} 2\n", "line 1: label value without quotes"),
            ("x{a=\"1\" b=\"2\"} 2\n", "line 1: labels not separated"),
            ("x 1.2.3\n", "line 1: bad value"),
            ("x 1 2 3\n", "line 1: unexpected text"),
            ("x 1 soon\n", "line 1: bad timestamp"),
            ("9x 1\n", "line 1: bad metric name"),
            ("x{9=\"1\"} 1\n", "line 1: bad label name"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(what), "{text:?}: {e}");
        }
    }
}
