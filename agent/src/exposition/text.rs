//! The Prometheus text format 0.0.4: the default. Written straight into one buffer sized
//! from the previous scrape, without an intermediate copy of the families: a scrape at a few
//! thousand series spends its time in the collectors, not here.

use std::borrow::Borrow;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::model::{MetricFamily, MetricKind, Value};

/// The size of the last exposition, so that the next one is written without regrowing.
static LAST_LEN: AtomicUsize = AtomicUsize::new(0);

/// Prometheus text format of the given families. Families without series are left out.
pub fn render<F: Borrow<MetricFamily>>(families: &[F]) -> anyhow::Result<String> {
    let mut out = String::with_capacity(LAST_LEN.load(Ordering::Relaxed) + 4096);
    write(families, &mut out);
    LAST_LEN.store(out.len(), Ordering::Relaxed);
    Ok(out)
}

/// Appends the families to `out`.
pub fn write<F: Borrow<MetricFamily>>(families: &[F], out: &mut String) {
    // The escaped labels of one series, written once and repeated on each of its lines.
    let mut labels = String::new();
    // A histogram family's bucket bounds as text: the same for each of its series.
    let mut les: Vec<(u64, String)> = Vec::new();
    for f in families
        .iter()
        .map(Borrow::borrow)
        .filter(|f| !f.series.is_empty())
    {
        let name = f.name.as_str();
        if !f.help.is_empty() {
            out.push_str("# HELP ");
            out.push_str(name);
            out.push(' ');
            escape(&f.help, false, out);
            out.push('\n');
        }
        out.push_str("# TYPE ");
        out.push_str(name);
        out.push_str(match f.kind {
            MetricKind::Counter => " counter\n",
            MetricKind::Gauge => " gauge\n",
            MetricKind::Histogram => " histogram\n",
        });
        les.clear();
        for s in &f.series {
            labels.clear();
            for (i, (k, v)) in s.labels.iter().enumerate() {
                if i > 0 {
                    labels.push(',');
                }
                labels.push_str(k);
                labels.push_str("=\"");
                escape(v, true, &mut labels);
                labels.push('"');
            }
            match &s.value {
                Value::Scalar(v) => sample(out, name, "", &labels, None, *v),
                Value::Histogram(h) => {
                    for (i, &(le, n)) in h.buckets.iter().enumerate() {
                        if les.get(i).is_none_or(|(bits, _)| *bits != le.to_bits()) {
                            let mut text = String::new();
                            number(le, &mut text);
                            les.truncate(i);
                            les.push((le.to_bits(), text));
                        }
                        sample(out, name, "_bucket", &labels, Some(&les[i].1), n as f64);
                    }
                    if !h.buckets.last().is_some_and(|(le, _)| *le == f64::INFINITY) {
                        sample(out, name, "_bucket", &labels, Some("+Inf"), h.count as f64);
                    }
                    sample(out, name, "_sum", &labels, None, h.sum);
                    sample(out, name, "_count", &labels, None, h.count as f64);
                }
            }
        }
    }
}

/// One line: `name{labels,le="…"} value`.
fn sample(out: &mut String, name: &str, suffix: &str, labels: &str, le: Option<&str>, v: f64) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        out.push_str(labels);
        if let Some(le) = le {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str("le=\"");
            out.push_str(le);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    number(v, out);
    out.push('\n');
}

