//! `loadgen serve` in one namespace, clients in another, joined by veth. Bytes on the wire are
//! built here from docs/replication-protocol.md, independently of loadgen's encoder, and the
//! replica's files are checked against the block pattern recomputed here.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use stornet_lab::bins;
use stornet_lab::netns::{HostPair, Netns};
use stornet_lab::privilege::require_root;
use stornet_lab::replica::{CONNECTION_START, ScratchDir, ServeProcess, wait_bounded};

const TOKEN: &str = "lab-token-1";

// ---- the wire format, from docs/replication-protocol.md ----

fn hello(version: u16, token: &[u8], volume: &str) -> Vec<u8> {
    let mut b = b"STNR".to_vec();
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(token.len() as u16).to_le_bytes());
    b.extend_from_slice(&(volume.len() as u16).to_le_bytes());
    let mut covered = b.clone();
    covered.extend_from_slice(token);
    covered.extend_from_slice(volume.as_bytes());
    b.extend_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
    b.extend_from_slice(token);
    b.extend_from_slice(volume.as_bytes());
    b
}

/// A write frame header claiming `len` payload bytes whose CRC-32C is `payload_crc`.
fn write_header(id: u64, offset: u64, len: u32, payload_crc: u32) -> Vec<u8> {
    let mut h = vec![1u8, 0, 0, 0];
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&id.to_le_bytes());
    h.extend_from_slice(&offset.to_le_bytes());
    h.extend_from_slice(&payload_crc.to_le_bytes());
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

fn write_frame(id: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut f = write_header(id, offset, data.len() as u32, crc32c::crc32c(data));
    f.extend_from_slice(data);
    f
}

/// The block `loadgen replica-client` writes at `offset` (its `--help`-less contract: offset
/// and seed, then splitmix64 words seeded with seed ^ offset).
fn block_pattern(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&seed.to_le_bytes());
    let mut state = seed ^ offset;
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Every block of `count` writes of `bs` bytes at (i * bs) mod size is in `file`, byte-exact.
fn verify_file(file: &Path, seed: u64, bs: usize, count: u64, size: u64) -> Result<()> {
    let data = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let written = count.min(size / bs as u64);
    ensure!(
        data.len() as u64 >= written * bs as u64,
        "{} holds {} bytes, expected at least {}",
        file.display(),
        data.len(),
        written * bs as u64
    );
    for i in 0..written {
        let off = i * bs as u64;
        let got = &data[off as usize..off as usize + bs];
        if got != block_pattern(seed, off, bs).as_slice() {
            bail!(
                "{}: block at offset {off} differs from what was sent",
                file.display()
            );
        }
    }
    Ok(())
}

// ---- processes and raw peers ----

fn client_cmd(ns: &Netns, server: SocketAddr, args: &[&str]) -> std::process::Command {
    let mut c = ns.command(bins::path("loadgen").to_str().expect("utf-8 path"));
    c.arg("replica-client")
        .arg("--connect")
        .arg(server.to_string())
        .args(args);
    c
}

fn summary(out: &Output) -> Result<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "replica-client failed ({}): {}{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).with_context(|| format!("client summary {stdout:?}"))
}

/// What a raw peer saw: its own address (the server logs it), the bytes the server sent,
/// and whether the server closed the connection.
struct PeerOutcome {
    local: SocketAddr,
    received: Vec<u8>,
    closed: bool,
    sent_all: bool,
}

