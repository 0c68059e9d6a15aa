//! GET over http or https with ureq (rustls with ring, the agent's TLS stack): a deadline on
//! the whole exchange, a cap on the answer's size, basic auth from the URL or a bearer token.
//! Errors are one line and say whether TLS was the trouble, so that a caller can tell a
//! wrong CA (a setup mistake) from an agent that is down for a moment.

use std::time::Duration;

use crate::tls::ClientConfig;
use crate::url::Url;

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The TLS handshake failed (untrusted or unfit certificate, plain HTTP on the other end).
    Tls,
    /// The answer is larger than the caller's limit.
    TooLarge,
    /// No connection, no answer in time, a broken answer.
    Other,
}

/// Why a GET failed, in one line (without the URL: callers name the server their way).
#[derive(Clone, Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.message
    }
}

/// An HTTP(S) client; cheap to clone (the connection settings are shared).
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    bearer_token: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl Default for Client {
    /// Plain http, or https verified against the Mozilla roots.
    fn default() -> Client {
        Client::new(&ClientConfig::default())
    }
}

impl Client {
    pub fn new(c: &ClientConfig) -> Client {
        let config = ureq::Agent::config_builder()
            .tls_config(c.tls())
            // A status is an answer to report, not an error.
            .http_status_as_error(false)
            // Agents and Prometheus answer in place; following a redirect could carry the
            // credentials to another host.
            .max_redirects(0)
            .max_redirects_will_error(false)
            // Scrapes go straight to the server, as Prometheus's do: an http_proxy meant for
            // the internet must not capture a lab's or a cluster's addresses.
            .proxy(None)
            .user_agent(concat!("loadgen/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            bearer_token: c.bearer_token.clone(),
        }
    }

    /// GETs `path_and_query` (appended to the URL's path) within `timeout`, with extra
    /// request `headers`; an answer larger than `max_body` bytes is refused (an endless or
    /// huge answer would otherwise be read until memory runs out).
    pub fn get(
        &self,
        url: &Url,
        path_and_query: &str,
        headers: &[(&str, &str)],
        timeout: Duration,
        max_body: usize,
    ) -> Result<Response, Error> {
        let target = format!("{}{path_and_query}", url.display());
        let mut req = self
            .agent
            .get(&target)
            .config()
            .timeout_global(Some(timeout))
            .build();
        if let Some((user, password)) = url.basic_auth() {
            req = req.header("Authorization", basic(&user, &password));
        } else if let Some(t) = &self.bearer_token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut r = req.call().map_err(|e| error(e, timeout, max_body))?;
        let status = r.status().as_u16();
        let body = r
            .body_mut()
            .with_config()
            .limit(max_body as u64)
            .read_to_string()
            .map_err(|e| error(e, timeout, max_body))?;
        Ok(Response { status, body })
    }
}

/// `Basic base64(user:password)`.
pub fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

fn error(e: ureq::Error, timeout: Duration, max_body: usize) -> Error {
    let tls = |message: String| Error {
        kind: ErrorKind::Tls,
        message: format!("TLS handshake failed: {message}"),
    };
    let other = |message: String| Error {
        kind: ErrorKind::Other,
        message,
    };
    match e {
        ureq::Error::Rustls(e) => tls(e.to_string()),
        ureq::Error::Tls(m) => tls(m.to_string()),
        ureq::Error::Pem(e) => tls(e.to_string()),
        // rustls reports a failed handshake as an IO error that wraps its own.
        ureq::Error::Io(io) => match io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(r) => tls(r.to_string()),
            None => other(io.to_string()),
        },
        ureq::Error::BodyExceedsLimit(_) => Error {
            kind: ErrorKind::TooLarge,
            message: format!("the answer is larger than {} MiB; refused", max_body >> 20),
        },
        ureq::Error::Timeout(_) => other(format!("no complete answer within {timeout:?}")),
        ureq::Error::HostNotFound => other("cannot resolve the host".into()),
        ureq::Error::Protocol(p) => other(format!("the answer is not HTTP/1.1: {p}")),
        e => other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn basic_auth_header() {
        assert_eq!(basic("prom", "s3cret"), "Basic cHJvbTpzM2NyZXQ=");
        assert_eq!(basic("a", ""), "Basic YTo=");
        assert_eq!(basic("ab", "c"), "Basic YWI6Yw==");
    }

    /// A one-shot server on loopback: answers `answer` and hands back the request it read.
    fn serve(answer: &'static [u8]) -> (Url, std::thread::JoinHandle<String>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::of(super::super::Scheme::Http, l.local_addr().unwrap());
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            let _ = s.write_all(answer);
            String::from_utf8_lossy(&req).into_owned()
        });
        (url, t)
    }

    #[test]
    fn credentials_from_the_url_go_as_basic_auth_and_a_status_is_an_answer() {
        let (mut url, server) = serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
        url.userinfo = Some("prom:s3cret".into());
        let r = Client::default()
            .get(&url, "/metrics", &[], Duration::from_secs(10), 1 << 20)
            .unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "nope"));
        let req = server.join().unwrap().to_ascii_lowercase();
        assert!(req.starts_with("get /metrics http/1.1\r\n"), "{req}");
        assert!(
            req.contains("\r\nauthorization: basic chjvbtpzm2nyzxq=\r\n"),
            "{req}"
        );
    }

    #[test]
    fn a_bearer_token_is_sent_when_the_url_has_no_credentials() {
        let (url, server) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        let c = Client::new(&ClientConfig {
            bearer_token: Some("t0k".into()),
            ..ClientConfig::default()
        });
        let r = c
            .get(&url, "/q", &[], Duration::from_secs(10), 1 << 20)
            .unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        let req = server.join().unwrap();
        assert!(req.contains("\r\nauthorization: Bearer t0k\r\n"), "{req}");
    }

    #[test]
    fn an_endless_answer_is_cut_off_at_the_limit() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::of(super::super::Scheme::Http, l.local_addr().unwrap());
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
        let e = Client::default()
            .get(&url, "/metrics", &[], Duration::from_secs(30), 1 << 20)
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge, "{e}");
        assert!(e.message.contains("larger than 1 MiB"), "{e}");
        assert!(server.join().unwrap(), "the client read all 64 MiB");
    }

    #[test]
    fn https_to_a_plain_server_is_a_tls_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::of(super::super::Scheme::Https, l.local_addr().unwrap());
        // The server answers the ClientHello with plain HTTP, which is no TLS record.
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut hello = [0u8; 4096];
            let _ = s.read(&mut hello);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        });
        let e = Client::default()
            .get(&url, "/", &[], Duration::from_secs(10), 1 << 20)
            .unwrap_err();
        server.join().unwrap();
        assert_eq!(e.kind, ErrorKind::Tls, "{e}");
        assert!(e.message.starts_with("TLS handshake failed: "), "{e}");
    }
}
