//! The agent's HTTP endpoint as a Prometheus server and an operator meet it, with the web
//! config of node_exporter: mutual TLS, certificate rotation, HTTP/2, headers, rate limit,
//! gzip, the telemetry path, several listen addresses, the landing page. None of this needs
//! root. All traffic stays on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use stornet_lab::agent::{AgentProcess, Launch, free_port};
use stornet_lab::fs::TempDir;
use stornet_lab::metrics::{basic_auth, http_get};
use stornet_lab::tls::{TestPki, https_get, https_get_as, tls_connect};

const BIN: &str = env!("CARGO_BIN_EXE_stornet-agent");

fn launch(args: &[&str]) -> AgentProcess {
    AgentProcess::launch(&Launch {
        bin: Some(BIN.into()),
        args,
        ..Default::default()
    })
    .expect("agent starts")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// One GET over plain HTTP/1.1: (status, headers in lower case, raw body).
fn raw_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // By hand: the test reads the raw headers and the body as sent (gzip).
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let hs = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (code, hs, raw[end + 4..].to_vec())
}

fn header<'a>(hs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    hs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn wait_https(a: &mut AgentProcess, ca: &str, client: Option<&stornet_lab::tls::ClientCert>) {
    let addr = a.addr;
    let ca = ca.to_string();
    a.wait_until(|| https_get_as(addr, "/-/healthy", &ca, client, &[]).is_ok())
        .unwrap();
}

#[test]
fn mutual_tls_admits_only_clients_signed_by_the_client_ca() {
    let dir = TempDir::new("mtls").unwrap();
    let server = TestPki::generate("mtls-server").unwrap();
    let clients = TestPki::generate("mtls-clients").unwrap();
    let strangers = TestPki::generate("mtls-strangers").unwrap();
    let web = dir.file(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_ca_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  client_allowed_sans: [scraper.example, 198.18.0.9]\n",
            server.cert_file.display(),
            server.key_file.display(),
            clients.ca_file.display()
        ),
    );
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    let good = clients.client("scraper.example").unwrap();
    wait_https(&mut a, &server.ca_pem, Some(&good));
    let (addr, ca) = (a.addr, server.ca_pem.as_str());

    let (code, body) = https_get_as(addr, "/metrics", ca, Some(&good), &[]).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("stornet_agent_build_info"), "{body}");
    let by_ip = clients.client("198.18.0.9").unwrap();
    assert_eq!(
        https_get_as(addr, "/metrics", ca, Some(&by_ip), &[])
            .unwrap()
            .0,
        200
    );
    // Signed by another CA, with an allowed name: refused.
    let forged = strangers.client("scraper.example").unwrap();
    assert!(https_get_as(addr, "/metrics", ca, Some(&forged), &[]).is_err());
    // Signed by the client CA, but a name that is not allowed: refused.
    let other = clients.client("intruder.example").unwrap();
    assert!(https_get_as(addr, "/metrics", ca, Some(&other), &[]).is_err());
    // No certificate at all: refused.
    assert!(https_get(addr, "/metrics", ca, &[]).is_err());
    assert!(a.log().contains("serving metrics"));
}

#[test]
fn verify_if_given_admits_clients_without_a_certificate_but_not_with_a_bad_one() {
    let dir = TempDir::new("ifgiven").unwrap();
    let server = TestPki::generate("ifgiven-server").unwrap();
    let strangers = TestPki::generate("ifgiven-strangers").unwrap();
    let web = dir.file(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_ca_file: {}\n  client_auth_type: VerifyClientCertIfGiven\n",
            server.cert_file.display(),
            server.key_file.display(),
            server.ca_file.display()
        ),
    );
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    wait_https(&mut a, &server.ca_pem, None);
    let (addr, ca) = (a.addr, server.ca_pem.as_str());
    assert_eq!(https_get(addr, "/metrics", ca, &[]).unwrap().0, 200);
    let own = server.client("scraper.example").unwrap();
    assert_eq!(
        https_get_as(addr, "/metrics", ca, Some(&own), &[])
            .unwrap()
            .0,
        200
    );
    let forged = strangers.client("scraper.example").unwrap();
    assert!(https_get_as(addr, "/metrics", ca, Some(&forged), &[]).is_err());
}

