//! The agent, with its probes, in a memory group as small as its packaged unit allows
//! (`MemoryMax=128M`), against clients that ask and never read: HTTP/1 clients that pipeline
//! scrapes, and HTTP/2 clients whose streams have no flow-control window. The agent stays
//! up, inside its memory, and answers a scraper all the while.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use promclient::{Client, ClientConfig, Scheme, Url};
use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::cgroup::MemoryCgroup;
use stornet_lab::fs::TempDir;
use stornet_lab::metrics::http_get;
use stornet_lab::privilege::require_root;
use stornet_lab::tls::{TestPki, https_get, tls_connect};

const LIMIT: u64 = 128 << 20;
/// What the attacks may add to the agent's memory: its answer budget and the connections'
/// buffers, with room to spare.
const GROWTH: u64 = 24 << 20;
/// Prometheus's default scrape timeout.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

fn scrape(client: &Client, url: &Url) -> Option<u16> {
    client
        .get(url, "/metrics", &[], SCRAPE_TIMEOUT, 256 << 20)
        .ok()
        .map(|r| r.status)
}

/// The agent in `group` (a shell joins it, then becomes the agent).
fn agent_in(group: &MemoryCgroup, args: &[&str]) -> AgentProcess {
    let join = format!("echo $$ > {} && exec \"$@\"", group.procs().display());
    let wrapper = ["sh", "-c", join.as_str(), "sh"];
    AgentProcess::launch(&Launch {
        wrapper: &wrapper,
        args,
        ..Default::default()
    })
    .expect("agent starts")
}

