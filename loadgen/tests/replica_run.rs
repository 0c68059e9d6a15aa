//! `loadgen run --replica` against replicas on loopback (ports chosen by the kernel): real
//! `loadgen serve` servers in this process, and fake replicas that answer the handshake and
//! then misbehave. No root needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use replica::client::{BlockingClient, ClientOptions, Event};
use replica::protocol::{AckStatus, HELLO_ACK_LEN, HelloAck, HelloStatus, MAX_PAYLOAD, VERSION};
use replica::server::{Server, ServerConfig};
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-replica-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// A `loadgen serve` on 127.0.0.1, serving until the test process ends.
fn serve(dir: PathBuf) -> SocketAddr {
    serve_with(dir, 16, Duration::from_secs(300))
}

fn serve_with(dir: PathBuf, max_connections: usize, idle_timeout: Duration) -> SocketAddr {
    let server = Server::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        dir,
        token: None,
        ack_on_receive: false,
        frame_timeout: Duration::from_secs(10),
        idle_timeout,
        max_connections,
    })
    .expect("server binds");
    let addr = server.local_addr().unwrap();
    std::thread::spawn(move || server.run());
    addr
}

/// A replica that accepts the handshake, then reads everything and acknowledges nothing.
fn black_hole() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let _ = s.read(&mut buf);
                let ack = HelloAck {
                    version: VERSION,
                    status: HelloStatus::Ok,
                    max_payload: MAX_PAYLOAD,
                };
                let _ = s.write_all(&ack.encode()[..HELLO_ACK_LEN]);
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

fn loadgen(args: &[String]) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("loadgen runs");
    (out, start.elapsed())
}