/// A number as the text format writes it; whole numbers (counts, most counters) without the
/// float formatter.
fn number(v: f64, out: &mut String) {
    if v.fract() == 0.0 && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative()) {
        out.push_str(itoa::Buffer::new().format(v as i64));
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Backslash and newline escaped (and the double quote, in a label value).
fn escape(s: &str, quote: bool, out: &mut String) {
    if !s
        .bytes()
        .any(|b| b == b'\\' || b == b'\n' || (quote && b == b'"'))
    {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HistogramValue;
    use prometheus::proto::{self, MetricType};
    use prometheus::{Encoder, TextEncoder};

    /// The `prometheus` crate's encoder, which this one replaced: the reference.
    fn to_proto(f: &MetricFamily) -> proto::MetricFamily {
        let mut metrics = Vec::with_capacity(f.series.len());
        let mut mf = proto::MetricFamily::default();
        mf.set_name(f.name.clone());
        mf.set_help(f.help.clone());
        mf.set_field_type(match f.kind {
            MetricKind::Counter => MetricType::COUNTER,
            MetricKind::Gauge => MetricType::GAUGE,
            MetricKind::Histogram => MetricType::HISTOGRAM,
        });
        for s in &f.series {
            let mut m = proto::Metric::default();
            m.set_label(
                s.labels
                    .iter()
                    .map(|(k, v)| {
                        let mut lp = proto::LabelPair::default();
                        lp.set_name(k.clone());
                        lp.set_value(v.clone());
                        lp
                    })
                    .collect(),
            );
            match (&s.value, f.kind) {
                (Value::Scalar(v), MetricKind::Counter) => {
                    let mut c = proto::Counter::default();
                    c.set_value(*v);
                    m.set_counter(c);
                }
                (Value::Scalar(v), _) => {
                    let mut g = proto::Gauge::default();
                    g.set_value(*v);
                    m.set_gauge(g);
                }
                (Value::Histogram(h), _) => {
                    let mut ph = proto::Histogram::default();
                    ph.set_sample_count(h.count);
                    ph.set_sample_sum(h.sum);
                    ph.set_bucket(
                        h.buckets
                            .iter()
                            .map(|&(le, n)| {
                                let mut b = proto::Bucket::default();
                                b.set_upper_bound(le);
                                b.set_cumulative_count(n);
                                b
                            })
                            .collect(),
                    );
                    m.set_histogram(ph);
                }
            }
            metrics.push(m);
        }
        mf.set_metric(metrics);
        mf
    }

    fn reference(families: &[MetricFamily]) -> String {
        let protos: Vec<proto::MetricFamily> = families
            .iter()
            .filter(|f| !f.series.is_empty())
            .map(to_proto)
            .collect();
        let mut buf = Vec::new();
        TextEncoder::new().encode(&protos, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn writes_what_the_prometheus_crate_writes() {
        let mut c = MetricFamily::new(
            "stornet_x_total",
            "X with \\ and\nline.",
            MetricKind::Counter,
        );
        c.scalar(&[("device", "loop0"), ("op", "a\"b\\c\nd")], 3.0);
        c.scalar(&[("device", "loop1"), ("op", "read")], 12345678901.0);
        c.scalar(&[("device", "loop2"), ("op", "read")], 0.0);
        let mut g = MetricFamily::new("stornet_g", "", MetricKind::Gauge);
        g.scalar(&[], 0.000123);
        g.scalar(&[("a", "b")], -2.5);
        g.scalar(&[("a", "c")], 1.5e300);
        g.scalar(&[("a", "d")], 1e20);
        let mut h = MetricFamily::new("stornet_h_seconds", "H.", MetricKind::Histogram);
        let bounds: Vec<f64> = (0..25).map(|k| 1e-6 * f64::from(1u32 << k)).collect();
        for (i, op) in ["read", "write"].iter().enumerate() {
            h.histogram(
                &[("op", op)],
                HistogramValue {
                    buckets: bounds
                        .iter()
                        .enumerate()
                        .map(|(j, &b)| (b, (i * j) as u64))
                        .collect(),
                    count: 100,
                    sum: 0.1 + i as f64,
                },
            );
        }
        h.histogram(
            &[("op", "other")],
            HistogramValue {
                buckets: vec![(0.5, 1), (2.0, 3)],
                count: 4,
                sum: 7.0,
            },
        );
        let empty = MetricFamily::new("stornet_empty", "E.", MetricKind::Gauge);
        let fams = [c, g, empty, h];
        assert_eq!(render(&fams).unwrap(), reference(&fams));
    }

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let mut c = MetricFamily::new("stornet_x_total", "X.", MetricKind::Counter);
        c.scalar(&[("device", "loop0")], 3.0);
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
        let text = render(&[c, h, empty]).unwrap();
        assert!(text.contains("# TYPE stornet_x_total counter"));
        assert!(text.contains("stornet_x_total{device=\"loop0\"} 3"));
        assert!(text.contains("stornet_h_seconds_bucket{op=\"read\",le=\"0.002\"} 3"));
        assert!(text.contains("stornet_h_seconds_bucket{op=\"read\",le=\"+Inf\"} 4"));
        assert!(text.contains("stornet_h_seconds_count{op=\"read\"} 4"));
        assert!(!text.contains("stornet_empty"));
    }
}