/// Scrapes every 300 ms while `attack` runs; returns how many of 17 were answered 200, and
/// the most memory `group` held meanwhile.
fn scrapes_during(
    group: &MemoryCgroup,
    scrape: impl Fn() -> Option<u16>,
    attack: impl FnOnce(Arc<AtomicBool>) + Send,
) -> (u32, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let exact = group.reset_peak();
    std::thread::scope(|s| {
        let attacking = s.spawn({
            let stop = stop.clone();
            move || attack(stop)
        });
        let sampling = s.spawn({
            let stop = stop.clone();
            move || {
                let mut most = 0;
                while !stop.load(Ordering::Relaxed) {
                    most = most.max(group.current().unwrap_or(0));
                    std::thread::sleep(Duration::from_millis(50));
                }
                most
            }
        });
        std::thread::sleep(Duration::from_secs(1));
        let mut answered = 0;
        for _ in 0..17 {
            if scrape() == Some(200) {
                answered += 1;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        stop.store(true, Ordering::Relaxed);
        attacking.join().unwrap();
        let sampled = sampling.join().unwrap();
        let peak = if exact {
            sampled.max(group.peak().unwrap_or(0))
        } else {
            sampled
        };
        (answered, peak)
    })
}

/// 600 connections that each pipeline 64 scrapes and never read an answer.
fn pipeliners(addr: SocketAddr, stop: Arc<AtomicBool>) {
    let request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(64);
    let mut held = Vec::new();
    for _ in 0..600 {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = s.write_all(request.as_bytes());
            held.push(s);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// 40 HTTP/2 connections, each with its streams' window at 0 and 100 scrapes asked for.
fn zero_windows(addr: SocketAddr, ca: &str, stop: Arc<AtomicBool>) {
    // HPACK: :method GET, :scheme https (static table), :path and :authority as literals.
    let mut headers = vec![0x82, 0x87, 0x04, 8];
    headers.extend_from_slice(b"/metrics");
    headers.extend([0x01, 9]);
    headers.extend_from_slice(b"127.0.0.1");
    let mut held = Vec::new();
    for _ in 0..40 {
        let Ok(mut t) = tls_connect(addr, ca, None, &[b"h2"]) else {
            continue;
        };
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // SETTINGS: INITIAL_WINDOW_SIZE (4) = 0.
        out.extend(frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]));
        for i in 0..100u32 {
            // HEADERS with END_STREAM | END_HEADERS.
            out.extend(frame(1, 0x5, 2 * i + 1, &headers));
        }
        let _ = t.sock.set_write_timeout(Some(Duration::from_millis(500)));
        let _ = t.write_all(&out);
        // The server's SETTINGS, acknowledged; nothing is read after that.
        let mut first = [0u8; 9];
        if t.read_exact(&mut first).is_ok() {
            let len = u32::from_be_bytes([0, first[0], first[1], first[2]]) as usize;
            let mut rest = vec![0u8; len];
            let _ = t.read_exact(&mut rest);
            let _ = t.write_all(&frame(4, 1, 0, &[]));
        }
        held.push(t);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn agent_clients_that_never_read_stay_within_its_memory() {
    if !require_root("agent_clients_that_never_read_stay_within_its_memory") {
        return;
    }
    // HTTP/1, plain.
    let group = MemoryCgroup::new("web-h1", LIMIT).unwrap();
    let mut a = agent_in(&group, &[]);
    let addr = a.addr;
    a.wait_until(|| matches!(http_get(addr, "/metrics"), Ok((200, _))))
        .unwrap();
    let base = group.current().unwrap();
    let (client, url) = (Client::default(), Url::of(Scheme::Http, addr));
    let t = Instant::now();
    let (answered, peak) = scrapes_during(
        &group,
        || scrape(&client, &url),
        |stop| pipeliners(addr, stop),
    );
    let kills = group.oom_kills().unwrap();
    let alive = a.child.try_wait().unwrap().is_none();
    eprintln!(
        "HTTP/1: {answered} of 17 scrapes answered in {:?}, {} MiB before, peak {} MiB",
        t.elapsed(),
        base >> 20,
        peak >> 20
    );
    let h1 = (alive, kills, answered, a.log(), peak.saturating_sub(base));
    drop(a);

    // HTTP/2 over TLS.
    let dir = TempDir::new("web-h2").unwrap();
    let pki = TestPki::generate("web-h2").unwrap();
    let web = dir.file(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            pki.cert_file.display(),
            pki.key_file.display()
        ),
    );
    let group = MemoryCgroup::new("web-h2", LIMIT).unwrap();
    let mut a = agent_in(&group, &[&format!("--web.config.file={}", web.display())]);
    let (addr, ca) = (a.addr, pki.ca_pem.clone());
    a.wait_until(|| matches!(https_get(addr, "/metrics", &ca, &[]), Ok((200, _))))
        .unwrap();
    let base = group.current().unwrap();
    let client = Client::new(&ClientConfig::trusting(ca.as_bytes()).unwrap());
    let url = Url::of(Scheme::Https, addr);
    let t = Instant::now();
    let (answered, peak) = scrapes_during(
        &group,
        || scrape(&client, &url),
        |stop| zero_windows(addr, &ca, stop),
    );
    let kills = group.oom_kills().unwrap();
    let alive = a.child.try_wait().unwrap().is_none();
    eprintln!(
        "HTTP/2: {answered} of 17 scrapes answered in {:?}, {} MiB before, peak {} MiB",
        t.elapsed(),
        base >> 20,
        peak >> 20
    );
    assert!(h1.0 && h1.1 == 0, "HTTP/1: the agent was killed: {}", h1.3);
    assert_eq!(
        h1.2, 17,
        "HTTP/1: scrapes answered while 600 clients held on"
    );
    assert!(
        h1.4 < GROWTH,
        "HTTP/1: the agent grew by {} MiB",
        h1.4 >> 20
    );
    assert!(
        alive && kills == 0,
        "HTTP/2: the agent was killed: {}",
        a.log()
    );
    assert_eq!(
        answered, 17,
        "HTTP/2: scrapes answered while 40 connections held 4000 streams"
    );
    let grown = peak.saturating_sub(base);
    assert!(
        grown < GROWTH,
        "HTTP/2: the agent grew by {} MiB",
        grown >> 20
    );
}
