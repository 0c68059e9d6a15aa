//! The HTTP endpoint: the metrics (at `--web.telemetry-path`, in the format the client asks
//! for, see `exposition::negotiate`, gzip-compressed when it accepts that), a landing page at `/` and `/-/healthy`, on one or more addresses, over plain
//! TCP or TLS (HTTP/1.1, and HTTP/2 where TLS negotiates it), with the web config's client
//! certificates, headers, rate limit and basic auth (see `web::config`).
//!
//! Clients that ask and never read cost a bounded amount: small socket buffers, a small
//! request buffer, few HTTP/2 streams, answers sent in chunks and counted until taken
//! (`web::answer`), and a connection closed when its answer is not taken in time or when
//! the answers held together pass the budget (oldest first). Scrapes are rendered one at a
//! time per format and compression; a scraper that reads gets its answer meanwhile.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tracing::{debug, info};

use super::answer::{Answer, Budget, Held};
use super::config::WebConfig;
use super::scrape::Renders;
use super::watch::WebConfigSource;
use super::write_deadline::WriteDeadline;
use crate::agent::Agent;
use crate::exposition::{Format, negotiate};

/// A client gets this long for its TLS handshake and for each request's headers; an idle
/// kept-alive connection is closed after it too.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that reads nothing of an answer for this long is disconnected.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client gets this long to take a whole answer (HTTP/2 flow control included); its
/// connection is closed when it has not.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The unfinished answers of all connections together; past it, the connections that have
/// held theirs longest are closed to make room.
const ANSWER_BUDGET: u64 = 16 << 20;
/// A client socket's kernel buffers (the kernel doubles them): a scrape still streams at
/// LAN speed, and hundreds of clients that never read hold little.
const SEND_BUFFER: i32 = 32 << 10;
const RECEIVE_BUFFER: i32 = 16 << 10;
/// Requests an HTTP/1 connection may have read ahead, and an HTTP/2 connection's streams.
const REQUEST_BUFFER: usize = 16 << 10;
const STREAMS: u32 = 4;

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
    /// Its answers not yet taken.
    held: Arc<Held>,
    evict: oneshot::Sender<()>,
}

/// A new connection's place: its id, busy flag, holdings and eviction notice.
type Admitted = (u64, Arc<AtomicBool>, Arc<Held>, oneshot::Receiver<()>);

impl Connections {
    /// Closes connection `id` (its task drops it, and the answers it held).
    fn evict(&mut self, id: u64) -> u64 {
        match self.open.remove(&id) {
            Some(o) => {
                let _ = o.evict.send(());
                o.held.bytes()
            }
            None => 0,
        }
    }

    /// Makes room in the budget for an answer of `need` bytes of connection `me`: closes the
    /// other connections that have held an answer longest until the rest fit.
    fn make_room(&mut self, budget: &Budget, need: u64, me: u64) {
        let mut over = (budget.held() + need).saturating_sub(budget.limit);
        while over > 0 {
            let oldest = self
                .open
                .iter()
                .filter(|(id, o)| **id != me && o.held.bytes() > 0)
                .filter_map(|(id, o)| o.held.since(budget.epoch()).map(|t| (t, *id)))
                .min();
            let Some((_, id)) = oldest else { return };
            debug!(
                connection = id,
                "closed: the answers held are over the budget"
            );
            over = over.saturating_sub(self.evict(id));
        }
    }

    /// Closes the connections whose answers were not taken within [`ANSWER_TIMEOUT`].
    fn reap(&mut self, budget: &Budget) {
        let late: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, o)| {
                o.held
                    .since(budget.epoch())
                    .is_some_and(|t| t.elapsed() > ANSWER_TIMEOUT)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            debug!(connection = id, "closed: its answer was not taken in time");
            self.evict(id);
        }
    }

    /// A slot for a new connection; `None` when every open connection is inside a request.
    fn admit(&mut self) -> Option<Admitted> {
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
        let held = Arc::new(Held::default());
        let (evict, evicted) = oneshot::channel();
        self.open.insert(
            id,
            Open {
                busy: busy.clone(),
                held: held.clone(),
                evict,
            },
        );
        Some((id, busy, held, evicted))
    }
}

/// What every connection shares besides the endpoint.
struct Shared {
    endpoint: Endpoint,
    conns: Mutex<Connections>,
    budget: Arc<Budget>,
    /// The renders of each format, plain (`[format][0]`) and gzip-compressed (`[format][1]`).
    renders: [[Arc<Renders>; 2]; 3],
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
    let shared = Arc::new(Shared {
        endpoint,
        conns: Mutex::new(Connections {
            max: max_connections.max(1),
            next: 0,
            open: BTreeMap::new(),
        }),
        budget: Arc::new(Budget::new(ANSWER_BUDGET)),
        renders: Format::ALL.map(|f| [Renders::new(f, false), Renders::new(f, true)]),
    });
    let mut tasks = tokio::task::JoinSet::new();
    let reaper = shared.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            lock(&reaper.conns).reap(&reaper.budget);
        }
    });
    let endpoint = &shared.endpoint;
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
        tasks.spawn(accept_loop(listener, shared.clone()));
    }
    shutdown.await;
    tasks.abort_all();
    Ok(())
}

