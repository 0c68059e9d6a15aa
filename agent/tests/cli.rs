//! The agent binary from the outside, as an operator meets it: flags, files, logs, systemd
//! notifications, subcommands, TLS and basic auth. None of this needs root (as root the
//! probes attach as well).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::fs::TempDir;
use stornet_lab::metrics::{basic_auth, http_get};
use stornet_lab::tls::{TestPki, https_get};

const BIN: &str = env!("CARGO_BIN_EXE_stornet-agent");

fn agent(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("running stornet-agent")
}

/// Exit code 2, and stderr is exactly one line that contains every `needle`.
fn assert_usage_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {err:?}");
    assert!(lines[0].starts_with("stornet-agent: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} missing in {err:?}");
    }
    // The one line is the error itself: no log line, so no probe was loaded.
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    assert_usage_error(&agent(&["--bogus"]), &["--bogus"]);
    assert_usage_error(&agent(&["--log.level=loud"]), &["--log.level", "loud"]);
    assert_usage_error(&agent(&["--log.format=xml"]), &["--log.format"]);
    assert_usage_error(
        &agent(&["snapshot", "--interval=5x"]),
        &["--interval", "unit"],
    );
    // Past what a Duration holds: an error, not a panic.
    assert_usage_error(
        &agent(&["snapshot", "--interval=99999999999999999999h"]),
        &["--interval", "too long"],
    );
    assert_usage_error(
        &agent(&["--web.max-connections=0"]),
        &["--web.max-connections"],
    );
    assert_usage_error(
        &agent(&["--web.listen-address=nonsense"]),
        &["--web.listen-address", "nonsense"],
    );
    assert_usage_error(
        &agent(&["--web.listen-address=:99999"]),
        &["--web.listen-address", "port"],
    );
    // An address this host does not have.
    assert_usage_error(
        &agent(&["--web.listen-address=192.0.2.1:9477"]),
        &["--web.listen-address", "cannot listen on 192.0.2.1:9477"],
    );
    // A port that is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_usage_error(
        &agent(&[&format!("--web.listen-address={addr}")]),
        &["cannot listen on", &addr],
    );
    assert_usage_error(
        &agent(&["--config.file=/nonexistent/stornet.toml"]),
        &["/nonexistent/stornet.toml"],
    );
    // Read whole, /dev/zero would run until memory ran out.
    for flag in ["--config.file", "--web.config.file"] {
        assert_usage_error(
            &agent(&[&format!("{flag}=/dev/zero")]),
            &["/dev/zero", "is a character device, not a file"],
        );
    }
    let dir = TempDir::new("bigconfig").unwrap();
    let big = dir.file("big.toml", &"# padding\n".repeat(200_000));
    assert_usage_error(
        &agent(&[&format!("--config.file={}", big.display())]),
        &["big.toml", "2000000 bytes, more than the 1048576 allowed"],
    );
}

#[test]
fn bad_config_files_exit_2_naming_key_and_line() {
    let dir = TempDir::new("config").unwrap();
    let cases: &[(&str, &[&str])] = &[
        // Unknown key.
        (
            "[net]\nmax_peers = 8\nmax_peer = 8\n",
            &["line 3", "net.max_peer"],
        ),
        // Unknown section.
        ("\n[blocks]\n", &["line 2", "blocks"]),
        // Wrong type.
        (
            "[block]\nmax_devices = \"lots\"\n",
            &["line 2", "block.max_devices"],
        ),
        // Wrong enum value.
        (
            "[block]\nhistogram = \"medium\"\n",
            &["line 2", "block.histogram"],
        ),
        // Bad glob pattern, on the line of the pattern.
        (
            "[block]\ndevices_exclude = [\n  \"ram*\",\n  \"sd[\",\n]\n",
            &["line 4", "block.devices_exclude", "sd["],
        ),
        // Unknown probe name.
        (
            "[probes]\ndisable = [\"block_complete\"]\n",
            &["line 2", "probes.disable", "block_complete"],
        ),
        // TOML syntax.
        ("[net]\nmax_peers = = 1\n", &["line 2"]),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let path = dir.file(&format!("bad{i}.toml"), text);
        let out = agent(&[&format!("--config.file={}", path.display())]);
        let mut all = needles.to_vec();
        let shown = path.display().to_string();
        all.push(&shown);
        assert_usage_error(&out, &all);
        // The subcommands read the same file the same way.
        let out = agent(&["check", &format!("--config.file={}", path.display())]);
        assert_usage_error(&out, needles);
    }
}

