//! Replication and run records when the disk fills up: a replica whose directory is full
//! fails the run naming the replica and the reason, and a run record that cannot be written
//! fails the run naming the file, with the report still printed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stornet_lab::agent::free_port;
use stornet_lab::bins;
use stornet_lab::fs::{Mount, TempDir};
use stornet_lab::loadgen::{Run, command};
use stornet_lab::privilege::require_root;

/// A 1 MiB tmpfs in a fresh directory. Bound as `let (dir, _mount)`, it is unmounted
/// before the directory is removed.
fn small_tmpfs(tag: &str) -> (TempDir, Mount) {
    let dir = TempDir::new(tag).expect("temp dir");
    let m = Mount::new("tmpfs", "tmpfs", &dir.path, "size=1m").expect("tmpfs");
    (dir, m)
}

/// `loadgen serve` on loopback, killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_full_replica_is_named_with_the_reason() {
    if !require_root("a_full_replica_is_named_with_the_reason") {
        return;
    }
    let (full, _mount) = small_tmpfs("replica-full");
    let local = TempDir::new("replica-full-local").unwrap();
    let port = free_port().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let _serve = Serve(
        Command::new(bins::path("loadgen"))
            .args(["serve", "--listen", &addr, "--dir"])
            .arg(&full.path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen serve"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "loadgen serve does not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 4 MiB of writes into a 1 MiB replica directory.
    let file = local.path.join("local");
    let r = Run::from_output(
        command(&[
            &format!("--filename={}", file.display()),
            "--size=4M",
            "--rw=write",
            "--bs=64k",
            &format!("--replica={addr}"),
        ])
        .output()
        .unwrap(),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("loadgen: error:"))
        .unwrap_or_else(|| panic!("no error line: {}", r.stderr));
    assert!(line.contains(&format!("replica {addr} failed")), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
}

#[test]
fn a_record_on_a_full_filesystem_fails_and_the_report_stays() {
    if !require_root("a_record_on_a_full_filesystem_fails_and_the_report_stays") {
        return;
    }
    let (full, _mount) = small_tmpfs("record-full");
    let local = TempDir::new("record-full-local").unwrap();
    let record = full.path.join("run.json");
    let child = command(&[
        &format!("--filename={}", local.path.join("data").display()),
        "--size=4M",
        "--direct=0",
        "--rw=randread",
        "--time_based",
        "--runtime=2",
        &format!("--record={}", record.display()),
        "--output-format=json",
    ])
    .spawn()
    .unwrap();
    // The record's place was checked at the start (its temporary file exists): now the
    // file system fills up before the run ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_dir(&full.path)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(".run.json.tmp"))
    {
        assert!(Instant::now() < deadline, "no temporary record file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let filler = std::fs::write(full.path.join("filler"), vec![0u8; 2 << 20]);
    assert!(filler.is_err(), "the filler must fill the file system");
    let r = Run::from_output(child.wait_with_output().unwrap());
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let errors: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("loadgen: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    assert!(
        errors[0].contains(&record.display().to_string())
            && errors[0].contains("No space left on device"),
        "{}",
        errors[0]
    );
    let report = r.json().expect("the report is on stdout");
    assert!(report["jobs"][0]["read"]["total_ios"].as_u64().unwrap() > 0);
    // Neither a half record nor its temporary file is left.
    let left: Vec<String> = std::fs::read_dir(&full.path)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["filler"]);
}
