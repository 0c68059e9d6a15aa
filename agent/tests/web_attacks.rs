//! The agent's HTTP endpoint as an attacker meets it: a web config caught in the middle of
//! an in-place rewrite never switches TLS or basic auth off, a FIFO named in it never stalls
//! the agent, and requests without credentials cannot spend the rate limit of those with
//! them. None of this needs root; all traffic stays on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::fs::TempDir;
use stornet_lab::metrics::basic_auth;
use stornet_lab::tls::{TestPki, https_get, https_get_as};

const BIN: &str = env!("CARGO_BIN_EXE_stornet-agent");

fn launch(args: &[&str]) -> AgentProcess {
    AgentProcess::launch(&Launch {
        bin: Some(BIN.into()),
        args,
        ..Default::default()
    })
    .expect("agent starts")
}

/// The status of one plain-HTTP GET, if any answer came.
fn plain_status(addr: SocketAddr, path: &str, auth: Option<&str>) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// An operator rewrites the web config in place (as `cp` or an editor does: truncate, then
/// write), again and again, while clients without TLS and without credentials try to get
/// the metrics: the file is empty or cut short for moments, and not one of them gets in.
#[test]
fn a_web_config_rewritten_in_place_never_lets_a_client_in_without_it() {
    let dir = TempDir::new("rewrite").unwrap();
    let pki = TestPki::generate("rewrite").unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let text = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prom: '{hash}'\n",
        pki.cert_file.display(),
        pki.key_file.display()
    );
    let web = dir.file("web.yml", &text);
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    let (addr, ca) = (a.addr, pki.ca_pem.clone());
    a.wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let rewrites = {
        let (stop, web, text) = (stop.clone(), web.clone(), text.clone());
        std::thread::spawn(move || {
            let cut = text.find("basic_auth_users").unwrap() + "basic_auth_users:".len();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let mut f = std::fs::File::create(&web).unwrap();
                std::thread::sleep(Duration::from_millis(if n.is_multiple_of(8) {
                    30
                } else {
                    3
                }));
                // Cut short: TLS, and the users' key with no user under it.
                f.write_all(&text.as_bytes()[..cut]).unwrap();
                f.flush().unwrap();
                std::thread::sleep(Duration::from_millis(5));
                f.write_all(&text.as_bytes()[cut..]).unwrap();
                drop(f);
                std::thread::sleep(Duration::from_millis(5));
                n += 1;
            }
            n
        })
    };
    let plain_in = Arc::new(AtomicU32::new(0));
    let tls_in = Arc::new(AtomicU32::new(0));
    let tries = Arc::new(AtomicU32::new(0));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let (stop, plain_in, tls_in, tries, ca) = (
                stop.clone(),
                plain_in.clone(),
                tls_in.clone(),
                tries.clone(),
                ca.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    tries.fetch_add(1, Ordering::Relaxed);
                    if i % 2 == 0 {
                        if plain_status(addr, "/metrics", None) == Some(200) {
                            plain_in.fetch_add(1, Ordering::Relaxed);
                        }
                    } else if matches!(https_get(addr, "/metrics", &ca, &[]), Ok((200, _))) {
                        tls_in.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let n = rewrites.join().unwrap();
    for c in clients {
        c.join().unwrap();
    }
    let (plain, tls) = (
        plain_in.load(Ordering::Relaxed),
        tls_in.load(Ordering::Relaxed),
    );
    eprintln!(
        "{n} rewrites, {} tries: {plain} plain and {tls} TLS scrapes without credentials answered",
        tries.load(Ordering::Relaxed)
    );
    assert!(n > 20, "only {n} rewrites");
    assert_eq!(
        (plain, tls),
        (0, 0),
        "clients got in without TLS or credentials"
    );
    let auth = basic_auth("prom", "s3cret");
    let (code, _) = https_get(addr, "/metrics", &pki.ca_pem, &[("Authorization", &auth)]).unwrap();
    assert_eq!(code, 200, "the config stays in force");
}

/// A FIFO named as the certificate in a re-read web config is refused like any file that
/// is not a regular file; the agent keeps serving with the last good config.
#[test]
fn a_fifo_in_the_web_config_does_not_stall_the_agent() {
    let dir = TempDir::new("fifo").unwrap();
    let pki = TestPki::generate("fifo").unwrap();
    let good = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        pki.cert_file.display(),
        pki.key_file.display()
    );
    let web = dir.file("web.yml", &good);
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    let (addr, ca) = (a.addr, pki.ca_pem.clone());
    a.wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();
    let fifo = dir.path.join("cert.fifo");
    mkfifo(&fifo);
    let bad = dir.file(
        "web.new",
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            fifo.display(),
            pki.key_file.display()
        ),
    );
    std::fs::rename(&bad, &web).unwrap();
    for i in 0..5 {
        let t = Instant::now();
        let r = https_get_as(addr, "/metrics", &pki.ca_pem, None, &[]);
        assert!(
            matches!(r, Ok((200, _))),
            "scrape {i} after {:?}: {r:?}",
            t.elapsed()
        );
    }
    let log = a.log();
    assert!(
        log.contains("web config not reloaded") && log.contains("not a regular file"),
        "{log}"
    );
}

/// The rate limit counts the requests of clients that may be answered: a flood without
/// credentials (each answered 401) leaves the tokens to the scraper with them.
#[test]
fn requests_without_credentials_do_not_spend_the_rate_limit() {
    let dir = TempDir::new("ratelimit").unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.file(
        "web.yml",
        &format!("rate_limit:\n  interval: 1h\n  burst: 3\nbasic_auth_users:\n  prom: '{hash}'\n"),
    );
    let a = launch(&[&format!("--web.config.file={}", web.display())]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !a.log().contains("serving metrics") {
        assert!(Instant::now() < deadline, "not serving: {}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let flood: Vec<Option<u16>> = (0..20)
        .map(|_| plain_status(a.addr, "/metrics", None))
        .collect();
    assert!(flood.iter().all(|c| *c == Some(401)), "{flood:?}");
    let auth = basic_auth("prom", "s3cret");
    let codes: Vec<Option<u16>> = (0..4)
        .map(|_| plain_status(a.addr, "/metrics", Some(&auth)))
        .collect();
    assert_eq!(codes, [Some(200), Some(200), Some(200), Some(429)]);
}
