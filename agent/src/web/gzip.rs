//! gzip for scrapes whose client sends `Accept-Encoding: gzip` (Prometheus does): the text
//! format compresses about tenfold, which matters for hosts with many devices and peers.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use hyper::HeaderMap;

/// Whether `Accept-Encoding` lists gzip (or `*`) with a quality above zero.
pub fn accepted(headers: &HeaderMap) -> bool {
    headers
        .get_all(hyper::header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
}

pub fn compress(body: &[u8]) -> std::io::Result<Vec<u8>> {
    // Level 1: most of the size win for a fraction of the CPU of the default level.
    let mut e = GzEncoder::new(Vec::with_capacity(body.len() / 4), Compression::fast());
    e.write_all(body)?;
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(hyper::header::ACCEPT_ENCODING, value.parse().unwrap());
        accepted(&h)
    }

    #[test]
    fn reads_accept_encoding() {
        assert!(with("gzip"));
        assert!(with("deflate, GZIP;q=0.5"));
        assert!(with("*"));
        assert!(!with("identity"));
        assert!(!with("gzip;q=0"));
        assert!(!with("br, deflate"));
        assert!(!accepted(&HeaderMap::new()));
    }

    #[test]
    fn compresses_so_that_gunzip_gives_the_text_back() {
        let text = "stornet_probe_up{probe=\"block_issue\"} 1\n".repeat(100);
        let gz = compress(text.as_bytes()).unwrap();
        assert!(gz.len() < text.len() / 5);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out)
            .unwrap();
        assert_eq!(out, text);
    }
}