#[test]
fn bad_web_config_exits_2() {
    let dir = TempDir::new("webcfg").unwrap();
    let hash = bcrypt::hash("pw", 4).unwrap();
    let pki = TestPki::generate("webcfg").unwrap();
    dir.file(
        "enc.key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            "tls_server_config:\n  cert_file: a.crt\n  key_fil: a.key\n".into(),
            vec!["key_fil".into(), "line 3".into()],
        ),
        (
            "basic_auth_users:\n  prom: not-a-hash\n".into(),
            vec!["basic_auth_users.prom".into()],
        ),
        (
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n".into(),
            vec!["cert_file".into(), "missing.crt".into()],
        ),
        (
            format!("basic_auth_users: [{hash}]\n"),
            vec!["basic_auth_users".into()],
        ),
        (
            "tls_server_config:\n  cert_file: /dev/zero\n  key_file: /dev/zero\n".into(),
            vec!["cert_file /dev/zero".into(), "character device".into()],
        ),
        (
            format!(
                "tls_server_config:\n  cert_file: {}\n  key_file: enc.key\n",
                pki.cert_file.display()
            ),
            vec!["key_file".into(), "enc.key".into(), "encrypted".into()],
        ),
        // bcrypt's highest cost: checking one password would take days, so refused at load.
        (
            format!(
                "basic_auth_users:\n  prom: '{}'\n",
                hash.replacen("$04$", "$31$", 1)
            ),
            vec!["basic_auth_users.prom".into(), "cost 31".into()],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let path = dir.file(&format!("web{i}.yml"), text);
        let out = agent(&[&format!("--web.config.file={}", path.display())]);
        let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
        assert_usage_error(&out, &needles);
    }
}

#[test]
fn help_and_version_exit_0() {
    let out = agent(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--web.listen-address",
        "--web.config.file",
        "--config.file",
        "--log.level",
        "--log.format",
        "check",
        "snapshot",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
    let out = agent(&["--version"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}

fn launch(args: &[&str], env: &[(&str, &str)]) -> AgentProcess {
    AgentProcess::launch(&Launch {
        bin: Some(BIN.into()),
        args,
        env,
        ..Default::default()
    })
    .expect("agent starts")
}

/// Reads datagrams until one equals `want` or `timeout` passes.
fn expect_datagram(sock: &UnixDatagram, want: &str, timeout: Duration) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            let hit = msg.lines().any(|l| l == want);
            seen.push(msg);
            if hit {
                return seen;
            }
        }
    }
    panic!("no {want:?} within {timeout:?}; got {seen:?}");
}

#[test]
fn tells_systemd_ready_watchdog_and_stopping() {
    let dir = TempDir::new("notify").unwrap();
    let path = dir.path.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let socket = path.display().to_string();
    // A 400 ms watchdog: the agent must ping every 200 ms.
    let mut a = launch(
        &[],
        &[("NOTIFY_SOCKET", &socket), ("WATCHDOG_USEC", "400000")],
    );
    let seen = expect_datagram(&sock, "READY=1", Duration::from_secs(30));
    assert!(seen.last().unwrap().contains("STATUS=serving"), "{seen:?}");
    // Ready means serving.
    assert_eq!(http_get(a.addr, "/-/healthy").unwrap().0, 200);
    let start = Instant::now();
    for _ in 0..3 {
        expect_datagram(&sock, "WATCHDOG=1", Duration::from_secs(2));
    }
    assert!(start.elapsed() < Duration::from_secs(3));
    // SAFETY: kill(2) on our own running child.
    unsafe { libc::kill(a.pid() as i32, libc::SIGTERM) };
    expect_datagram(&sock, "STOPPING=1", Duration::from_secs(2));
    let status = a.wait_exit(Duration::from_secs(2)).unwrap();
    assert_eq!(status.code(), Some(0), "log: {}", a.log());
}

#[test]
fn sigint_exits_0() {
    let mut a = launch(&[], &[]);
    a.wait_healthy().unwrap();
    // SAFETY: kill(2) on our own running child.
    unsafe { libc::kill(a.pid() as i32, libc::SIGINT) };
    let status = a.wait_exit(Duration::from_secs(2)).unwrap();
    assert_eq!(status.code(), Some(0), "log: {}", a.log());
    assert!(a.log().contains("signal=SIGINT"), "{}", a.log());
}