#[test]
fn certificates_rotate_without_a_restart_and_a_bad_file_keeps_the_last_good_one() {
    let dir = TempDir::new("rotate").unwrap();
    let old = TestPki::generate("rotate-old").unwrap();
    let new = TestPki::generate("rotate-new").unwrap();
    let (cert, key) = (dir.path.join("server.crt"), dir.path.join("server.key"));
    std::fs::copy(&old.cert_file, &cert).unwrap();
    std::fs::copy(&old.key_file, &key).unwrap();
    let web = dir.file(
        "web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    wait_https(&mut a, &old.ca_pem, None);
    let addr = a.addr;
    assert!(https_get(addr, "/metrics", &new.ca_pem, &[]).is_err());

    // Rotate as an operator's tooling does: new files moved into place.
    for (from, to) in [(&new.cert_file, &cert), (&new.key_file, &key)] {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
    assert_eq!(
        https_get(addr, "/metrics", &new.ca_pem, &[]).unwrap().0,
        200
    );
    assert!(https_get(addr, "/metrics", &old.ca_pem, &[]).is_err());

    // An invalid file at re-read: logged, and the last good config stays in force.
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.crt\n  key_fil: x\n",
    )
    .unwrap();
    assert_eq!(
        https_get(addr, "/metrics", &new.ca_pem, &[]).unwrap().0,
        200
    );
    assert_eq!(
        https_get(addr, "/-/healthy", &new.ca_pem, &[]).unwrap().0,
        200
    );
    let log = a.log();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("web config not reloaded") && l.contains("key_fil") && l.contains("line 3")
        })
        .collect();
    assert_eq!(errors.len(), 1, "logged once: {log}");
    // A valid file that turns TLS off is not applied while the agent runs (fails closed:
    // an empty file, or one cut short in a rewrite, reads as exactly that).
    std::fs::write(&web, "basic_auth_users: {}\n").unwrap();
    assert_eq!(
        https_get(addr, "/-/healthy", &new.ca_pem, &[]).unwrap().0,
        200
    );
    assert!(http_get(addr, "/-/healthy").is_err(), "no plain HTTP");
    assert!(
        a.log()
            .lines()
            .any(|l| l.contains("web config not reloaded") && l.contains("turns TLS off")),
        "{}",
        a.log()
    );
}

#[test]
fn http2_is_offered_over_tls_unless_the_web_config_turns_it_off() {
    let dir = TempDir::new("h2").unwrap();
    let pki = TestPki::generate("h2").unwrap();
    let base = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        pki.cert_file.display(),
        pki.key_file.display()
    );
    for (http2, want) in [
        (None, Some(&b"h2"[..])),
        (Some(false), Some(&b"http/1.1"[..])),
    ] {
        let text = match http2 {
            None => base.clone(),
            Some(v) => format!("{base}http_server_config:\n  http2: {v}\n"),
        };
        let web = dir.file("web.yml", &text);
        let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
        wait_https(&mut a, &pki.ca_pem, None);
        let mut tls = tls_connect(a.addr, &pki.ca_pem, None, &[b"h2", b"http/1.1"]).unwrap();
        assert_eq!(tls.conn.alpn_protocol(), want);
        if want == Some(b"h2") {
            // The client preface and an empty SETTINGS frame; an HTTP/2 server answers with
            // its own SETTINGS frame (type 4).
            tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
                .unwrap();
            let mut frame = [0u8; 9];
            tls.read_exact(&mut frame).unwrap();
            assert_eq!(frame[3], 4, "{frame:?}");
        }
    }
}

#[test]
fn headers_rate_limit_and_paths_excluded_from_basic_auth() {
    let dir = TempDir::new("headers").unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = dir.file(
        "web.yml",
        &format!(
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: default-src 'self'\n\
             rate_limit:\n  interval: 1h\n  burst: 6\n\
             basic_auth_users:\n  prom: '{hash}'\n\
             basic_auth_excluded_paths: [/-/healthy]\n"
        ),
    );
    let a = launch(&[&format!("--web.config.file={}", web.display())]);
    let addr = a.addr;
    // Waited for through the log: every request takes a token.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !a.log().contains("serving metrics") {
        assert!(Instant::now() < deadline, "not serving: {}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let auth = basic_auth("prom", "s3cret");
    let (code, hs, _) = raw_get(addr, "/metrics", &[]);
    assert_eq!(code, 401);
    assert_eq!(header(&hs, "x-frame-options"), Some("deny"));
    let (code, hs, body) = raw_get(addr, "/metrics", &[("Authorization", &auth)]);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        header(&hs, "content-security-policy"),
        Some("default-src 'self'")
    );
    // Excluded from basic auth; 6 requests a burst, one more an hour: one was made above
    // (the one refused for lack of credentials spent nothing).
    let codes: Vec<u16> = (0..6).map(|_| raw_get(addr, "/-/healthy", &[]).0).collect();
    assert_eq!(codes, [200, 200, 200, 200, 200, 429]);
}

