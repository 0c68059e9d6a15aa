//! The protobuf exposition (`io.prometheus.client.MetricFamily`, length-delimited), the
//! format Prometheus asks for when native histograms are on. Every histogram carries its
//! classic buckets and, where they fit a base-2 schema (see [`super::native`]), the native
//! buckets beside them. The messages mirror Prometheus's `metrics.proto` (same field
//! numbers), encoded by `prost`.

use prost::Message;
use std::borrow::Borrow;

use super::native;
use crate::model::{HistogramValue, MetricFamily, MetricKind, Value};

#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelPair {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Gauge {
    #[prost(double, tag = "1")]
    pub value: f64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Counter {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(message, optional, tag = "3")]
    pub created_timestamp: Option<Timestamp>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Bucket {
    #[prost(uint64, tag = "1")]
    pub cumulative_count: u64,
    #[prost(double, tag = "2")]
    pub upper_bound: f64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    #[prost(uint64, tag = "1")]
    pub sample_count: u64,
    #[prost(double, tag = "2")]
    pub sample_sum: f64,
    #[prost(message, repeated, tag = "3")]
    pub bucket: Vec<Bucket>,
    #[prost(sint32, tag = "5")]
    pub schema: i32,
    #[prost(double, tag = "6")]
    pub zero_threshold: f64,
    #[prost(uint64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, repeated, tag = "12")]
    pub positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "13")]
    pub positive_delta: Vec<i64>,
    #[prost(message, optional, tag = "15")]
    pub created_timestamp: Option<Timestamp>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(message, repeated, tag = "1")]
    pub label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    pub counter: Option<Counter>,
    #[prost(message, optional, tag = "7")]
    pub histogram: Option<Histogram>,
}

/// `MetricType` of metrics.proto.
pub const COUNTER: i32 = 0;
pub const GAUGE: i32 = 1;
pub const HISTOGRAM: i32 = 4;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Family {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub help: String,
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    #[prost(message, repeated, tag = "4")]
    pub metric: Vec<Metric>,
}

fn timestamp(unix_seconds: f64) -> Timestamp {
    Timestamp {
        seconds: unix_seconds.floor() as i64,
        nanos: (unix_seconds.fract() * 1e9) as i32,
    }
}

fn histogram(h: &HistogramValue, created: &Timestamp) -> Histogram {
    let mut out = Histogram {
        sample_count: h.count,
        sample_sum: h.sum,
        bucket: h
            .buckets
            .iter()
            .map(|&(upper_bound, cumulative_count)| Bucket {
                cumulative_count,
                upper_bound,
            })
            .collect(),
        created_timestamp: Some(created.clone()),
        ..Histogram::default()
    };
    if let Some(n) = native::from_classic(h) {
        out.schema = n.schema;
        out.zero_threshold = n.zero_threshold;
        out.zero_count = n.zero_count;
        out.positive_span = n
            .spans
            .iter()
            .map(|&(offset, length)| BucketSpan { offset, length })
            .collect();
        out.positive_delta = n.deltas;
    }
    out
}

fn family(f: &MetricFamily, created: &Timestamp) -> Family {
    let metric = f
        .series
        .iter()
        .map(|s| {
            let mut m = Metric {
                label: s
                    .labels
                    .iter()
                    .map(|(name, value)| LabelPair {
                        name: name.clone(),
                        value: value.clone(),
                    })
                    .collect(),
                ..Metric::default()
            };
            match (&s.value, f.kind) {
                (Value::Scalar(value), MetricKind::Counter) => {
                    m.counter = Some(Counter {
                        value: *value,
                        created_timestamp: Some(created.clone()),
                    })
                }
                (Value::Scalar(value), _) => m.gauge = Some(Gauge { value: *value }),
                (Value::Histogram(h), _) => m.histogram = Some(histogram(h, created)),
            }
            m
        })
        .collect();
    Family {
        name: f.name.clone(),
        help: f.help.clone(),
        r#type: match f.kind {
            MetricKind::Counter => COUNTER,
            MetricKind::Gauge => GAUGE,
            MetricKind::Histogram => HISTOGRAM,
        },
        metric,
    }
}

/// The families, each as a length-delimited `MetricFamily`; families without series are
/// left out. `created` (Unix seconds) is when the counters and histograms started.
pub fn render<F: Borrow<MetricFamily>>(families: &[F], created: f64) -> Vec<u8> {
    let created = timestamp(created);
    let mut buf = Vec::new();
    for f in families
        .iter()
        .map(Borrow::borrow)
        .filter(|f| !f.series.is_empty())
    {
        family(f, &created)
            .encode_length_delimited(&mut buf)
            .expect("a Vec grows as needed");
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(mut buf: &[u8]) -> Vec<Family> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            out.push(Family::decode_length_delimited(&mut buf).unwrap());
        }
        out
    }

    #[test]
    fn decodes_to_the_classic_and_native_buckets_of_a_known_histogram() {
        let mut h = MetricFamily::new("stornet_h_seconds", "H.", MetricKind::Histogram);
        // 3 at or under 1 µs, 4 in (2, 4] µs, 1 in (8, 16] µs, 2 above 16 µs.
        h.histogram(
            &[("device", "loop0"), ("op", "read")],
            HistogramValue {
                buckets: vec![(1e-6, 3), (2e-6, 3), (4e-6, 7), (8e-6, 7), (16e-6, 8)],
                count: 10,
                sum: 0.25,
            },
        );
        let mut c = MetricFamily::new("stornet_x_total", "X.", MetricKind::Counter);
        c.scalar(&[], 5.0);
        let empty = MetricFamily::new("stornet_empty", "E.", MetricKind::Gauge);
        let got = decode_all(&render(&[h, c, empty], 1_700_000_000.5));
        assert_eq!(got.len(), 2, "the empty family is left out");

        let f = &got[0];
        assert_eq!(
            (f.name.as_str(), f.r#type),
            ("stornet_h_seconds", HISTOGRAM)
        );
        let m = &f.metric[0];
        assert_eq!(m.label[1].name, "op");
        let ph = m.histogram.as_ref().unwrap();
        assert_eq!((ph.sample_count, ph.sample_sum), (10, 0.25));
        assert_eq!(ph.bucket.len(), 5);
        assert_eq!(
            (ph.bucket[2].upper_bound, ph.bucket[2].cumulative_count),
            (4e-6, 7)
        );
        assert_eq!(ph.schema, 0);
        assert_eq!((ph.zero_threshold, ph.zero_count), (2f64.powi(-20), 3));
        // 4 µs is nearest 2^-18, 16 µs 2^-16, above it 2^-15.
        assert_eq!(
            ph.positive_span,
            vec![
                BucketSpan {
                    offset: -18,
                    length: 1
                },
                BucketSpan {
                    offset: 1,
                    length: 2
                }
            ]
        );
        assert_eq!(ph.positive_delta, vec![4, -3, 1]);
        let created = ph.created_timestamp.as_ref().unwrap();
        assert_eq!(
            (created.seconds, created.nanos),
            (1_700_000_000, 500_000_000)
        );

        let c = got[1].metric[0].counter.as_ref().unwrap();
        assert_eq!((got[1].r#type, c.value), (COUNTER, 5.0));
    }
}