#[test]
fn logs_in_logfmt_and_json() {
    let mut a = launch(&["--log.level=info"], &[]);
    a.wait_healthy().unwrap();
    let log = a.log();
    let line = log
        .lines()
        .find(|l| l.contains("serving metrics"))
        .unwrap_or_else(|| panic!("no serving line in {log}"));
    assert!(line.starts_with("ts="), "{line}");
    assert!(
        line.contains(" level=info msg=\"serving metrics\"") && line.contains(" path=/metrics"),
        "{line}"
    );
    assert!(line.contains(&format!("address={}", a.addr)), "{line}");
    drop(a);

    let mut a = launch(&["--log.format=json"], &[]);
    a.wait_healthy().unwrap();
    let log = a.log();
    let line = log
        .lines()
        .find(|l| l.contains("serving metrics"))
        .unwrap_or_else(|| panic!("no serving line in {log}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["level"], "INFO", "{line}");
    assert_eq!(v["message"], "serving metrics", "{line}");
    assert_eq!(v["path"], "/metrics", "{line}");
    assert_eq!(v["address"], a.addr.to_string(), "{line}");
    drop(a);

    // At warn, the info lines are gone.
    let mut a = launch(&["--log.level=warn"], &[]);
    a.wait_healthy().unwrap();
    assert!(!a.log().contains("serving metrics"), "{}", a.log());
}

#[test]
fn snapshot_prints_one_set_of_metrics() {
    let out = agent(&["snapshot", "--interval=300ms", "--format=json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    for n in ["stornet_probe_up", "process_cpu_seconds_total"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let start = Instant::now();
    let out = agent(&["snapshot", "--interval", "1s"]);
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("# TYPE process_resident_memory_bytes gauge"),
        "{text}"
    );
    assert!(
        text.contains("stornet_probe_up{probe=\"block_completion\"}"),
        "{text}"
    );
}

#[test]
fn check_prints_a_table() {
    let out = agent(&["check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap_or("");
    assert!(
        header.starts_with("CHECK") && header.contains("STATUS"),
        "{text}"
    );
    for row in [
        "kernel ",
        "kernel BTF",
        "tracefs",
        "capability CAP_BPF",
        "probe block_completion",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "{row} missing:\n{text}"
        );
    }
    let probe_ok = text
        .lines()
        .any(|l| l.starts_with("probe block_completion") && l.contains(" ok "));
    // Exit status follows whether any probe can run.
    assert_eq!(out.status.success(), probe_ok, "{text}");
}

fn web_config(dir: &TempDir, pki: &TestPki, user: &str, password: &str) -> PathBuf {
    let hash = bcrypt::hash(password, 4).unwrap();
    dir.file(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  {user}: '{hash}'\n",
            pki.cert_file.display(),
            pki.key_file.display()
        ),
    )
}

#[test]
fn tls_and_basic_auth() {
    let dir = TempDir::new("tls").unwrap();
    let pki = TestPki::generate("cli").unwrap();
    let web = web_config(&dir, &pki, "prom", "s3cret");
    let web_flag = format!("--web.config.file={}", web.display());
    let mut a = launch(&[&web_flag], &[]);
    let (addr, ca) = (a.addr, pki.ca_pem.clone());
    a.wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();

    let good = basic_auth("prom", "s3cret");
    let bad = basic_auth("prom", "wrong");
    let nobody = basic_auth("nobody", "s3cret");
    let (code, _) = https_get(addr, "/metrics", &ca, &[]).unwrap();
    assert_eq!(code, 401, "no credentials");
    for h in [&bad, &nobody] {
        let (code, _) = https_get(addr, "/metrics", &ca, &[("Authorization", h)]).unwrap();
        assert_eq!(code, 401, "{h}");
    }
    let (code, body) = https_get(addr, "/metrics", &ca, &[("Authorization", &good)]).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("stornet_probe_up"), "{body}");
    // Every path is protected.
    assert_eq!(https_get(addr, "/", &ca, &[]).unwrap().0, 401);
    // Plain HTTP gets no answer from the TLS port.
    assert!(!matches!(http_get(addr, "/metrics"), Ok((200, _))));
    // A client that does not trust the test CA refuses the server.
    let other = TestPki::generate("cli-other").unwrap();
    assert!(https_get(addr, "/metrics", &other.ca_pem, &[("Authorization", &good)]).is_err());
}

#[test]
fn relative_certificate_paths_start_at_the_web_config() {
    let pki = TestPki::generate("rel").unwrap();
    let web = pki.dir.join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    let flag = format!("--web.config.file={}", web.display());
    let mut a = launch(&[&flag], &[]);
    let (addr, ca) = (a.addr, pki.ca_pem.clone());
    a.wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();
    assert_eq!(https_get(addr, "/metrics", &ca, &[]).unwrap().0, 200);
    assert!(Path::new(&web).exists());
}

/// A stderr whose reader went away (a restarted log collector) costs the log lines only: the
/// agent keeps serving and exits cleanly.
#[test]
fn a_broken_stderr_does_not_stop_the_agent() {
    let port = stornet_lab::agent::free_port().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = Command::new(BIN)
        .args([&format!("--web.listen-address={addr}"), "--log.level=debug"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the only reader: every log line from now on meets EPIPE.
    drop(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(http_get(addr, "/-/healthy"), Ok((200, _))) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the agent exited: {:?}",
            child.try_wait()
        );
        assert!(Instant::now() < deadline, "not serving within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Requests log at debug level; the agent keeps answering.
    for _ in 0..3 {
        assert_eq!(http_get(addr, "/metrics").unwrap().0, 200);
    }
    // SAFETY: kill(2) on our own running child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{status}");
}

/// Sends one GET with `auth` on a fresh connection; the status code, or 0 if none came.
fn get_status(addr: std::net::SocketAddr, path: &str, auth: &str) -> u16 {
    stornet_lab::metrics::http_get_with(addr, path, &[("Authorization", auth)])
        .map_or(0, |(code, _)| code)
}

/// Clients guessing passwords cost the agent one bcrypt check at a time, and a scraper
/// whose credentials were verified before is answered without waiting behind them.
#[test]
fn password_guessers_do_not_hold_up_a_verified_scraper() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = TempDir::new("guessers").unwrap();
    // Cost 11: tens of milliseconds per check, as real hashes take.
    let hash = bcrypt::hash("s3cret", 11).unwrap();
    let web = dir.file("web.yml", &format!("basic_auth_users:\n  prom: '{hash}'\n"));
    let mut a = launch(&[&format!("--web.config.file={}", web.display())], &[]);
    let addr = a.addr;
    let good = basic_auth("prom", "s3cret");
    // Verified once, before the guessing starts.
    a.wait_until(|| get_status(addr, "/metrics", &good) == 200)
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let guessers: Vec<_> = (0..30)
        .map(|g| {
            let (stop, refused) = (stop.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // A new password every time: nothing to remember.
                    let bad = basic_auth("prom", &format!("guess-{g}-{i}"));
                    if get_status(addr, "/metrics", &bad) == 401 {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // Until the guessers have a backlog of checks queued.
    while refused.load(Ordering::Relaxed) < 10 {
        std::thread::sleep(Duration::from_millis(20));
    }
    // How many guesses the agent answered while one scrape of the verified scraper was
    // served: with parallel bcrypt checks on a shared thread pool the scrape waited for
    // more than 20 of them.
    let mut fewest = u64::MAX;
    for _ in 0..3 {
        let before = refused.load(Ordering::Relaxed);
        assert_eq!(get_status(addr, "/metrics", &good), 200);
        fewest = fewest.min(refused.load(Ordering::Relaxed) - before);
    }
    stop.store(true, Ordering::Relaxed);
    for g in guessers {
        g.join().unwrap();
    }
    assert!(
        fewest <= 4,
        "{fewest} guesses were answered while a verified scrape waited"
    );
}

/// A connection that pipelines requests and never reads the answers.
fn non_reader(
    addr: std::net::SocketAddr,
    path: &str,
    requests: usize,
) -> Option<std::net::TcpStream> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let sock = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    // A small receive window fills after a few answers.
    let small: libc::c_int = 4096;
    // SAFETY: setsockopt with a valid pointer to an int of the size given.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    sock.set_nonblocking(true).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").repeat(requests);
    let _ = (&sock).write(req.as_bytes());
    Some(sock)
}

/// The hard limit on open files of this process, after raising its soft limit to it (the
/// test holds more than 1024 connections itself).
fn open_files_hard_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_max
}

/// More clients that never read than the usual soft limit of 1024 open files: the agent
/// raises its limit, keeps at most --web.max-connections of them, and still answers a scrape.
#[test]
fn clients_that_never_read_do_not_lock_out_a_scrape() {
    let hard = open_files_hard_limit();
    assert!(
        hard >= 2048,
        "this test needs a hard open-files limit of 2048, not {hard}"
    );
    let nofile = format!("--nofile=1024:{hard}");
    let mut a = AgentProcess::launch(&Launch {
        bin: Some(BIN.into()),
        wrapper: &["prlimit", &nofile, "--"],
        ..Default::default()
    })
    .unwrap();
    a.wait_healthy().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", a.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(soft[3], hard.to_string(), "soft limit not raised: {line}");

    let held: Vec<_> = (0..1100)
        .filter_map(|_| non_reader(a.addr, "/-/healthy", 2000))
        .collect();
    assert!(held.len() > 1024, "only {} connections", held.len());
    let (code, body) = http_get(a.addr, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("stornet_probe_up"));
    let fds = std::fs::read_dir(format!("/proc/{}/fd", a.pid()))
        .unwrap()
        .count();
    assert!(
        fds < 512 + 200,
        "{fds} descriptors open for 512 connections at most"
    );
}

/// Whether the agent's end of the TCP connection from `client` is still open: its entry in
/// /proc/net/tcp has an owning socket (a closed end lingers with inode 0 until its unsent
/// data is given up).
fn agent_end_open(agent: std::net::SocketAddr, client: &std::net::TcpStream) -> bool {
    let local = client.local_addr().unwrap().port();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let port = |a: &str| {
            a.rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
        };
        f.len() > 9 && port(f[1]) == Some(agent.port()) && port(f[2]) == Some(local) && f[9] != "0"
    })
}

/// A client that stops reading its answers half way, and one that never sends a request,
/// hold up no other scrape and are disconnected after the timeouts.
#[test]
fn stalled_and_idle_clients_are_disconnected() {
    let mut a = launch(&[], &[]);
    a.wait_healthy().unwrap();
    // Answers far larger than the socket buffers.
    let stalled = non_reader(a.addr, "/metrics", 400).unwrap();
    let idle = std::net::TcpStream::connect(a.addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(agent_end_open(a.addr, &stalled) && agent_end_open(a.addr, &idle)) {
        assert!(Instant::now() < deadline, "connections not accepted");
        std::thread::sleep(Duration::from_millis(20));
    }
    // While they hang, other scrapes are answered.
    for _ in 0..3 {
        assert_eq!(http_get(a.addr, "/metrics").unwrap().0, 200);
    }
    loop {
        let open = [&stalled, &idle].map(|c| agent_end_open(a.addr, c));
        if open == [false, false] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still open after 60 s (stalled, idle): {open:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(http_get(a.addr, "/-/healthy").unwrap().0, 200);
}

/// At --web.max-connections, a new connection pushes out the oldest idle one: held-open
/// connections cannot lock a scrape out.
#[test]
fn at_the_connection_limit_the_oldest_idle_connection_makes_room() {
    use std::io::Read;
    let mut a = launch(&["--web.max-connections=4"], &[]);
    a.wait_healthy().unwrap();
    let idle: Vec<_> = (0..10)
        .map(|_| std::net::TcpStream::connect(a.addr).unwrap())
        .collect();
    let (code, body) = http_get(a.addr, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("stornet_probe_up"));
    // All but the newest few were closed to make room.
    let closed = idle
        .into_iter()
        .filter(|s| {
            let mut s = s;
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            matches!(s.read(&mut [0u8; 1]), Ok(0))
        })
        .count();
    assert!(closed >= 7, "only {closed} of 10 idle connections closed");
}

/// Users whose hashes have different costs answer in different times, which tells a client
/// which user names exist: the agent says so at start.
#[test]
fn hashes_of_different_costs_are_warned_about() {
    let dir = TempDir::new("costs").unwrap();
    let web = dir.file(
        "web.yml",
        &format!(
            "basic_auth_users:\n  a: '{}'\n  b: '{}'\n",
            bcrypt::hash("x", 4).unwrap(),
            bcrypt::hash("y", 5).unwrap()
        ),
    );
    let mut a = launch(&[&format!("--web.config.file={}", web.display())], &[]);
    let addr = a.addr;
    a.wait_until(|| http_get(addr, "/-/healthy").is_ok_and(|(c, _)| c == 401))
        .unwrap();
    let log = a.log();
    assert!(
        log.lines()
            .any(|l| l.contains("level=warn") && l.contains("different bcrypt costs")),
        "{log}"
    );
}