/// Connects from `ns`, sends `bytes`, optionally half-closes, then reads until the server
/// closes the connection (or 15 s pass).
fn raw_peer(
    ns: &Netns,
    server: SocketAddr,
    bytes: Vec<u8>,
    half_close: bool,
) -> JoinHandle<Result<PeerOutcome>> {
    ns.spawn(move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
        let local = s.local_addr()?;
        let mut received = Vec::new();
        // A server that already closed may reset the connection under the write.
        let sent_all = s.write_all(&bytes).is_ok();
        let mut closed = !sent_all;
        if half_close {
            let _ = s.shutdown(Shutdown::Write);
        }
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut buf = [0u8; 256];
        let deadline = Instant::now() + Duration::from_secs(15);
        while !closed && Instant::now() < deadline {
            match s.read(&mut buf) {
                Ok(0) => closed = true,
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => closed = true,
            }
        }
        Ok(PeerOutcome {
            local,
            received,
            closed,
            sent_all,
        })
    })
}

fn start_server(pair: &HostPair, dir: &ScratchDir, extra: &[&str]) -> ServeProcess {
    let replica_dir = dir.join("replica");
    std::fs::create_dir_all(&replica_dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let token_arg = token_file.to_str().unwrap().to_string();
    let mut args = vec!["--token-file", token_arg.as_str()];
    args.extend_from_slice(extra);
    let addr = SocketAddr::new(pair.b_addr().into(), 7480);
    ServeProcess::start(&pair.b, addr, &replica_dir, &args).expect("loadgen serve starts")
}

// ---- tests ----

/// Four clients at once, with different block sizes, depths and volumes, one of them against
/// a wrapping offset range: every block lands in its volume file byte-exact, and the server
/// logs each connection's start and end with the count of writes.
#[test]
fn replicated_writes_land_byte_exact() {
    if !require_root("replicated_writes_land_byte_exact") {
        return;
    }
    let pair = HostPair::new("repl-exact").expect("host pair");
    let dir = ScratchDir::new("repl-exact").unwrap();
    let server = start_server(&pair, &dir, &[]);
    let token = dir.join("token");
    let token = token.to_str().unwrap();
    // (volume, seed, bs, count, iodepth, size)
    let runs: [(&str, u64, usize, u64, usize, u64); 4] = [
        ("job0", 11, 4096, 3000, 16, 3000 * 4096),
        ("job1", 12, 512, 2000, 1, 2000 * 512),
        ("job2", 13, 1 << 20, 40, 4, 40 << 20),
        ("job3", 14, 65536, 500, 32, 64 * 65536),
    ];
    let children: Vec<Child> = runs
        .iter()
        .map(|(vol, seed, bs, count, qd, size)| {
            client_cmd(
                &pair.a,
                server.addr,
                &[
                    "--token-file",
                    token,
                    "--volume",
                    vol,
                    "--seed",
                    &seed.to_string(),
                    "--bs",
                    &bs.to_string(),
                    "--count",
                    &count.to_string(),
                    "--iodepth",
                    &qd.to_string(),
                    "--size",
                    &size.to_string(),
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("client starts")
        })
        .collect();
    for (child, (vol, seed, bs, count, _, size)) in children.into_iter().zip(runs) {
        let (out, _) = wait_bounded(child, Duration::from_secs(120)).expect("client finishes");
        let s = summary(&out).unwrap();
        assert_eq!(s["acked_ok"], count, "{vol}: {s}");
        assert_eq!(s["failed"], 0, "{vol}: {s}");
        verify_file(&dir.join("replica").join(vol), seed, bs, count, size).unwrap();
        let end = server
            .wait_for_line(&format!("(volume {vol}) after"), Duration::from_secs(5))
            .unwrap();
        assert!(
            end.contains(&format!("after {count} writes"))
                && end.ends_with("reason=\"peer closed the connection\""),
            "{end}"
        );
    }
    let log = server.log();
    assert_eq!(log.matches(CONNECTION_START).count(), 4, "{log}");
}

/// With `--ack-on-receive` the server acknowledges before its writes complete, and keeps
/// receiving while they are in flight: a long stream still lands byte-exact once the
/// connection has ended (the server ends a connection only after its writes completed).
#[test]
fn ack_on_receive_writes_land_byte_exact() {
    if !require_root("ack_on_receive_writes_land_byte_exact") {
        return;
    }
    let pair = HostPair::new("repl-aor").expect("host pair");
    let dir = ScratchDir::new("repl-aor").unwrap();
    let server = start_server(&pair, &dir, &["--ack-on-receive"]);
    let token = dir.join("token");
    let out = client_cmd(
        &pair.a,
        server.addr,
        &[
            "--token-file",
            token.to_str().unwrap(),
            "--volume",
            "fast",
            "--seed",
            "21",
            "--count",
            "40000",
            "--iodepth",
            "32",
            "--timeout",
            "10",
        ],
    )
    .output()
    .unwrap();
    let s = summary(&out).unwrap();
    assert_eq!(s["acked_ok"], 40000, "{s}");
    let end = server
        .wait_for_line("(volume fast) after", Duration::from_secs(10))
        .unwrap();
    assert!(end.contains("after 40000 writes"), "{end}");
    verify_file(
        &dir.join("replica").join("fast"),
        21,
        4096,
        40000,
        40000 * 4096,
    )
    .unwrap();
}

/// Garbage, wrong magic, version and token, oversized, truncated and corrupted frames and a
/// peer trickling one byte a second each get their own connection closed with a logged
/// reason, while a well-behaved client on the same server finishes every write byte-exact.
#[test]
fn misbehaving_peers_are_cut_off_and_a_good_client_finishes() {
    if !require_root("misbehaving_peers_are_cut_off_and_a_good_client_finishes") {
        return;
    }
    let pair = HostPair::new("repl-bad").expect("host pair");
    let dir = ScratchDir::new("repl-bad").unwrap();
    let mut server = start_server(&pair, &dir, &["--frame-timeout", "2"]);
    let addr = server.addr;
    let token = dir.join("token");
    let ok_hello = || hello(1, TOKEN.as_bytes(), "bad");
    let with_hello = |tail: Vec<u8>| {
        let mut v = ok_hello();
        v.extend(tail);
        v
    };
    let data = vec![0x5au8; 4096];
    let mut bad_header_crc = write_frame(1, 0, &data);
    bad_header_crc[30] ^= 0xff;
    let mut bad_payload = write_frame(2, 0, &data);
    *bad_payload.last_mut().unwrap() ^= 1;
    let mut truncated = write_frame(3, 0, &data);
    truncated.truncate(32 + 100);
    // (what, expected reason in the log, bytes, half-close)
    let cases: Vec<(&str, &str, Vec<u8>, bool)> = vec![
        (
            "http request",
            "wrong magic",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            false,
        ),
        (
            "garbage after handshake",
            "garbage bytes",
            with_hello(vec![0xff; 64]),
            false,
        ),
        (
            "wrong version",
            "unsupported protocol version 9",
            hello(9, TOKEN.as_bytes(), "bad"),
            false,
        ),
        (
            "wrong token",
            "wrong token",
            hello(1, b"not-the-token", "bad"),
            false,
        ),
        (
            "bad volume",
            "invalid volume name",
            hello(1, TOKEN.as_bytes(), "../etc"),
            false,
        ),
        (
            "oversized",
            "oversized frame",
            with_hello(write_header(1, 0, 64 << 20, 0)),
            false,
        ),
        (
            "header checksum",
            "frame header checksum mismatch",
            with_hello(bad_header_crc),
            false,
        ),
        (
            "payload checksum",
            "payload checksum mismatch",
            with_hello(bad_payload),
            false,
        ),
        ("truncated", "truncated", with_hello(truncated), true),
        ("silent", "read deadline", Vec::new(), false),
    ];
    let mut peers: Vec<(&str, &str, JoinHandle<Result<PeerOutcome>>)> = cases
        .into_iter()
        .map(|(what, reason, bytes, half)| (what, reason, raw_peer(&pair.a, addr, bytes, half)))
        .collect();
    // The trickler: a valid handshake, then a frame one byte a second.
    let trickle_hello = ok_hello();
    let hello_len = trickle_hello.len();
    let mut trickle = trickle_hello;
    trickle.extend(write_frame(9, 0, &data));
    peers.push((
        "trickle",
        "read deadline",
        raw_peer_after_hello(&pair.a, addr, trickle, hello_len),
    ));

    // The good client connects while the slow peers are still being served.
    let good = client_cmd(
        &pair.a,
        addr,
        &[
            "--token-file",
            token.to_str().unwrap(),
            "--volume",
            "good",
            "--seed",
            "7",
            "--count",
            "20000",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("good client starts");

    let mut trickle_end = String::new();
    for (what, reason, handle) in peers {
        let o = handle
            .join()
            .expect("peer thread")
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert!(o.closed, "{what}: the server kept the connection open");
        let line = server
            .wait_for_line(
                &format!("peer={} summary=", o.local),
                Duration::from_secs(5),
            )
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert!(
            line.contains(reason),
            "{what}: logged {line:?}, expected {reason:?}"
        );
        match what {
            "wrong token" => assert_eq!(&o.received[6..8], &2u16.to_le_bytes(), "{what}"),
            "wrong version" => {
                assert_eq!(&o.received[4..6], &1u16.to_le_bytes(), "server's version");
                assert_eq!(&o.received[6..8], &1u16.to_le_bytes(), "{what}")
            }
            "trickle" => {
                assert!(!o.sent_all, "the trickler got to send its whole frame");
                trickle_end = line.clone();
            }
            _ => {}
        }
    }

    let (out, _) = wait_bounded(good, Duration::from_secs(120)).expect("good client finishes");
    let s = summary(&out).unwrap();
    assert_eq!(s["acked_ok"], 20000, "{s}");
    verify_file(
        &dir.join("replica").join("good"),
        7,
        4096,
        20000,
        20000 * 4096,
    )
    .unwrap();
    assert!(server.is_running(), "the server died: {}", server.log());

    // The good connection was open while the trickler was cut off.
    let log = server.log();
    let lines: Vec<&str> = log.lines().collect();
    let good_end = lines
        .iter()
        .find(|l| l.contains("(volume good)"))
        .expect("good connection's end line");
    let conn = good_end
        .split(' ')
        .find(|f| f.starts_with("conn="))
        .expect("conn=N in the end line");
    let good_start = lines
        .iter()
        .position(|l| l.contains(CONNECTION_START) && l.split(' ').any(|f| f == conn))
        .expect("good connection's start line");
    let trickle_pos = lines.iter().position(|l| *l == trickle_end).unwrap();
    assert!(
        good_start < trickle_pos,
        "the good client did not overlap the bad ones:\n{log}"
    );
}

/// Sends the hello at once, reads the hello ack, then trickles the rest one byte a second.
fn raw_peer_after_hello(
    ns: &Netns,
    server: SocketAddr,
    bytes: Vec<u8>,
    hello_len: usize,
) -> JoinHandle<Result<PeerOutcome>> {
    ns.spawn(move || {
        let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
        let local = s.local_addr()?;
        s.write_all(&bytes[..hello_len])?;
        let mut ack = [0u8; 16];
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.read_exact(&mut ack)?;
        ensure!(ack[6..8] == [0, 0], "handshake refused: {ack:?}");
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        let mut buf = [0u8; 64];
        let outcome = |closed: bool| PeerOutcome {
            local,
            received: ack.to_vec(),
            closed,
            sent_all: !closed,
        };
        for b in &bytes[hello_len..] {
            if s.write_all(std::slice::from_ref(b)).is_err() {
                return Ok(outcome(true));
            }
            // A one-second read is the pause between bytes and tells whether the server
            // has closed the connection.
            match s.read(&mut buf) {
                Ok(0) => return Ok(outcome(true)),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => return Ok(outcome(true)),
            }
        }
        Ok(outcome(false))
    })
}

/// A client writing to `volume` until it fails (with a replica timeout of `timeout_s`),
/// returned once its writes are flowing (the volume file has grown past 1 MiB).
fn endless_client(
    pair: &HostPair,
    addr: SocketAddr,
    dir: &ScratchDir,
    volume: &str,
    timeout_s: u32,
) -> std::process::Child {
    let token = dir.join("token");
    let client = client_cmd(
        &pair.a,
        addr,
        &[
            "--token-file",
            token.to_str().unwrap(),
            "--volume",
            volume,
            "--count",
            "100000000",
            "--size",
            &(16u64 << 20).to_string(),
            "--timeout",
            &timeout_s.to_string(),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("client starts");
    let file = dir.join("replica").join(volume);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&file).map_or(0, |m| m.len()) < (1 << 20) {
        assert!(Instant::now() < deadline, "no writes reached the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
    client
}

/// kill -9 of the server during a stream of writes: the client exits non-zero, naming the
/// replica and the writes that failed, instead of hanging.
#[test]
fn killed_replica_fails_the_client_naming_it() {
    if !require_root("killed_replica_fails_the_client_naming_it") {
        return;
    }
    let pair = HostPair::new("repl-kill").expect("host pair");
    let dir = ScratchDir::new("repl-kill").unwrap();
    let mut server = start_server(&pair, &dir, &[]);
    let addr = server.addr;
    let client = endless_client(&pair, addr, &dir, "stream", 3);
    server.signal(libc::SIGKILL);
    let _ = server.child.wait();
    let (out, _) = wait_bounded(client, Duration::from_secs(15))
        .expect("the client gives up within its timeout, not hangs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("replica {addr} failed")),
        "{stderr}"
    );
    assert!(stderr.contains("outstanding write(s) failed"), "{stderr}");
}

/// A replica that stops answering (SIGSTOP) fails the client after its timeout, naming the
/// replica and the request that got no ack.
#[test]
fn stalled_replica_times_out_naming_it() {
    if !require_root("stalled_replica_times_out_naming_it") {
        return;
    }
    let pair = HostPair::new("repl-stall").expect("host pair");
    let dir = ScratchDir::new("repl-stall").unwrap();
    let server = start_server(&pair, &dir, &[]);
    let addr = server.addr;
    let client = endless_client(&pair, addr, &dir, "stall", 2);
    server.signal(libc::SIGSTOP);
    let result = wait_bounded(client, Duration::from_secs(15));
    server.signal(libc::SIGCONT);
    let (out, _) = result.expect("the client gives up after its timeout, not hangs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("replica {addr} failed")),
        "{stderr}"
    );
    assert!(
        stderr.contains("no ack for request") || stderr.contains("send blocked"),
        "{stderr}"
    );
}

/// Bad configuration is a one-line error and exit code 2, before anything listens.
#[test]
fn serve_refuses_bad_configuration() {
    if !require_root("serve_refuses_bad_configuration") {
        return;
    }
    let dir = ScratchDir::new("repl-config").unwrap();
    let empty_token = dir.join("empty");
    std::fs::write(&empty_token, "\n").unwrap();
    let bin = bins::path("loadgen");
    let run = |args: &[&str]| {
        std::process::Command::new(&bin)
            .arg("serve")
            .args(args)
            .output()
            .unwrap()
    };
    let d = dir.path.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--listen", "127.0.0.1:0", "--dir", "/nonexistent/stornet"],
            "--dir /nonexistent/stornet",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--dir",
                d,
                "--token-file",
                empty_token.to_str().unwrap(),
            ],
            "is empty",
        ),
        (
            &["--listen", "not-an-address", "--dir", d],
            "not-an-address",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--dir",
                d,
                "--frame-timeout",
                "0",
            ],
            "frame-timeout",
        ),
    ];
    for (args, needle) in cases {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
