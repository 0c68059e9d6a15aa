//! The job service (`loadgen serve --jobs-listen`) and its controller (`loadgen run
//! --client`) as an attacker meets them: a token holder's job orders never read or reveal a
//! file of the host, nor its environment; a client without the token costs a few KiB and
//! a slot that the next connection can take; a host that misbehaves cannot hang or exhaust
//! the controller. No root needed; all traffic stays on loopback.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Host, LOADGEN, Raw, controller, order, scratch, stderr, strings};

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn message(v: &Value) -> String {
    assert_eq!(v["type"], "error", "{v}");
    v["message"].as_str().unwrap().to_string()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A job order's positional argument names a job file the order carries; a name it does
/// not carry is refused, never read from the host: not a secret outside `--dir` (whose
/// first line the host used to quote), not a job file inside it, not a FIFO (which used to
/// block the host for good).
#[test]
fn a_positional_argument_never_reads_a_file_of_the_host() {
    let root = scratch("positional");
    let a = Host::start(&root, "a", &[]);
    let secret = root.join("secret");
    std::fs::write(&secret, "--root-password=hunter2\n").unwrap();
    let inside = a.dir.join("inside.fio");
    std::fs::write(&inside, "[w]\nrw=write\nsize=64k\n").unwrap();
    let fifo = root.join("fifo");
    mkfifo(&fifo);
    for path in [&secret, &inside, &fifo] {
        let shown = path.to_str().unwrap();
        let t = Instant::now();
        let v = order(&a.jobs, "x", &[shown], &[]);
        let m = message(&v);
        assert!(!m.contains("hunter2"), "{shown}: {m}");
        assert!(m.contains("refused"), "{shown}: {m}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{shown}: answered late"
        );
    }
    let (out, _) = controller(&[
        a.client(),
        "--name=w".into(),
        "--rw=write".into(),
        "--size=64k".into(),
    ]);
    assert!(out.status.success(), "not left busy: {}", stderr(&out));
}

/// A job name is a name: one that carries `=URL` used to point the host's own agent
/// sampling at the attacker's address, with the agent's URL (and what it holds) in the path.
#[test]
fn a_job_name_cannot_send_the_hosts_agent_elsewhere() {
    let root = scratch("name");
    let thief = TcpListener::bind("127.0.0.1:0").unwrap();
    thief.set_nonblocking(true).unwrap();
    let agent = TcpListener::bind("127.0.0.1:0").unwrap();
    let agent_url = format!("http://{}/s3cret-path", agent.local_addr().unwrap());
    let a = Host::start(&root, "a", &["--agent", &agent_url]);
    let name = format!("x=http://{}/steal?", thief.local_addr().unwrap());
    let (mut c, _) = Raw::hello(&a.jobs, "");
    let v = c.order(
        &name,
        &["--rw=write", "--size=64k", "--time_based", "--runtime=1"],
        &[],
    );
    if v["type"] == "ready" {
        c.send(&json!({"type": "start", "unix_ns": now_ns() + 100_000_000}));
        let until = Instant::now() + Duration::from_secs(8);
        while Instant::now() < until && c.next()["type"] == "running" {}
    } else {
        let m = message(&v);
        assert!(m.contains("name"), "{m}");
        assert!(!m.contains("s3cret"), "{m}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        thief.accept().is_err(),
        "the host connected to the address in the job's name"
    );
    assert_eq!(v["type"], "error", "the order was taken: {v}");
}

/// `${VAR}` in a job order is not expanded from the service's environment, and a target
/// outside `--dir` is refused before anything looks at it: the answer is the same whether
/// the file exists or not, and says nothing of its size.
#[test]
fn neither_the_environment_nor_files_outside_leak_through_a_job_order() {
    let root = scratch("oracle");
    let a = Host::start_with(&root, "a", &[], |c| {
        c.env("STORNET_TEST_SECRET", "hunter2");
    });
    let job = "[w]\nrw=write\nsize=64k\nfilename=${STORNET_TEST_SECRET}\n";
    let m = message(&order(&a.jobs, "x", &["j.fio"], &[("j.fio", job)]));
    assert!(!m.contains("hunter2"), "{m}");
    assert!(m.contains("environment"), "{m}");
    assert!(!a.dir.join("hunter2").exists());

    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("present"), vec![7u8; 12345]).unwrap();
    let mut answers = Vec::new();
    for name in ["present", "absent"] {
        for (form, path) in [
            ("absolute", outside.join(name).display().to_string()),
            ("relative", format!("../../outside/{name}")),
        ] {
            let m = message(&order(
                &a.jobs,
                "x",
                &["--rw=read", &format!("--filename={path}")],
                &[],
            ));
            assert!(m.contains("refused"), "{form} {name}: {m}");
            assert!(!m.contains("12345") && !m.contains("exist"), "{m}");
            answers.push((form, m.replace(name, "NAME")));
        }
    }
    assert_eq!(answers[0], answers[2], "an absolute path: the same answer");
    assert_eq!(answers[1], answers[3], "a relative path: the same answer");
}

/// Options that name host files or turn checks off are the host's, even in forms the
/// controller keeps to itself: refused in a job order.
#[test]
fn options_the_host_sets_are_refused_in_a_job_order() {
    let root = scratch("hostopts");
    let a = Host::start(&root, "a", &[]);
    for opt in [
        "--agent-insecure-skip-verify",
        "--client-token-file=/etc/hostname",
        "--client=198.18.0.9",
        "--output=/tmp/x",
        "--status-interval=1",
        "--start-gate",
        "--replica-volume-prefix=other",
    ] {
        let m = message(&order(
            &a.jobs,
            "x",
            &["--rw=write", "--size=64k", opt],
            &[],
        ));
        assert!(m.contains("not taken in a job order"), "{opt}: {m}");
    }
}

/// A job file over 1 MiB, or an order over the size an order may have, is refused as it
/// arrives; the host does not hold it first.
#[test]
fn an_oversized_job_order_is_refused_before_it_is_held() {
    let root = scratch("bigorder");
    let a = Host::start(&root, "a", &[]);
    let before = a.status_kb("VmHWM");
    let big = format!("[w]\nrw=write\nsize=64k\n{}", "#\n".repeat(12 << 20));
    let (mut c, _) = Raw::hello(&a.jobs, "");
    // The host may close before it has read it all.
    let line = serde_json::to_vec(&json!({
        "type": "job", "name": "x", "args": ["j.fio"], "files": [{"arg": "j.fio", "text": big}]
    }))
    .unwrap();
    let _ = c.w.write_all(&line);
    let _ = c.w.write_all(b"\n");
    let v = c.next();
    let m = message(&v);
    assert!(m.contains("MiB"), "{m}");
    let grown = a.status_kb("VmHWM").saturating_sub(before);
    assert!(grown < 12 << 10, "the host grew by {grown} kB");
    let small = format!("[w]\nrw=write\nsize=64k\n{}", "#\n".repeat(600 << 10));
    let m = message(&order(&a.jobs, "x", &["j.fio"], &[("j.fio", &small)]));
    assert!(m.contains("j.fio") && m.contains("1 MiB"), "{m}");
}

/// Clients without the token hold at most the service's connection cap, each with one
/// deadline for its whole handshake: 400 of them trickling bytes neither exhaust the file
/// descriptors (the host runs with 256) nor keep out a controller or a replication client.
#[test]
fn clients_without_the_token_cannot_exhaust_the_service() {
    let root = scratch("fds");
    let token = root.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let a = Host::start_with(
        &root,
        "a",
        &["--token-file", token.to_str().unwrap()],
        |c| {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; it lowers this child's own limit.
            unsafe {
                c.pre_exec(|| {
                    let lim = libc::rlimit {
                        rlim_cur: 256,
                        rlim_max: 256,
                    };
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                    Ok(())
                })
            };
        },
    );
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let trickle = {
        let (stop, open, addr) = (stop.clone(), open.clone(), a.jobs.clone());
        std::thread::spawn(move || {
            let mut conns: Vec<TcpStream> = Vec::new();
            for _ in 0..400 {
                if let Ok(s) = TcpStream::connect(&addr) {
                    conns.push(s);
                }
            }
            open.store(conns.len(), Ordering::Relaxed);
            while !stop.load(Ordering::Relaxed) {
                for s in &mut conns {
                    let _ = s.write(b" ");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    while open.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let fds = a.open_fds();
    let tokened = format!("--client-token-file={}", token.display());
    let (out, _) = controller(&[
        a.client(),
        tokened,
        "--name=w".into(),
        "--rw=write".into(),
        "--size=64k".into(),
    ]);
    let replica = Command::new(LOADGEN)
        .args(["replica-client", "--connect", &a.listen, "--count=64"])
        .args(["--token-file", token.to_str().unwrap()])
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    trickle.join().unwrap();
    assert!(out.status.success(), "the controller: {}", stderr(&out));
    assert!(
        replica.status.success(),
        "the replication client: {}",
        stderr(&replica)
    );
    assert!(fds < 160, "{fds} descriptors open under 400 clients");
}

// ---- a host that misbehaves, as the controller meets it ----

/// A job service on loopback that answers hello and clock like a host, then (the job
/// order read) does what `then` says with the rest of the connection.
fn fake_host(
    then: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) + Send + 'static,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let m: Value = serde_json::from_str(&line).unwrap();
            let answer = match m["type"].as_str().unwrap() {
                "hello" => {
                    json!({"type": "welcome", "version": env!("CARGO_PKG_VERSION"), "hostname": "fake"})
                }
                "clock" => json!({"type": "time", "unix_ns": now_ns()}),
                _ => break,
            };
            let _ = writeln!(w, "{answer}");
        }
        then(&mut r, &mut w);
        // Hold the connection until the controller goes.
        let mut sink = Vec::new();
        let _ = r.read_to_end(&mut sink);
    });
    addr
}

/// Runs a controller against `host` with `args`; kills it after `limit`. Returns its
/// stderr, how long it ran, and its peak resident memory in kB.
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4 below, which also gives its resource usage"
)]
fn controller_against(host: &str, args: &[&str], limit: Duration) -> (String, Duration, u64) {
    let mut child = Command::new(LOADGEN)
        .arg("run")
        .arg(format!("--client=h={host}"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut err = child.stderr.take().unwrap();
    let text = Arc::new(Mutex::new(String::new()));
    let reader = {
        let text = text.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            *text.lock().unwrap() = s;
        })
    };
    let start = Instant::now();
    let killer = std::thread::spawn(move || {
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: signal 0 only checks the pid exists.
            if unsafe { libc::kill(pid, 0) } != 0 {
                return;
            }
        }
        // SAFETY: our own child; a reaped one is not signalled (kill(0) failed above).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid pointers; its rusage is the child's alone.
    unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = start.elapsed();
    killer.join().unwrap();
    reader.join().unwrap();
    let text = text.lock().unwrap().clone();
    (text, took, usage.ru_maxrss as u64)
}

/// A host that sends its messages one byte at a time, slower than the timeout but faster
/// than any per-read timeout would notice, is given up after the timeout.
#[test]
fn a_host_that_trickles_is_given_up_after_the_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut line = String::new();
        let _ = BufReader::new(s).read_line(&mut line);
        let welcome =
            json!({"type": "welcome", "version": env!("CARGO_PKG_VERSION"), "hostname": "fake"});
        for b in format!("{welcome}\n").bytes() {
            if w.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let (e, took, _) = controller_against(
        &host,
        &["--rw=write", "--size=64k", "--client-timeout=1"],
        Duration::from_secs(20),
    );
    assert!(took < Duration::from_secs(8), "ran {took:?}: {e}");
    assert!(e.contains("host h"), "{e}");
}

/// A host that says `running` for ever is stopped after its job's planned end and given up
/// when it does not send its result.
#[test]
fn a_host_that_runs_past_its_job_is_stopped_and_given_up() {
    let host = fake_host(|r, w| {
        let mut line = String::new();
        let _ = writeln!(w, "{}", json!({"type": "ready"}));
        let _ = r.read_line(&mut line);
        let start = Instant::now();
        loop {
            let m = json!({"type": "running", "elapsed_s": start.elapsed().as_secs_f64()});
            if writeln!(w, "{m}").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let (e, took, _) = controller_against(
        &host,
        &[
            "--rw=write",
            "--size=64k",
            "--time_based",
            "--runtime=1",
            "--client-timeout=1",
        ],
        Duration::from_secs(40),
    );
    assert!(took < Duration::from_secs(20), "ran {took:?}: {e}");
    assert!(e.contains("host h"), "{e}");
}

/// A result larger than a host may send is refused as it arrives, so the controller's
/// memory stays bounded.
#[test]
fn a_hosts_result_is_capped() {
    let host = fake_host(|r, w| {
        let mut line = String::new();
        let _ = writeln!(w, "{}", json!({"type": "ready"}));
        let _ = r.read_line(&mut line);
        let head = br#"{"type":"result","exit":0,"stopped":false,"log":"","record":""#;
        let _ = w.write_all(head);
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..600 {
            if w.write_all(&chunk).is_err() {
                return;
            }
        }
        let _ = w.write_all(b"\"}\n");
    });
    let (e, _, peak_kb) = controller_against(
        &host,
        &["--rw=write", "--size=64k", "--client-timeout=10"],
        Duration::from_secs(60),
    );
    assert!(e.contains("host h") && e.contains("MiB"), "{e}");
    assert!(peak_kb < 400 << 10, "the controller peaked at {peak_kb} kB");
}

/// Text from a host reaches the controller's terminal without its control characters, and
/// short.
#[test]
fn a_hosts_words_reach_the_terminal_plain_and_short() {
    let host = fake_host(|_, w| {
        let evil = format!("\u{1b}]0;owned\u{7}\u{1b}[2J{}", "A".repeat(100_000));
        let _ = writeln!(w, "{}", json!({"type": "error", "message": evil}));
    });
    let (e, _, _) = controller_against(
        &host,
        &["--rw=write", "--size=64k"],
        Duration::from_secs(20),
    );
    assert!(e.contains("host h"), "{e}");
    assert!(!e.contains('\u{1b}') && !e.contains('\u{7}'), "{e:?}");
    assert!(e.len() < 8192, "{} bytes on the terminal", e.len());
}

/// `--metrics-address` serves scrapes while idle connections, reopened as they close, try
/// to hold every slot.
#[test]
fn idle_connections_cannot_keep_a_scrape_from_the_live_metrics() {
    let root = scratch("metrics");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let mut run = Command::new(LOADGEN)
        .arg("run")
        .args(strings(&[
            "--name=w",
            "--rw=write",
            "--size=1m",
            "--time_based",
            "--runtime=6",
            "--rate_iops=50",
            "--eta=never",
        ]))
        .arg(format!("--filename={}", root.join("f").display()))
        .arg(format!("--metrics-address={addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let holders: Vec<_> = (0..40)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(mut s) = TcpStream::connect(addr) {
                        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut b = [0u8; 16];
                        while !stop.load(Ordering::Relaxed) {
                            match s.read(&mut b) {
                                Ok(0) => break,
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                Err(_) => break,
                                Ok(_) => {}
                            }
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut answered = 0;
    for _ in 0..8 {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            if got.starts_with("HTTP/1.1 200") {
                answered += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    for h in holders {
        h.join().unwrap();
    }
    let _ = run.kill();
    let _ = run.wait();
    assert_eq!(
        answered, 8,
        "scrapes answered while 40 idle clients held on"
    );
}

/// A job order cannot lay out more than the host's `--dir` has free.
#[test]
fn a_job_order_cannot_fill_the_hosts_directory() {
    let root = scratch("fill");
    let a = Host::start(&root, "a", &[]);
    for size in ["16383p", "1000t"] {
        let m = message(&order(
            &a.jobs,
            "x",
            &["--rw=write", &format!("--size={size}")],
            &[],
        ));
        assert!(m.contains("free"), "{size}: {m}");
    }
    assert_eq!(
        std::fs::read_dir(&a.dir).unwrap().count(),
        0,
        "nothing laid out"
    );
}
