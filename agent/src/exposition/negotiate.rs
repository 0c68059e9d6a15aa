//! Which format a scrape gets: the `format` query parameter when given, else the best the
//! `Accept` header asks for (highest `q`, the first listed on a tie), else text 0.0.4. An
//! Accept header that names nothing the agent writes gets text too, as Prometheus's own
//! client libraries answer.

use super::Format;

/// What one media range of an Accept header asks for, with its quality.
fn media_range(item: &str) -> Option<(Format, f64)> {
    let mut parts = item.split(';').map(str::trim);
    let media = parts.next()?.to_ascii_lowercase();
    let (mut q, mut version, mut proto, mut encoding) = (1.0, None, None, None);
    for p in parts {
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"');
        match k.trim().to_ascii_lowercase().as_str() {
            "q" => q = v.parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q))?,
            "version" => version = Some(v.to_string()),
            "proto" => proto = Some(v.to_string()),
            "encoding" => encoding = Some(v.to_string()),
            _ => {}
        }
    }
    let format = match media.as_str() {
        "application/vnd.google.protobuf"
            if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                && encoding.as_deref() == Some("delimited") =>
        {
            Format::Protobuf
        }
        "application/openmetrics-text"
            if matches!(version.as_deref(), None | Some("1.0.0" | "0.0.1")) =>
        {
            Format::OpenMetrics
        }
        "text/plain" if matches!(version.as_deref(), None | Some("0.0.4")) => Format::Text,
        "text/*" | "*/*" => Format::Text,
        _ => return None,
    };
    Some((format, q))
}

/// The format for an `Accept` header (all its values joined by commas).
pub fn from_accept(accept: &str) -> Format {
    let mut best: Option<(Format, f64)> = None;
    for (format, q) in accept.split(',').filter_map(media_range) {
        if q > 0.0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((format, q));
        }
    }
    best.map_or(Format::Text, |(f, _)| f)
}

/// The format named by a `format=` query parameter (`text`, `openmetrics`, `protobuf`), if the
/// query has one: it overrides Accept, so that a scrape job can ask for a format its
/// Prometheus would not (one that keeps classic buckets while native histograms are on).
pub fn from_query(query: Option<&str>) -> Option<Result<Format, String>> {
    let value = query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("format="))?;
    Some(match value {
        "text" => Ok(Format::Text),
        "openmetrics" => Ok(Format::OpenMetrics),
        "protobuf" => Ok(Format::Protobuf),
        other => Err(format!(
            "unknown format {other:?}: expected text, openmetrics or protobuf"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Prometheus 2.42 sends with native histograms on, and without.
    const PROMETHEUS_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    const PROMETHEUS: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    #[test]
    fn picks_each_format_from_what_scrapers_send() {
        assert_eq!(from_accept(PROMETHEUS_NATIVE), Format::Protobuf);
        assert_eq!(from_accept(PROMETHEUS), Format::OpenMetrics);
        assert_eq!(from_accept("text/plain; version=0.0.4"), Format::Text);
        assert_eq!(from_accept("*/*"), Format::Text);
        assert_eq!(
            from_accept("text/plain;q=0.9, application/openmetrics-text; version=\"1.0.0\""),
            Format::OpenMetrics
        );
        assert_eq!(
            from_accept("application/openmetrics-text;q=0.5,text/plain;q=0.5"),
            Format::OpenMetrics,
            "the first listed wins a tie"
        );
    }

    #[test]
    fn unknown_or_bad_accept_falls_back_to_text() {
        for accept in [
            "",
            "application/json",
            "garbage;;;,,,",
            "application/vnd.google.protobuf",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
            "application/openmetrics-text;version=2.0.0",
            "application/openmetrics-text;q=0",
            "application/openmetrics-text;q=banana",
            "application/openmetrics-text;q=7",
            "\u{0}\u{ff}",
        ] {
            assert_eq!(from_accept(accept), Format::Text, "{accept:?}");
        }
    }

    #[test]
    fn the_query_overrides_and_a_bad_one_is_named() {
        assert_eq!(from_query(None), None);
        assert_eq!(from_query(Some("a=b")), None);
        assert_eq!(from_query(Some("a=b&format=text")), Some(Ok(Format::Text)));
        assert_eq!(
            from_query(Some("format=protobuf")),
            Some(Ok(Format::Protobuf))
        );
        assert_eq!(
            from_query(Some("format=openmetrics")),
            Some(Ok(Format::OpenMetrics))
        );
        assert!(from_query(Some("format=xml")).unwrap().is_err());
    }
}