#[test]
fn every_write_reaches_both_replicas_byte_exact() {
    let dir = scratch("mirror");
    let (r1, r2) = (dir.join("r1"), dir.join("r2"));
    std::fs::create_dir_all(&r1).unwrap();
    std::fs::create_dir_all(&r2).unwrap();
    let (a, b) = (serve(r1.clone()), serve(r2.clone()));
    let local = dir.join("local");
    let (out, _) = loadgen(&[
        "--name=mirror".into(),
        format!("--filename={}", local.display()),
        "--size=4M".into(),
        "--rw=write".into(),
        "--bs=16k".into(),
        "--iodepth=8".into(),
        "--verify".into(),
        format!("--replica={a}"),
        format!("--replica={b}"),
        "--output-format=json".into(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let j: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let w = &j["jobs"][0]["write"];
    assert_eq!(w["total_ios"], 256);
    let names: Vec<&str> = w["legs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["local", &format!("replica {a}"), &format!("replica {b}")]
    );
    for leg in w["legs"].as_array().unwrap() {
        assert_eq!(leg["lat_ns"]["N"], 256, "{leg}");
    }
    let merged = &j["loadgen"]["points"][0]["write"]["legs"];
    assert_eq!(merged[2]["lat_ns"]["n"], 256, "{merged}");
    // A sequential pass writes every block once: both volumes equal the local file.
    let expected = std::fs::read(&local).unwrap();
    for r in [&r1, &r2] {
        let got = std::fs::read(r.join("mirror.0")).unwrap();
        assert!(
            got == expected,
            "{} differs from the local file",
            r.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replica_that_stops_acknowledging_fails_the_run_after_the_timeout() {
    let dir = scratch("stall");
    let served = dir.join("ok");
    std::fs::create_dir_all(&served).unwrap();
    let (good, hole) = (serve(served), black_hole());
    let (out, took) = loadgen(&[
        format!("--filename={}", dir.join("local").display()),
        "--size=4M".into(),
        "--rw=randwrite".into(),
        "--iodepth=8".into(),
        "--time_based".into(),
        "--runtime=60".into(),
        format!("--replica={good}"),
        format!("--replica={hole}"),
        "--replica_timeout=500ms".into(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let line = stderr.lines().last().unwrap_or_default();
    // The replica that answers is not blamed; the one that stalled is, with the writes it
    // held: every IO of the queue.
    assert!(
        line.starts_with(&format!(
            "loadgen: error: replica {hole} failed: no ack for request 1 within 500ms; 8 write(s) failed"
        )),
        "{stderr}"
    );
    assert!(!line.contains(&good.to_string()), "{stderr}");
    assert!(out.stdout.is_empty(), "no report for a failed run");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_replica_fails_before_the_run() {
    let dir = scratch("refused");
    // A port that was just free: nothing listens on it.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (out, _) = loadgen(&[
        format!("--filename={}", dir.join("local").display()),
        "--size=1M".into(),
        "--rw=write".into(),
        format!("--replica={addr}"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("replica {addr}: cannot connect")),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replica behind a relay that passes traffic for `healthy`, then swallows it: the
/// replica goes silent mid-run.
fn going_silent(to: SocketAddr, healthy: Duration) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { continue };
            let mut server = std::net::TcpStream::connect(to).unwrap();
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let until = Instant::now() + healthy;
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = client.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if Instant::now() < until {
                        let _ = server.write_all(&buf[..n]);
                    }
                }
            });
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = s2.read(&mut buf) {
                    if n == 0 || c2.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_run_whose_replica_goes_silent_fails_but_keeps_its_record() {
    let dir = scratch("silent");
    let served = dir.join("ok");
    std::fs::create_dir_all(&served).unwrap();
    let relay = going_silent(serve(served), Duration::from_millis(1500));
    let record = dir.join("run.json");
    let (out, _) = loadgen(&[
        format!("--filename={}", dir.join("local").display()),
        "--size=4M".into(),
        "--rw=randwrite".into(),
        "--iodepth=4".into(),
        "--time_based".into(),
        "--runtime=60".into(),
        "--interval=100ms".into(),
        format!("--replica={relay}"),
        "--replica_timeout=500ms".into(),
        format!("--record={}", record.display()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.starts_with(&format!("loadgen: error: replica {relay} failed: no ack")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report for a failed run");
    // The record holds what ran until the replica went silent, and why the run stopped.
    let r: Value = serde_json::from_slice(&std::fs::read(&record).expect("a record")).unwrap();
    let job = &r["result"]["points"][0]["jobs"][0];
    assert!(
        job["error"].as_str().is_some_and(|e| e.contains("no ack")),
        "{job}"
    );
    let writes = job["dirs"][1]["ios"].as_u64().unwrap();
    assert!(writes > 0, "writes before the replica went silent");
    let rows = r["points"][0]["run"]["starts"].as_array().unwrap().len();
    assert!(rows >= 10, "{rows} intervals of 100 ms in the record");
    let _ = std::fs::remove_dir_all(&dir);
}

fn client(addr: SocketAddr, volume: &str) -> Result<BlockingClient, String> {
    let opts = ClientOptions {
        token: Vec::new(),
        volume: volume.into(),
        timeout: Duration::from_secs(5),
    };
    BlockingClient::connect(addr, &opts).map_err(|e| e.to_string())
}

/// One write of 4 KiB at offset 0, acknowledged.
fn one_write(c: &mut BlockingClient) {
    c.submit(1, 0, &[7u8; 4096]).unwrap();
    match c.next_event().unwrap() {
        Event::Acked { status, .. } => assert_eq!(status, AckStatus::Ok),
        other => panic!("{other:?}"),
    }
}

/// Sockets that never send a hello do not count toward --max-connections: a real client
/// still gets in; the limit holds for connections that stream.
#[test]
fn silent_sockets_do_not_lock_clients_out() {
    let dir = scratch("hello-less");
    let addr = serve_with(dir.clone(), 2, Duration::from_secs(300));
    let silent: Vec<_> = (0..10)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut a = client(addr, "a").expect("a client after 10 silent sockets");
    let mut b = client(addr, "b").expect("a second client");
    one_write(&mut a);
    one_write(&mut b);
    let e = client(addr, "c").err().expect("a third is one too many");
    assert!(e.contains("too many connections"), "{e}");
    // The oldest silent sockets were closed to make room for newer ones.
    let mut closed = 0;
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if matches!(s.read(&mut [0u8; 16]), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 8, "{closed} of 10 silent sockets closed");
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server end of the connection from `client`: its row of /proc/net/tcp, split.
fn server_row(server: SocketAddr, client: &std::net::TcpStream) -> Option<Vec<String>> {
    let local = client.local_addr().unwrap().port();
    let port = |a: &str| {
        a.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.len() > 9 && port(&f[1]) == Some(server.port()) && port(&f[2]) == Some(local))
}

/// A connection that goes silent after its handshake is closed after the idle timeout, and
/// until then the kernel probes the peer with keepalives (a vanished peer is noticed).
#[test]
fn silent_streams_are_probed_and_closed_when_idle() {
    let dir = scratch("idle");
    let addr = serve_with(dir.clone(), 4, Duration::from_secs(2));
    let c = client(addr, "idle").unwrap();
    let (stream, _conn) = c.into_parts().unwrap();
    // Timer 2 in /proc/net/tcp is the keepalive timer.
    let row = server_row(addr, &stream).expect("the server end");
    assert!(row[5].starts_with("02:"), "no keepalive timer: {row:?}");
    let mut stream = stream;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let start = Instant::now();
    let got = loop {
        match stream.read(&mut [0u8; 64]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r,
        }
    };
    assert!(
        matches!(got, Ok(0)),
        "the server closes an idle connection: {got:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(&dir);
}
