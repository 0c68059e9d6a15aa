//! `loadgen run --replica`: the client in one namespace writing to a loop device, `loadgen
//! serve` replicas in another, joined by veth. The replica's files are read back here and
//! compared with the local device block by block, the servers' own write counts are compared
//! with the client's JSON, and killed or stalled replicas must fail the run with a message
//! that names them.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use stornet_lab::bins;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::{Run, at, num};
use stornet_lab::netns::{HostPair, Netns};
use stornet_lab::privilege::require_root;
use stornet_lab::replica::{ScratchDir, ServeProcess, wait_bounded};

const TOKEN: &str = "repl-run-token";
const SIZE: u64 = 16 << 20;
const BS: usize = 4096;
/// The verify header's magic (docs/loadgen.md, Verification): the first 8 bytes of every
/// block loadgen writes with --verify.
const VERIFY_MAGIC: &[u8; 8] = b"stornetV";

/// `loadgen run <args>` inside `ns`, stdout and stderr captured.
fn run_in(ns: &Netns, args: &[&str]) -> Child {
    ns.command(bins::path("loadgen").to_str().expect("utf-8 path"))
        .arg("run")
        .arg("--direct=1")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen run starts")
}

fn finish(child: Child, limit: Duration) -> Run {
    let (out, _) = wait_bounded(child, limit).expect("loadgen run ends");
    Run::from_output(out)
}

/// A replica server on `port` of host b, with the token, writing into `dir/<name>`.
fn replica(pair: &HostPair, dir: &ScratchDir, name: &str, port: u16) -> ServeProcess {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let addr = SocketAddr::new(pair.b_addr().into(), port);
    ServeProcess::start(
        &pair.b,
        addr,
        &root,
        &["--token-file", token.to_str().unwrap()],
    )
    .expect("loadgen serve starts")
}

/// Blocks of the first `SIZE` bytes of `path`.
fn blocks(path: &Path) -> Vec<Vec<u8>> {
    let mut data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    data.resize(SIZE as usize, 0);
    data.chunks(BS).map(<[u8]>::to_vec).collect()
}

/// Every block the run wrote to the local device (it carries a verify header) is on the
/// replica byte for byte, and the replica holds nothing else. Returns the blocks compared.
fn assert_mirrors(local: &Path, replica: &Path) -> usize {
    let (l, r) = (blocks(local), blocks(replica));
    let mut written = 0;
    for (i, (lb, rb)) in l.iter().zip(&r).enumerate() {
        if &lb[..8] == VERIFY_MAGIC {
            written += 1;
            assert!(
                lb == rb,
                "block {i} (offset {}) differs on the replica",
                i * BS
            );
        } else {
            assert!(
                rb.iter().all(|&b| b == 0),
                "block {i} on the replica was never written locally"
            );
        }
    }
    written
}

fn leg_counts(j: &Value) -> Vec<(String, f64)> {
    at(j, "jobs/0/write/legs")
        .and_then(Value::as_array)
        .expect("write legs")
        .iter()
        .map(|l| (l["name"].as_str().unwrap().to_string(), num(l, "lat_ns/N")))
        .collect()
}