/// Sets a client socket's kernel buffers (see [`SEND_BUFFER`]) and turns Nagle's algorithm
/// off: an answer leaves in pieces through the small send buffer, and with Nagle its last
/// piece waits for the scraper's delayed ACK (40 ms on Linux) half the time.
fn tune(s: &tokio::net::TcpStream) {
    let _ = s.set_nodelay(true);
    use std::os::fd::AsRawFd;
    for (opt, v) in [
        (libc::SO_SNDBUF, SEND_BUFFER),
        (libc::SO_RCVBUF, RECEIVE_BUFFER),
    ] {
        // SAFETY: setsockopt with a pointer to an int of the given size, on our own socket.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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
        let Some((id, busy, held, evicted)) = lock(&shared.conns).admit() else {
            debug!(%peer, "refused: every connection is answering a request");
            continue;
        };
        tune(&stream);
        let shared = shared.clone();
        tokio::spawn(async move {
            let stream = WriteDeadline::new(stream, WRITE_TIMEOUT);
            let conn = Conn {
                id,
                peer,
                shared: shared.clone(),
                busy,
                held,
            };
            let serving = async {
                // Read per connection: a changed web config applies to the next one.
                let web = shared.endpoint.web.current().await;
                match &web.tls {
                    None => connection(stream, conn, web.clone(), false).await,
                    Some(tls) => {
                        match tokio::time::timeout(CLIENT_TIMEOUT, tls.accept(stream)).await {
                            Ok(Ok(s)) => {
                                let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
                                connection(s, conn, web.clone(), h2).await
                            }
                            Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                            Err(_) => debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
            };
            tokio::select! {
                () = serving => {}
                _ = evicted => debug!(%peer, "closed to make room"),
            }
            lock(&shared.conns).open.remove(&id);
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
        .header_read_timeout(CLIENT_TIMEOUT)
        .max_buf_size(REQUEST_BUFFER);
    b
}

/// One connection's identity and share of the server.
struct Conn {
    id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    busy: Arc<AtomicBool>,
    held: Arc<Held>,
}

async fn connection<S>(stream: S, conn: Conn, web: Arc<WebConfig>, h2: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let peer = conn.peer;
    let conn = Arc::new(conn);
    let service = service_fn(move |req| {
        let (conn, web) = (conn.clone(), web.clone());
        async move {
            let _busy = Busy::new(&conn.busy);
            let mut r = handle(req, &conn, &web).await;
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
            .max_concurrent_streams(STREAMS)
            .max_send_buf_size(REQUEST_BUFFER)
            .max_header_list_size(REQUEST_BUFFER as u32)
            .serve_connection(io, service)
            .await
    } else {
        http1().serve_connection(io, service).await
    };
    if let Err(e) = served {
        debug!(%peer, error = %e, "connection ended");
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Answer> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Answer::plain(body))
        .expect("valid response")
}

async fn handle(req: Request<Incoming>, conn: &Conn, web: &WebConfig) -> Response<Answer> {
    let endpoint = &conn.shared.endpoint;
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
    // Counted after the credentials: a client without them cannot spend the rate of those
    // with them.
    if let Some(limit) = &web.rate_limit
        && !limit.allow()
    {
        return reply(
            StatusCode::TOO_MANY_REQUESTS,
            "text/plain",
            "Too Many Requests\n",
        );
    }
    if path == endpoint.telemetry_path {
        let format = match negotiate::from_query(req.uri().query()) {
            Some(Ok(format)) => format,
            Some(Err(e)) => return reply(StatusCode::BAD_REQUEST, "text/plain", format!("{e}\n")),
            None => negotiate::from_accept(&header_values(req.headers(), hyper::header::ACCEPT)),
        };
        let gzip = super::gzip::accepted(req.headers());
        return metrics(conn, format, gzip).await;
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

/// Every value of a header, joined by commas (as HTTP allows a list header to be split).
fn header_values(headers: &hyper::HeaderMap, name: hyper::header::HeaderName) -> String {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    values.join(",")
}

/// One scrape, answered by the next render of its kind (see `web::scrape`); the answer
/// counts against the budget until the client has taken it.
async fn metrics(conn: &Conn, format: Format, gzip: bool) -> Response<Answer> {
    let shared = &conn.shared;
    let renders = &shared.renders[format as usize][usize::from(gzip)];
    let rendered = renders.get(&shared.endpoint.agent).await;
    match rendered {
        Ok(body) => {
            lock(&shared.conns).make_room(&shared.budget, body.len() as u64, conn.id);
            let body = Answer::held(body, &conn.held, &shared.budget);
            let mut r = Response::builder()
                .status(StatusCode::OK)
                .header("content-type", format.content_type())
                .body(body)
                .expect("valid response");
            if gzip {
                r.headers_mut().insert(
                    hyper::header::CONTENT_ENCODING,
                    hyper::header::HeaderValue::from_static("gzip"),
                );
            }
            r.headers_mut().insert(
                hyper::header::VARY,
                hyper::header::HeaderValue::from_static("Accept, Accept-Encoding"),
            );
            r
        }
        Err(e) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("{e}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn option(s: &tokio::net::TcpStream, level: i32, name: i32) -> i32 {
        let mut v: i32 = 0;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: getsockopt into an int of the given size, on a socket this test owns.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                level,
                name,
                &mut v as *mut i32 as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt {name}");
        v
    }

    #[tokio::test]
    async fn a_client_socket_sends_without_nagle_through_small_buffers() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        assert_eq!(option(&stream, libc::IPPROTO_TCP, libc::TCP_NODELAY), 0);
        tune(&stream);
        assert_ne!(option(&stream, libc::IPPROTO_TCP, libc::TCP_NODELAY), 0);
        // The kernel doubles what it is given.
        assert_eq!(
            option(&stream, libc::SOL_SOCKET, libc::SO_SNDBUF),
            2 * SEND_BUFFER
        );
        assert_eq!(
            option(&stream, libc::SOL_SOCKET, libc::SO_RCVBUF),
            2 * RECEIVE_BUFFER
        );
    }
}
