//! The HTTP endpoint: the metrics (at `--web.telemetry-path`, gzip-compressed when the client
//! accepts it), a landing page at `/` and `/-/healthy`, on one or more addresses, over plain
//! TCP or TLS (HTTP/1.1, and HTTP/2 where TLS negotiates it), with the web config's client
//! certificates, headers, rate limit and basic auth (see `web::config`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tracing::{debug, info};

use super::config::WebConfig;
use super::watch::WebConfigSource;
use super::write_deadline::WriteDeadline;
use crate::agent::Agent;
use crate::exporter;

const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A client gets this long for its TLS handshake and for each request's headers; an idle
/// kept-alive connection is closed after it too.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that reads nothing of an answer for this long is disconnected.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// The open connections, oldest first. At the cap, a new connection pushes out the oldest
/// one that is not inside a request (idle, or stuck writing to a client that does not read),
/// so clients that hold connections open cannot lock out a scrape.
struct Connections {
    max: usize,
    next: u64,
    open: BTreeMap<u64, Open>,
}

struct Open {
    /// Set while a request is being answered.
    busy: Arc<AtomicBool>,
    evict: oneshot::Sender<()>,
}

impl Connections {
    /// A slot for a new connection: its id, busy flag and eviction notice; `None` when every
    /// open connection is inside a request.
    fn admit(&mut self) -> Option<(u64, Arc<AtomicBool>, oneshot::Receiver<()>)> {
        if self.open.len() >= self.max {
            let victim = self
                .open
                .iter()
                .find(|(_, o)| !o.busy.load(Ordering::Acquire))
                .map(|(id, _)| *id)?;
            if let Some(o) = self.open.remove(&victim) {
                let _ = o.evict.send(());
            }
        }
        let id = self.next;
        self.next += 1;
        let busy = Arc::new(AtomicBool::new(false));
        let (evict, evicted) = oneshot::channel();
        self.open.insert(
            id,
            Open {
                busy: busy.clone(),
                evict,
            },
        );
        Some((id, busy, evicted))
    }
}

/// What every listener serves.
pub struct Endpoint {
    pub agent: Arc<Agent>,
    pub web: Arc<WebConfigSource>,
    /// Where the metrics are (`--web.telemetry-path`).
    pub telemetry_path: String,
}

