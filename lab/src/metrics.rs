//! Scraping a Prometheus endpoint (loadgen's HTTP client, the one of the whole tree) and
//! reading samples from the text format.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use promclient::{Client, Scheme, Url};

/// Enough for any answer a test reads (the agent's /metrics, Prometheus's API).
const MAX_BODY: usize = 256 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);

/// GET `path` from `addr`; returns (status code, body).
pub fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    http_get_with(addr, path, &[])
}

/// GET with extra request headers, such as `("Authorization", "Basic …")`.
pub fn http_get_with(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    get(
        &Client::default(),
        &Url::of(Scheme::Http, addr),
        path,
        headers,
    )
}

/// GET `path` from `url` with `client`; returns (status code, body).
pub fn get(
    client: &Client,
    url: &Url,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    let r = client
        .get(url, path, headers, TIMEOUT, MAX_BODY)
        .map_err(|e| anyhow::anyhow!("GET {}{path}: {e}", url.display()))?;
    Ok((r.status, r.body))
}

/// `Basic base64(user:password)` for an Authorization header.
pub use promclient::basic as basic_auth;

/// One sample of the text format (loadgen's reader, which parses the agent's scrapes too).
pub use promclient::text::Sample;

/// Parses the Prometheus text format.
pub fn parse(text: &str) -> Result<Vec<Sample>> {
    promclient::text::parse(text).map_err(anyhow::Error::msg)
}

/// Sum of the samples named `name` whose labels include all of `labels`.
pub fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
        .map(|s| s.value)
        .sum()
}

/// `<metric>_count` of a histogram series.
pub fn count(s: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    sum(s, &format!("{metric}_count"), labels)
}

/// `<metric>_sum` of a histogram series.
pub fn total(s: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    sum(s, &format!("{metric}_sum"), labels)
}

/// The cumulative count of bucket `le` (a bound of the exported set) of a histogram series;
/// 0 where the series does not exist (yet).
pub fn bucket(s: &[Sample], metric: &str, labels: &[(&str, &str)], le: &str) -> f64 {
    let name = format!("{metric}_bucket");
    let series = s
        .iter()
        .any(|x| x.name == name && labels.iter().all(|(k, v)| x.label(k) == Some(*v)));
    if !series {
        return 0.0;
    }
    let found: Vec<&Sample> = s
        .iter()
        .filter(|x| {
            x.name == name
                && x.label("le") == Some(le)
                && labels.iter().all(|(k, v)| x.label(k) == Some(*v))
        })
        .collect();
    assert!(
        !found.is_empty(),
        "no bucket le={le} of {metric} {labels:?}"
    );
    found.iter().map(|x| x.value).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_text_format() {
        let t = "# HELP a_total x\n# TYPE a_total counter\na_total{device=\"loop0\",op=\"write\"} 5\n\
                 b 1.5\nh_bucket{le=\"+Inf\",x=\"q\\\"\"} 3\n";
        let s = parse(t).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(sum(&s, "a_total", &[("device", "loop0")]), 5.0);
        assert_eq!(sum(&s, "a_total", &[("device", "loop1")]), 0.0);
        assert_eq!(s[1].value, 1.5);
        assert_eq!(s[2].label("x"), Some("q\""));
        assert_eq!(s[2].label("le"), Some("+Inf"));
    }
}

/// A kernel counter read just before and just after a scrape. The kernel may count while the
/// scrape runs (a FIN sent again, a neighbour probe), so a count the agent reads during the
/// scrape is known only to lie between the two reads.
#[derive(Clone, Copy, Debug)]
pub struct Around {
    pub before: u64,
    pub after: u64,
}

/// Runs `scrape` between two reads of the kernel counters `read` returns.
pub fn around<const N: usize, T>(
    read: impl Fn() -> [u64; N],
    scrape: impl FnOnce() -> T,
) -> ([Around; N], T) {
    let before = read();
    let scraped = scrape();
    let after = read();
    (
        std::array::from_fn(|i| Around {
            before: before[i],
            after: after[i],
        }),
        scraped,
    )
}

/// What the kernel counted between two scrapes, as closely as the reads around them tell: the
/// difference of the agent's two counts must lie in this range.
pub fn counted_between(first: Around, second: Around) -> std::ops::RangeInclusive<u64> {
    second.before.saturating_sub(first.after)..=second.after.saturating_sub(first.before)
}