/// Random writes at QD16 with --verify, then a sequential fill: every write is on the
/// replica byte-exact (compared block by block with the loop device), `--verify` reading
/// the replica's file finds every block's header in place, and the server counted as many
/// writes as the client reported.
#[test]
fn replicated_writes_land_byte_exact() {
    if !require_root("replicated_writes_land_byte_exact") {
        return;
    }
    let pair = HostPair::new("rrun-exact").expect("host pair");
    let dir = ScratchDir::new("rrun-exact").unwrap();
    let server = replica(&pair, &dir, "r", 7480);
    let disk = LoopDevice::new("rrun-exact", SIZE).expect("loop device");
    let dev = disk.dev.to_str().unwrap();
    let token = dir.join("token");
    let common = [
        "--name=mirror",
        &format!("--filename={dev}"),
        "--size=16M",
        "--bs=4k",
        "--verify",
        &format!("--replica={}", server.addr),
        &format!("--replica_token_file={}", token.display()),
        "--output-format=json",
        "--eta=never",
    ]
    .map(String::from);
    let common: Vec<&str> = common.iter().map(String::as_str).collect();

    let mut random = common.clone();
    random.extend([
        "--rw=randwrite",
        "--iodepth=16",
        "--time_based",
        "--runtime=2",
    ]);
    let r = finish(run_in(&pair.a, &random), Duration::from_secs(60));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();
    let writes = num(&j, "jobs/0/write/total_ios");
    assert!(writes > 0.0);
    assert_eq!(
        leg_counts(&j),
        vec![
            ("local".to_string(), writes),
            (format!("replica {}", server.addr), writes)
        ]
    );
    server
        .wait_for_ends(1, Duration::from_secs(10))
        .expect("the connection ends with the run");
    assert_eq!(
        server.writes_logged("mirror.0") as f64,
        writes,
        "the server's count of writes"
    );
    let volume = dir.join("r").join("mirror.0");
    let mirrored = assert_mirrors(&disk.dev, &volume);
    assert!(mirrored > 100, "only {mirrored} blocks written");

    let mut fill = common.clone();
    fill.extend(["--rw=write", "--iodepth=8"]);
    let f = finish(run_in(&pair.a, &fill), Duration::from_secs(60));
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    assert_eq!(num(&f.json().unwrap(), "jobs/0/write/total_ios"), 4096.0);
    assert_eq!(assert_mirrors(&disk.dev, &volume), 4096);

    // loadgen's own verify mode on the replica's file: every header in place, crc intact.
    let check = stornet_lab::loadgen::run(&[
        &format!("--filename={}", volume.display()),
        "--size=16M",
        "--bs=4k",
        "--rw=read",
        "--verify",
        "--output-format=json",
        "--eta=never",
    ])
    .unwrap();
    assert_eq!(check.code, Some(0), "{}", check.stderr);
    assert_eq!(
        num(
            &check.json().unwrap(),
            "jobs/0/loadgen/verify/blocks_checked"
        ),
        4096.0
    );
}

