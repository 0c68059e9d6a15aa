//! The HTTP endpoint: `/metrics`, `/` and `/-/healthy`, over plain TCP or TLS, optionally
//! behind basic auth (see `web_config`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
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
use tracing::{debug, info};

use crate::agent::Agent;
use crate::exporter;
use crate::web_config::WebConfig;

const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A client gets this long for its TLS handshake and for each request's headers.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Serves until the future `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    agent: Arc<Agent>,
    web: WebConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    info!(
        address = %listener.local_addr()?,
        tls = web.tls.is_some(),
        basic_auth = web.auth.is_some(),
        "serving metrics at /metrics"
    );
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
        let agent = agent.clone();
        let web = web.clone();
        tokio::spawn(async move {
            match &web.tls {
                None => connection(stream, peer, agent, web.clone()).await,
                Some(tls) => match tokio::time::timeout(CLIENT_TIMEOUT, tls.accept(stream)).await {
                    Ok(Ok(s)) => connection(s, peer, agent, web.clone()).await,
                    Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
            }
        });
    }
}

async fn connection<S>(stream: S, peer: SocketAddr, agent: Arc<Agent>, web: WebConfig)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| handle(req, agent.clone(), web.clone()));
    if let Err(e) = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(CLIENT_TIMEOUT)
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
        // bcrypt takes milliseconds of CPU: off the async workers.
        let allowed = tokio::task::spawn_blocking(move || auth.allows(header.as_deref()))
            .await
            .unwrap_or(false);
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
