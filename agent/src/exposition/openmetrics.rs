//! The OpenMetrics 1.0 text format: as the Prometheus text format, but a counter family is
//! named without its `_total`, counters and histograms have a `_created` sample (when they
//! started counting: the agent's start), and the exposition ends with `# EOF`.

use std::borrow::Borrow;
use std::fmt::Write;

use crate::model::{MetricFamily, MetricKind, Value};

/// A number as OpenMetrics writes it.
fn number(v: f64) -> String {
    match v {
        f64::INFINITY => "+Inf".into(),
        f64::NEG_INFINITY => "-Inf".into(),
        v if v.is_nan() => "NaN".into(),
        v => format!("{v}"),
    }
}

/// Escapes a label value or help text: backslash, double quote and newline.
fn escape(s: &str) -> String {
    s.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// `{a="1",b="2"}` with `extra` last (the `le` of a bucket); nothing without labels.
fn labels(pairs: &[(String, String)], extra: Option<(&str, &str)>) -> String {
    let all: Vec<String> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(extra)
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if all.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", all.join(","))
    }
}

/// The families in OpenMetrics text; families without series are left out. `created` (Unix
/// seconds) is when the counters and histograms started.
pub fn render<F: Borrow<MetricFamily>>(families: &[F], created: f64) -> String {
    let mut out = String::new();
    let created = number(created);
    for f in families
        .iter()
        .map(Borrow::borrow)
        .filter(|f| !f.series.is_empty())
    {
        let name = match f.kind {
            MetricKind::Counter => f.name.strip_suffix("_total").unwrap_or(&f.name),
            _ => &f.name,
        };
        let kind = match f.kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "# HELP {name} {}", escape(&f.help));
        for s in &f.series {
            let l = labels(&s.labels, None);
            match (&s.value, f.kind) {
                (Value::Scalar(v), MetricKind::Counter) => {
                    let _ = writeln!(out, "{name}_total{l} {}", number(*v));
                    let _ = writeln!(out, "{name}_created{l} {created}");
                }
                (Value::Scalar(v), _) => {
                    let _ = writeln!(out, "{name}{l} {}", number(*v));
                }
                (Value::Histogram(h), _) => {
                    let buckets = h.buckets.iter().map(|&(le, n)| (number(le), n));
                    for (le, n) in buckets.chain([("+Inf".to_string(), h.count)]) {
                        let bl = labels(&s.labels, Some(("le", &le)));
                        let _ = writeln!(out, "{name}_bucket{bl} {n}");
                    }
                    let _ = writeln!(out, "{name}_count{l} {}", h.count);
                    let _ = writeln!(out, "{name}_sum{l} {}", number(h.sum));
                    let _ = writeln!(out, "{name}_created{l} {created}");
                }
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HistogramValue;

    #[test]
    fn writes_counters_without_total_in_the_family_created_and_eof() {
        let mut c = MetricFamily::new("stornet_x_total", "X \"y\".", MetricKind::Counter);
        c.scalar(&[("device", "lo\"op")], 3.0);
        let mut g = MetricFamily::new("stornet_g", "G.", MetricKind::Gauge);
        g.scalar(&[], f64::INFINITY);
        let mut h = MetricFamily::new("stornet_h_seconds", "H.", MetricKind::Histogram);
        h.histogram(
            &[("op", "read")],
            HistogramValue {
                buckets: vec![(0.001, 1), (0.002, 3)],
                count: 4,
                sum: 0.5,
            },
        );
        let empty = MetricFamily::new("stornet_empty", "E.", MetricKind::Gauge);
        let text = render(&[c, g, h, empty], 1700000000.5);
        assert_eq!(
            text,
            "# TYPE stornet_x counter\n\
             # HELP stornet_x X \\\"y\\\".\n\
             stornet_x_total{device=\"lo\\\"op\"} 3\n\
             stornet_x_created{device=\"lo\\\"op\"} 1700000000.5\n\
             # TYPE stornet_g gauge\n\
             # HELP stornet_g G.\n\
             stornet_g +Inf\n\
             # TYPE stornet_h_seconds histogram\n\
             # HELP stornet_h_seconds H.\n\
             stornet_h_seconds_bucket{op=\"read\",le=\"0.001\"} 1\n\
             stornet_h_seconds_bucket{op=\"read\",le=\"0.002\"} 3\n\
             stornet_h_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n\
             stornet_h_seconds_count{op=\"read\"} 4\n\
             stornet_h_seconds_sum{op=\"read\"} 0.5\n\
             stornet_h_seconds_created{op=\"read\"} 1700000000.5\n\
             # EOF\n"
        );
    }
}
