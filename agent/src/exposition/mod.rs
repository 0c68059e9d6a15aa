//! The metrics in the format the scraper asks for: Prometheus text 0.0.4 (the default),
//! OpenMetrics 1.0 text, or protobuf with native histograms beside the classic buckets.

pub mod native;
pub mod negotiate;
pub mod openmetrics;
pub mod protobuf;
pub mod text;

use crate::model::MetricFamily;
use std::borrow::Borrow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
    Protobuf,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Text, Format::OpenMetrics, Format::Protobuf];

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }
}

/// The families in `format`; `created` (Unix seconds) is when counters and histograms
/// started, for the formats that say so.
pub fn render<F: Borrow<MetricFamily>>(
    families: &[F],
    format: Format,
    created: f64,
) -> anyhow::Result<Vec<u8>> {
    Ok(match format {
        Format::Text => text::render(families)?.into_bytes(),
        Format::OpenMetrics => openmetrics::render(families, created).into_bytes(),
        Format::Protobuf => protobuf::render(families, created),
    })
}
