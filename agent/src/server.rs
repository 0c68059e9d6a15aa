//! The HTTP endpoint: `/metrics`, `/` and `/-/healthy`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::agent::Agent;
use crate::exporter;

const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Serves until the future `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    agent: Arc<Agent>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    info!(address = %listener.local_addr()?, "serving metrics at /metrics");
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => return Ok(()),
        };
        let agent = agent.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(req, agent.clone()));
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "connection ended");
            }
        });
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
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match req.uri().path() {
        "/metrics" => {
            let families = tokio::task::spawn_blocking(move || agent.gather())
                .await
                .unwrap_or_default();
            match exporter::render(&families) {
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
                s.name,
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