/// Two replicas (two servers on host b): each gets every write, the JSON has one leg per
/// replica with the write count, and each server counted the same number of writes.
#[test]
fn two_replicas_receive_every_write() {
    if !require_root("two_replicas_receive_every_write") {
        return;
    }
    let pair = HostPair::new("rrun-two").expect("host pair");
    let dir = ScratchDir::new("rrun-two").unwrap();
    let s1 = replica(&pair, &dir, "r1", 7480);
    let s2 = replica(&pair, &dir, "r2", 7481);
    let disk = LoopDevice::new("rrun-two", SIZE).expect("loop device");
    let token = dir.join("token");
    let args = [
        "--name=pair",
        &format!("--filename={}", disk.dev.display()),
        "--size=16M",
        "--bs=4k",
        "--rw=randwrite",
        "--iodepth=16",
        "--numjobs=2",
        "--group_reporting",
        "--time_based",
        "--runtime=2",
        "--verify=0",
        &format!("--replica={}", s1.addr),
        &format!("--replica={}", s2.addr),
        &format!("--replica_token_file={}", token.display()),
        "--output-format=json",
        "--eta=never",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = finish(run_in(&pair.a, &args), Duration::from_secs(60));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let j = r.json().unwrap();
    let writes = num(&j, "jobs/0/write/total_ios");
    assert!(writes > 0.0);
    assert_eq!(
        leg_counts(&j),
        vec![
            ("local".to_string(), writes),
            (format!("replica {}", s1.addr), writes),
            (format!("replica {}", s2.addr), writes),
        ]
    );
    for s in [&s1, &s2] {
        // Both job threads share the device, so both write volume pair.0.
        s.wait_for_ends(2, Duration::from_secs(10)).unwrap();
        assert_eq!(s.writes_logged("pair.0") as f64, writes, "{}", s.log());
    }
    // Per-interval leg columns in the timeline.
    let row = at(&j, "loadgen/points/0/timeline/0/write/legs").expect("timeline legs");
    assert_eq!(row.as_array().unwrap().len(), 3, "{row}");
}

/// Starts a long replicated run and waits until writes reach the replica.
fn start_long_run(
    pair: &HostPair,
    dir: &ScratchDir,
    server: &ServeProcess,
    disk: &LoopDevice,
) -> Child {
    let token = dir.join("token");
    let args = [
        "--name=long",
        &format!("--filename={}", disk.dev.display()),
        "--size=16M",
        "--rw=randwrite",
        "--iodepth=16",
        "--numjobs=2",
        "--time_based",
        "--runtime=120",
        &format!("--replica={}", server.addr),
        &format!("--replica_token_file={}", token.display()),
        "--replica_timeout=3s",
        "--eta=never",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = run_in(&pair.a, &args);
    let volume = dir.join("r").join("long.0");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&volume).map_or(0, |m| m.len()) < (1 << 20) {
        assert!(Instant::now() < deadline, "no writes reached the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The count in "N write(s) failed" of an error line.
fn failed_writes(stderr: &str) -> u64 {
    let before = stderr
        .split(" write(s) failed")
        .next()
        .expect("a failed-writes count");
    before
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {stderr:?}"))
}

/// kill -9 of the replica mid-run: the run ends with exit status 1 instead of hanging (well
/// within its 120 s runtime), naming the replica and how many writes failed: at most the two
/// jobs' queues of 16.
#[test]
fn killed_replica_fails_the_run_naming_it() {
    if !require_root("killed_replica_fails_the_run_naming_it") {
        return;
    }
    let pair = HostPair::new("rrun-kill").expect("host pair");
    let dir = ScratchDir::new("rrun-kill").unwrap();
    let mut server = replica(&pair, &dir, "r", 7480);
    let disk = LoopDevice::new("rrun-kill", SIZE).expect("loop device");
    let client = start_long_run(&pair, &dir, &server, &disk);
    server.signal(libc::SIGKILL);
    let _ = server.child.wait();
    let r = finish(client, Duration::from_secs(30));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("error: replica {} failed: ", server.addr)),
        "{}",
        r.stderr
    );
    let n = failed_writes(&r.stderr);
    assert!((1..=32).contains(&n), "{n} failed writes: {}", r.stderr);
    assert!(
        r.stdout.is_empty(),
        "no report of a failed run: {}",
        r.stdout
    );
}

/// A replica that stops answering (SIGSTOP) fails the run after --replica_timeout, naming
/// it and the request that got no ack.
#[test]
fn stalled_replica_fails_the_run_after_the_timeout() {
    if !require_root("stalled_replica_fails_the_run_after_the_timeout") {
        return;
    }
    let pair = HostPair::new("rrun-stall").expect("host pair");
    let dir = ScratchDir::new("rrun-stall").unwrap();
    let server = replica(&pair, &dir, "r", 7480);
    let disk = LoopDevice::new("rrun-stall", SIZE).expect("loop device");
    let client = start_long_run(&pair, &dir, &server, &disk);
    server.signal(libc::SIGSTOP);
    let result = wait_bounded(client, Duration::from_secs(30));
    server.signal(libc::SIGCONT);
    let r = Run::from_output(result.expect("the run gives up, not hangs").0);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "error: replica {} failed: no ack for request ",
            server.addr
        )) && r.stderr.contains("within 3s"),
        "{}",
        r.stderr
    );
    let n = failed_writes(&r.stderr);
    assert!((1..=32).contains(&n), "{n} failed writes: {}", r.stderr);
}