#[test]
fn telemetry_path_listen_addresses_gzip_and_landing_page() {
    let second: SocketAddr = format!("127.0.0.1:{}", free_port().unwrap())
        .parse()
        .unwrap();
    let mut a = launch(&[
        "--web.telemetry-path=/stornet/metrics",
        &format!("--web.listen-address={second}"),
    ]);
    a.wait_healthy().unwrap();
    for addr in [a.addr, second] {
        let (code, hs, body) = raw_get(addr, "/stornet/metrics", &[]);
        assert_eq!(code, 200);
        assert_eq!(header(&hs, "content-encoding"), None);
        let text = String::from_utf8(body).unwrap();
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter"),
            "{text}"
        );
        assert_eq!(raw_get(addr, "/metrics", &[]).0, 404);
    }
    let (code, hs, body) = raw_get(a.addr, "/stornet/metrics", &[("Accept-Encoding", "gzip")]);
    assert_eq!(code, 200);
    assert_eq!(header(&hs, "content-encoding"), Some("gzip"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.contains("stornet_agent_build_info{"), "{text}");
    assert!(
        text.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let (code, _, body) = raw_get(a.addr, "/", &[]);
    assert_eq!(code, 200);
    let page = String::from_utf8(body).unwrap();
    assert!(page.contains("stornet-agent"), "{page}");
    assert!(page.contains(env!("CARGO_PKG_VERSION")), "{page}");
    assert!(page.contains("href=\"/stornet/metrics\""), "{page}");
    assert!(page.contains("href=\"/-/healthy\""), "{page}");
}

#[test]
fn a_node_exporter_web_config_with_everything_works_unchanged() {
    let pki = TestPki::generate("full").unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let web = pki.dir.join("web-config.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequestClientCert
  min_version: TLS12
  max_version: TLS13
  cipher_suites:
    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
  prefer_server_cipher_suites: true
  curve_preferences: [X25519, CurveP256]
http_server_config:
  http2: true
  headers:
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  prometheus: '{hash}'
"
        ),
    )
    .unwrap();
    let mut a = launch(&[&format!("--web.config.file={}", web.display())]);
    wait_https(&mut a, &pki.ca_pem, None);
    let auth = basic_auth("prometheus", "s3cret");
    let (code, body) =
        https_get(a.addr, "/metrics", &pki.ca_pem, &[("Authorization", &auth)]).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("stornet_probe_up"), "{body}");
}

/// Exit 2 and one line on stderr containing every needle.
fn assert_usage_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    for n in needles {
        assert!(err.contains(n), "{n:?} missing in {err:?}");
    }
}

#[test]
fn web_config_settings_rustls_cannot_honour_exit_2() {
    let pki = TestPki::generate("refuse").unwrap();
    let base = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        pki.cert_file.display(),
        pki.key_file.display()
    );
    let dir = TempDir::new("refuse").unwrap();
    for (i, (extra, needles)) in [
        (
            "  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
            &["TLS_RSA_WITH_AES_128_CBC_SHA", "not supported", "line 4"][..],
        ),
        (
            "  curve_preferences: [CurveP521]\n",
            &["CurveP521", "line 4"][..],
        ),
        ("  max_version: TLS11\n", &["max_version", "TLS11"][..]),
        (
            "  client_auth_type: RequireAndVerifyClientCert\n",
            &["client_ca_file"][..],
        ),
        (
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nothere.pem\n",
            &["client_ca_file", "nothere.pem"][..],
        ),
        ("  ciphers: []\n", &["ciphers", "line 4"][..]),
    ]
    .into_iter()
    .enumerate()
    {
        let web = dir.file(&format!("web{i}.yml"), &format!("{base}{extra}"));
        let out = run(&[&format!("--web.config.file={}", web.display())]);
        let mut n = needles.to_vec();
        let path = web.display().to_string();
        n.push(&path);
        assert_usage_error(&out, &n);
    }
}

#[test]
fn bad_web_flags_exit_2() {
    assert_usage_error(
        &run(&["--web.telemetry-path=metrics"]),
        &["--web.telemetry-path"],
    );
    let port = free_port().unwrap();
    let taken = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let out = run(&[
        "--web.listen-address=127.0.0.1:0",
        &format!("--web.listen-address=127.0.0.1:{port}"),
    ]);
    assert_usage_error(&out, &["--web.listen-address", &port.to_string()]);
    drop(taken);
}
