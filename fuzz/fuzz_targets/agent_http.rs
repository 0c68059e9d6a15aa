//! Bytes from a client on the agent's port: HTTP/1 parsing with the agent's settings, then
//! its basic-auth check of the Authorization header and its choice of format from the
//! Accept header and the query, as the server runs them.
#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::TokioIo;
use libfuzzer_sys::fuzz_target;
use stornet_agent::exposition::negotiate;
use stornet_agent::web::auth::BasicAuth;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn auth() -> Arc<BasicAuth> {
    static AUTH: OnceLock<Arc<BasicAuth>> = OnceLock::new();
    AUTH.get_or_init(|| {
        let users = [("prom".to_string(), bcrypt::hash("s3cret", 4).unwrap())];
        Arc::new(BasicAuth::new(users.into_iter().collect()))
    })
    .clone()
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let allowed = auth().allows(header).await;
    let accept: Vec<&str> = req
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let format = negotiate::from_query(req.uri().query())
        .unwrap_or_else(|| Ok(negotiate::from_accept(&accept.join(","))));
    let body = format!("{allowed} {format:?} {}", req.uri().path());
    Ok(Response::new(Full::new(Bytes::from(body))))
}

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn(async move {
            let service = hyper::service::service_fn(answer);
            let _ = stornet_agent::web::server::http1()
                .serve_connection(TokioIo::new(server), service)
                .await;
        });
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let _ = client.read_to_end(&mut out).await;
        let _ = serving.await;
    });
});