/// Serves on every listener until the future `shutdown` completes, with at most
/// `max_connections` open over all of them.
pub async fn serve(
    listeners: Vec<TcpListener>,
    endpoint: Endpoint,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let endpoint = Arc::new(endpoint);
    let conns = Arc::new(Mutex::new(Connections {
        max: max_connections.max(1),
        next: 0,
        open: BTreeMap::new(),
    }));
    let mut tasks = tokio::task::JoinSet::new();
    let web = endpoint.web.current().await;
    for listener in listeners {
        info!(
            address = %listener.local_addr()?,
            path = %endpoint.telemetry_path,
            tls = web.tls.is_some(),
            basic_auth = web.auth.is_some(),
            max_connections,
            "serving metrics"
        );
        tasks.spawn(accept_loop(listener, endpoint.clone(), conns.clone()));
    }
    shutdown.await;
    tasks.abort_all();
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    endpoint: Arc<Endpoint>,
    conns: Arc<Mutex<Connections>>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            // Out of fds and the like: keep serving the connections that exist.
            Err(e) => {
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some((id, busy, evicted)) = lock(&conns).admit() else {
            debug!(%peer, "refused: every connection is answering a request");
            continue;
        };
        let endpoint = endpoint.clone();
        let conns = conns.clone();
        tokio::spawn(async move {
            let stream = WriteDeadline::new(stream, WRITE_TIMEOUT);
            let serving = async {
                // Read per connection: a changed web config applies to the next one.
                let web = endpoint.web.current().await;
                match &web.tls {
                    None => {
                        connection(stream, peer, endpoint.clone(), web.clone(), busy, false).await
                    }
                    Some(tls) => {
                        match tokio::time::timeout(CLIENT_TIMEOUT, tls.accept(stream)).await {
                            Ok(Ok(s)) => {
                                let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
                                connection(s, peer, endpoint.clone(), web.clone(), busy, h2).await
                            }
                            Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                            Err(_) => debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
            };
            tokio::select! {
                () = serving => {}
                _ = evicted => debug!(%peer, "closed to make room for a new connection"),
            }
            lock(&conns).open.remove(&id);
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks a connection busy for as long as it lives.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn new(flag: &Arc<AtomicBool>) -> Busy {
        flag.store(true, Ordering::Release);
        Busy(flag.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The HTTP/1 settings every connection is served with.
pub fn http1() -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(CLIENT_TIMEOUT);
    b
}

async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    endpoint: Arc<Endpoint>,
    web: Arc<WebConfig>,
    busy: Arc<AtomicBool>,
    h2: bool,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let (endpoint, web, busy) = (endpoint.clone(), web.clone(), busy.clone());
        async move {
            let _busy = Busy::new(&busy);
            let mut r = handle(req, &endpoint, &web).await;
            for (k, v) in &web.headers {
                r.headers_mut().insert(k.clone(), v.clone());
            }
            Ok::<_, Infallible>(r)
        }
    });
    let io = TokioIo::new(stream);
    let served = if h2 {
        http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .serve_connection(io, service)
            .await
    } else {
        http1().serve_connection(io, service).await
    };
    if let Err(e) = served {
        debug!(%peer, error = %e, "connection ended");
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()))
        .expect("valid response")
}

async fn handle(
    req: Request<Incoming>,
    endpoint: &Endpoint,
    web: &WebConfig,
) -> Response<Full<Bytes>> {
    if let Some(limit) = &web.rate_limit
        && !limit.allow()
    {
        return reply(
            StatusCode::TOO_MANY_REQUESTS,
            "text/plain",
            "Too Many Requests\n",
        );
    }
    let path = req.uri().path();
    if let Some(auth) = web.auth.clone()
        && !web.auth_excluded_paths.iter().any(|p| p == path)
    {
        let header = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !auth.allows(header).await {
            let mut r = reply(StatusCode::UNAUTHORIZED, "text/plain", "Unauthorized\n");
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Basic realm=\"stornet-agent\""),
            );
            return r;
        }
    }
    if path == endpoint.telemetry_path {
        let gzip = super::gzip::accepted(req.headers());
        return metrics(endpoint.agent.clone(), gzip).await;
    }
    match path {
        "/-/healthy" => reply(StatusCode::OK, "text/plain", "Healthy\n"),
        "/" => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            super::landing::page(&endpoint.agent, &endpoint.telemetry_path),
        ),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

/// One scrape: collect and render off the async threads, compressed when asked for.
async fn metrics(agent: Arc<Agent>, gzip: bool) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let rendered = tokio::task::spawn_blocking(move || {
        let text = exporter::render(&agent.gather())?;
        let body = if gzip {
            super::gzip::compress(text.as_bytes())?
        } else {
            text.into_bytes()
        };
        agent.self_metrics.observe_scrape(start.elapsed());
        anyhow::Ok(body)
    })
    .await
    .context("collecting metrics")
    .and_then(|r| r);
    match rendered {
        Ok(body) => {
            let mut r = reply(StatusCode::OK, TEXT_FORMAT, body);
            if gzip {
                r.headers_mut().insert(
                    hyper::header::CONTENT_ENCODING,
                    hyper::header::HeaderValue::from_static("gzip"),
                );
            }
            r.headers_mut().insert(
                hyper::header::VARY,
                hyper::header::HeaderValue::from_static("Accept-Encoding"),
            );
            r
        }
        Err(e) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("{e:#}\n"),
        ),
    }
}
