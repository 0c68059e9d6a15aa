//! The Prometheus text format 0.0.4, written with the `prometheus` crate: the default.

use prometheus::proto::{self, MetricType};
use prometheus::{Encoder, TextEncoder};

use crate::model::{MetricFamily, MetricKind, Value};

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

/// Prometheus text format of the given families. Families without series are left out.
pub fn render(families: &[MetricFamily]) -> anyhow::Result<String> {
    let protos: Vec<proto::MetricFamily> = families
        .iter()
        .filter(|f| !f.series.is_empty())
        .map(to_proto)
        .collect();
    let mut buf = Vec::new();
    TextEncoder::new().encode(&protos, &mut buf)?;
    Ok(String::from_utf8(buf)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HistogramValue;

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
