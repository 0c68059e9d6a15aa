//! The HTTP endpoint: `/metrics`, `/` and `/-/healthy`, over plain TCP or TLS, optionally
//! behind basic auth (see `web_config`).

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
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tracing::{debug, info};

use crate::agent::Agent;
use crate::exporter;
use crate::web_config::WebConfig;
use crate::write_deadline::WriteDeadline;

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

/// Serves until the future `shutdown` completes, with at most `max_connections` open.
pub async fn serve(
    listener: TcpListener,
    agent: Arc<Agent>,
    web: WebConfig,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    info!(
        address = %listener.local_addr()?,
        tls = web.tls.is_some(),
        basic_auth = web.auth.is_some(),
        max_connections,
        "serving metrics at /metrics"
    );
    let conns = Arc::new(Mutex::new(Connections {
        max: max_connections.max(1),
        next: 0,
        open: BTreeMap::new(),
    }));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of fds and the like: keep serving the connections that exist.
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let Some((id, busy, evicted)) = lock(&conns).admit() else {
            debug!(%peer, "refused: every connection is answering a request");
            continue;
        };
        let agent = agent.clone();
        let web = web.clone();
        let conns = conns.clone();
        tokio::spawn(async move {
            let stream = WriteDeadline::new(stream, WRITE_TIMEOUT);
            let serving = async {
                match &web.tls {
                    None => connection(stream, peer, agent, web.clone(), busy).await,
                    Some(tls) => {
                        match tokio::time::timeout(CLIENT_TIMEOUT, tls.accept(stream)).await {
                            Ok(Ok(s)) => connection(s, peer, agent, web.clone(), busy).await,
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
    agent: Arc<Agent>,
    web: WebConfig,
    busy: Arc<AtomicBool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let (agent, web, busy) = (agent.clone(), web.clone(), busy.clone());
        async move {
            let _busy = Busy::new(&busy);
            handle(req, agent, web).await
        }
    });
    if let Err(e) = http1()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        debug!(%peer, error = %e, "connection ended");
    }
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

async fn handle(
    req: Request<Incoming>,
    agent: Arc<Agent>,
    web: WebConfig,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if let Some(auth) = web.auth {
        let header = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let allowed = auth.allows(header).await;
        if !allowed {
            let mut r = reply(
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "Unauthorized\n".into(),
            );
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Basic realm=\"stornet-agent\""),
            );
            return Ok(r);
        }
    }
    Ok(match req.uri().path() {
        "/metrics" => {
            let start = Instant::now();
            let rendered = tokio::task::spawn_blocking(move || {
                let text = exporter::render(&agent.gather());
                agent.self_metrics.observe_scrape(start.elapsed());
                text
            })
            .await
            .context("collecting metrics")
            .and_then(|r| r);
            match rendered {
                Ok(text) => reply(StatusCode::OK, TEXT_FORMAT, text),
                Err(e) => reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    format!("{e:#}\n"),
                ),
            }
        }
        "/-/healthy" => reply(StatusCode::OK, "text/plain", "Healthy\n".into()),
        "/" => reply(StatusCode::OK, "text/html; charset=utf-8", index(&agent)),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    })
}

fn index(agent: &Agent) -> String {
    let rows: String = agent
        .probes
        .status
        .iter()
        .map(|s| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                html_escape(&s.name),
                if s.up { "up" } else { "down" },
                html_escape(&s.detail)
            )
        })
        .collect();
    format!(
        "<!doctype html><html><head><title>stornet-agent</title></head><body>\
         <h1>stornet-agent</h1><p><a href=\"/metrics\">Metrics</a></p>\
         <table><tr><th>probe</th><th>status</th><th>detail</th></tr>{rows}</table></body></html>\n"
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
