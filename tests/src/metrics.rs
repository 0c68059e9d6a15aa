//! Scraping a Prometheus endpoint over plain HTTP and reading samples from the text format.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};

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
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request(addr, path, headers).as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_response(&raw)
}

/// An HTTP/1.1 GET request that asks the server to close the connection after answering.
pub fn request(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> String {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n")
}

/// (status code, body) of a raw HTTP/1.1 response.
pub fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP header end")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status")?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        code,
        if chunked {
            dechunk(body)?
        } else {
            body.to_string()
        },
    ))
}

/// `Basic base64(user:password)` for an Authorization header.
pub fn basic_auth(user: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let data = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Basic ");
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("bad chunk")?;
        let n = usize::from_str_radix(size.trim(), 16).context("bad chunk size")?;
        if n == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..n).context("short chunk")?);
        body = rest.get(n + 2..).context("short chunk")?;
    }
}

/// One sample of the text format (loadgen's reader, which parses the agent's scrapes too).
pub use loadgen::promtext::Sample;

/// Parses the Prometheus text format.
pub fn parse(text: &str) -> Result<Vec<Sample>> {
    loadgen::promtext::parse(text).map_err(anyhow::Error::msg)
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

    #[test]
    fn basic_auth_header() {
        assert_eq!(basic_auth("prom", "s3cret"), "Basic cHJvbTpzM2NyZXQ=");
        assert_eq!(basic_auth("a", ""), "Basic YTo=");
        assert_eq!(basic_auth("ab", "c"), "Basic YWI6Yw==");
    }

    #[test]
    fn dechunks() {
        assert_eq!(
            dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap(),
            "abcde"
        );
    }
}
