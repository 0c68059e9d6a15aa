//! A small HTTP/1.1 client for the two servers loadgen reads: stornet-agent's `/metrics`
//! during a run and Prometheus's query API in fleet mode. Plain HTTP with optional basic
//! auth (`http://user:password@host:port/path`), one request per connection, a deadline on
//! the whole exchange.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A parsed `http://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// Host as written (a name, an IPv4 address, or an IPv6 address without brackets).
    pub host: String,
    pub port: u16,
    /// Path without a trailing slash (empty for the root).
    pub path: String,
    /// `user:password` for basic auth.
    pub userinfo: Option<String>,
}

impl Url {
    /// Parses `http://[user:pass@]host[:port][/path]`; the port defaults to 80.
    pub fn parse(s: &str) -> Result<Url, String> {
        let rest = if let Some(r) = s.strip_prefix("http://") {
            r
        } else if s.starts_with("https://") {
            return Err(format!(
                "{s}: https is not supported; use the plain-HTTP address of the server"
            ));
        } else {
            return Err(format!("{s}: not an http:// URL"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err(format!("{s}: a query or fragment is not expected here"));
        }
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, authority),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{s}: unclosed `[` in the host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(format!("{s}: unexpected text after the host")),
            };
            (h.to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(format!("{s}: no host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{s}: bad port `{p}`"))?,
        };
        Ok(Url {
            host,
            port,
            path: path.trim_end_matches('/').to_string(),
            userinfo,
        })
    }

    /// `host:port` (IPv6 in brackets), as a `Host` header and a default name.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL without credentials, for messages and records.
    pub fn display(&self) -> String {
        format!("http://{}{}", self.authority(), self.path)
    }
}

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// How the error of an answer over the size limit starts.
pub const TOO_LARGE: &str = "the answer is larger than";

/// Room for the status line and headers beyond the body limit.
const MAX_HEAD: usize = 64 << 10;

/// GETs `path_and_query` (appended to the URL's path) within `timeout`; an answer whose body
/// is larger than `max_body` bytes is refused (an endless or huge answer would otherwise be
/// read until memory runs out).
pub fn get(
    url: &Url,
    path_and_query: &str,
    timeout: Duration,
    max_body: usize,
) -> Result<Response, String> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
        .collect();
    let mut last = format!("{} has no address", url.host);
    let mut stream = None;
    for a in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            last = "timed out connecting".into();
            break;
        }
        match TcpStream::connect_timeout(&a, left) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("cannot connect to {a}: {e}"),
        }
    }
    let mut s = stream.ok_or(last)?;
    let auth = url.userinfo.as_ref().map_or(String::new(), |u| {
        format!("Authorization: Basic {}\r\n", base64(u.as_bytes()))
    });
    let req = format!(
        "GET {}{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: loadgen\r\nAccept: */*\r\n{auth}Connection: close\r\n\r\n",
        url.path,
        path_and_query,
        url.authority()
    );
    let io = |e: std::io::Error| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            format!("no answer within {timeout:?}")
        } else {
            e.to_string()
        }
    };
    let left = |d: Instant| {
        d.saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    s.set_write_timeout(Some(left(deadline))).map_err(io)?;
    s.write_all(req.as_bytes()).map_err(io)?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        if Instant::now() >= deadline {
            return Err(format!("no complete answer within {timeout:?}"));
        }
        s.set_read_timeout(Some(left(deadline))).map_err(io)?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() > max_body + MAX_HEAD {
                    return Err(format!("{TOO_LARGE} {} MiB; refused", max_body >> 20));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    parse_response(&raw)
}

/// Status and body of a raw HTTP/1.x response read to the end of the connection.
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer is not HTTP (no end of headers)")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    if !status_line.starts_with("HTTP/1.") {
        return Err(format!("the answer is not HTTP: {status_line:?}"));
    }
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad HTTP status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for h in lines {
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            } else if k == "content-length" {
                length = v.parse::<usize>().ok();
            } else if k == "content-encoding" && !v.eq_ignore_ascii_case("identity") {
                return Err(format!("unsupported content encoding {v}"));
            }
        }
    }
    let body = &raw[end + 4..];
    let body = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        if body.len() < n {
            return Err(format!(
                "the answer ended after {} of {n} bytes",
                body.len()
            ));
        }
        body[..n].to_vec()
    } else {
        body.to_vec()
    };
    Ok(Response {
        status,
        body: String::from_utf8(body).map_err(|_| "the answer is not UTF-8 text".to_string())?,
    })
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunked answer")?;
        let size = std::str::from_utf8(&body[..nl]).unwrap_or("");
        let size = size.split(';').next().unwrap_or("").trim();
        let n = usize::from_str_radix(size, 16).map_err(|_| "bad chunk size".to_string())?;
        body = &body[nl + 2..];
        if n == 0 {
            return Ok(out);
        }
        // A chunk size near usize::MAX must not wrap around.
        if n.checked_add(2).is_none_or(|need| body.len() < need) {
            return Err("truncated chunked answer".into());
        }
        out.extend_from_slice(&body[..n]);
        body = &body[n + 2..];
    }
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// Percent-encodes a query parameter value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_defaults_and_credentials() {
        let u = Url::parse("http://198.18.0.2:9477").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("198.18.0.2", 9477, "")
        );
        let u = Url::parse("http://prom:secret@example.org/prometheus/").unwrap();
        assert_eq!(u.port, 80);
        assert_eq!(u.path, "/prometheus");
        assert_eq!(u.userinfo.as_deref(), Some("prom:secret"));
        assert_eq!(u.display(), "http://example.org:80/prometheus");
        let u = Url::parse("http://[::1]:9477/metrics").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.authority(), "[::1]:9477");
        for bad in [
            "198.18.0.2:9477",
            "https://h:1",
            "http://:9477",
            "http://h:0",
            "http://h:x",
            "http://h:1/m?x=1",
            "http://[::1",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_with_length_chunks_or_neither() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "abc"));
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, "abcde");
        let r = parse_response(b"HTTP/1.0 404 Not Found\r\n\r\nnope").unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "nope"));
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nxx").is_err());
        // A chunk size of usize::MAX: an error, not an overflow (found by fuzzing).
        let huge =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc\r\n";
        assert_eq!(
            parse_response(huge).unwrap_err(),
            "truncated chunked answer"
        );
    }

    #[test]
    fn an_endless_answer_is_cut_off_at_the_limit() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!("http://{}", l.local_addr().unwrap())).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n");
            let chunk = vec![b'x'; 64 << 10];
            // Far more than the limit; stops when the client hangs up.
            for _ in 0..1024 {
                if s.write_all(&chunk).is_err() {
                    return true;
                }
            }
            false
        });
        let e = get(&url, "/metrics", Duration::from_secs(30), 1 << 20).unwrap_err();
        assert!(e.contains("larger than 1 MiB"), "{e}");
        assert!(server.join().unwrap(), "the client read all 64 MiB");
    }

    #[test]
    fn basic_auth_and_query_encoding() {
        assert_eq!(base64(b"prom:s3cret"), "cHJvbTpzM2NyZXQ=");
        assert_eq!(base64(b"ab:c"), "YWI6Yw==");
        assert_eq!(encode("up{job=\"a b\"}"), "up%7Bjob%3D%22a%20b%22%7D");
    }
}
