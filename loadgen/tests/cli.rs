//! `loadgen run` as a user runs it: bad values give one line and exit 2; small real runs on
//! a regular file give fio-shaped JSON, sweeps and job files work. No root needed.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("run")
        .args(args)
        .output()
        .expect("loadgen runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let o = loadgen(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line, got {err:?}"
    );
    assert!(err.starts_with("loadgen: error: "), "{err}");
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
}

#[test]
fn bad_values_exit_2_with_one_line() {
    let f = scratch("bad");
    let file = format!("--filename={}", f.display());
    assert_usage_error(&[&file, "--size=1M", "--bs=1000"], "multiple of 512");
    assert_usage_error(&[&file, "--size=1M", "--iodepth=0"], "--iodepth");
    assert_usage_error(&[&file, "--size=1M", "--rw=sideways"], "unknown rw");
    assert_usage_error(
        &["--filename=/dev/stornet-no-such-device"],
        "does not exist",
    );
    assert_usage_error(
        &["--filename=/stornet-no-such-dir/f", "--size=1M"],
        "directory /stornet-no-such-dir does not exist",
    );
    assert_usage_error(&[&file], "give --size");
    assert_usage_error(&[&file, "--size=2k", "--bs=4k"], "smaller than --bs");
    assert_usage_error(&[&file, "--size=1M", "--bogus=1"], "unknown option --bogus");
    assert_usage_error(&[&file, "--size=1M", "--time_based"], "needs --runtime");
    assert_usage_error(&[&file, "--size=1M", "--runtime=soon"], "--runtime");
    assert_usage_error(
        &[&file, "--size=1M", "--metrics-address=nowhere"],
        "metrics-address",
    );
    assert_usage_error(&["/stornet-no-such-job-file.fio"], "cannot read job file");
    assert_usage_error(&[&file, "--size=1M", "--replica=nowhere:7480"], "--replica");
    assert_usage_error(&[&file, "--size=1M", "--replica=198.18.0.2"], "with a port");
    assert_usage_error(
        &[&file, "--size=1M", "--replica_timeout=5s"],
        "need --replica",
    );
    assert_usage_error(
        &[
            &file,
            "--size=1M",
            "--replica=198.18.0.2:7480",
            "--replica_timeout=0",
        ],
        "--replica_timeout",
    );
    assert_usage_error(
        &[
            &file,
            "--size=1M",
            "--replica=198.18.0.2:7480",
            "--replica_token_file=/stornet-no-such-token",
        ],
        "--replica_token_file",
    );
    // Kernel interfaces are not storage, existing files there or new ones.
    assert_usage_error(
        &[
            "--filename=/proc/sys/vm/drop_caches",
            "--size=4k",
            "--rw=write",
        ],
        "is on proc, a kernel interface",
    );
    assert_usage_error(
        &[
            "--filename=/sys/kernel/stornet-test",
            "--size=4k",
            "--rw=write",
        ],
        "is on sysfs, a kernel interface",
    );
    // More buffer memory than any machine here has: refused, not killed part way.
    assert_usage_error(
        &[
            &file,
            "--size=1G",
            "--bs=64m",
            "--iodepth=4096",
            "--numjobs=64",
        ],
        "the IO buffers need 16384.0 GiB (bs × iodepth × numjobs), but only",
    );
    assert!(!f.exists(), "refused runs create no file");
}

/// A stderr whose reader went away costs the messages, not the run or its report.
#[test]
fn a_broken_stderr_keeps_the_report() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let f = scratch("brokenerr");
    // A pipe whose read end is closed before the run starts (so no other process of this
    // test binary can hold it open by chance).
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors, which are owned from here on.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(read_end);
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "run",
            &format!("--filename={}", f.display()),
            "--direct=0",
            "--size=1M",
            "--output-format=json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(write_end)
        .spawn()
        .unwrap();
    // Laying out the file is announced on stderr, which nobody reads.
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    let j: Value = serde_json::from_str(&out).expect("the report is on stdout");
    assert_eq!(j["jobs"][0]["read"]["io_bytes"], 1 << 20);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn help_lists_the_fio_options() {
    let o = loadgen(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for opt in [
        "--rw=RW",
        "--bs=",
        "--iodepth=",
        "--rate_iops=N",
        "--verify",
        "--profile=",
    ] {
        assert!(text.contains(opt), "help lacks {opt}");
    }
}

#[test]
fn json_on_stdout_has_fio_paths_and_a_result_per_sweep_point() {
    let f = scratch("sweep");
    let file = format!("--filename={}", f.display());
    let o = loadgen(&[
        "--name=sweep",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--bs=4k,8k",
        "--iodepth=1,4",
        "--output-format=json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: Value = serde_json::from_slice(&o.stdout).expect("stdout is only JSON");
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4, "one result per point");
    let shapes: Vec<(String, String)> = jobs
        .iter()
        .map(|x| {
            (
                x["job options"]["bs"].as_str().unwrap().to_string(),
                x["job options"]["iodepth"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [("4k", "1"), ("4k", "4"), ("8k", "1"), ("8k", "4")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for (i, x) in jobs.iter().enumerate() {
        assert_eq!(x["jobname"], "sweep");
        assert_eq!(x["groupid"], i);
        assert_eq!(
            x["read"]["io_bytes"],
            1 << 20,
            "size-based: 1 MiB per point"
        );
        assert!(
            x["read"]["clat_ns"]["percentile"]["99.000000"]
                .as_u64()
                .unwrap()
                > 0
        );
        assert!(x["read"]["lat_ns"]["mean"].as_f64().unwrap() > 0.0);
        assert!(x["read"]["iops"].as_f64().unwrap() > 0.0);
        assert_eq!(x["write"]["total_ios"], 0);
    }
    assert_eq!(j["loadgen"]["points"].as_array().unwrap().len(), 4);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn job_files_and_text_reports() {
    let f = scratch("jobfile");
    let jf = scratch("jobfile.fio");
    std::fs::write(
        &jf,
        format!(
            "; two jobs\n[global]\nfilename={}\ndirect=0\nsize=1M\nbs=4k\n\n[reader]\nrw=randread\niodepth=4\n\n[writer]\nrw=write\n",
            f.display()
        ),
    )
    .unwrap();
    let o = loadgen(&[jf.to_str().unwrap(), "--output-format=json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = j["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reader", "writer"]);
    assert_eq!(j["jobs"][1]["write"]["io_bytes"], 1 << 20);

    let o = loadgen(&[jf.to_str().unwrap(), "--group_reporting"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("reader (2 jobs merged)"), "{text}");
    assert!(text.contains("IOPS="), "{text}");
    assert!(text.contains("timeline"), "{text}");
    assert!(text.contains("per IO"), "{text}");
    let _ = std::fs::remove_file(&f);
    let _ = std::fs::remove_file(&jf);
}

/// GET /metrics with a 3 s deadline; the status code, or None without an answer.
fn scrape_status(addr: std::net::SocketAddr) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A client that sends its request one byte at a time does not hold up other scrapes of
/// --metrics-address.
#[test]
fn a_trickling_client_does_not_block_live_metrics() {
    use std::io::Write;
    let f = scratch("trickle");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "run",
            &format!("--filename={}", f.display()),
            "--direct=0",
            "--size=1M",
            "--rate_iops=100",
            "--time_based",
            "--runtime=6s",
            &format!("--metrics-address={addr}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while scrape_status(addr) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "--metrics-address does not answer"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut trickler = std::net::TcpStream::connect(addr).unwrap();
    let trickling = std::thread::spawn(move || {
        for b in b"GET /metrics HTTP/1.1\r\n" {
            if trickler.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1500));
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let during = scrape_status(addr);
    let _ = child.wait();
    drop(trickling);
    let _ = std::fs::remove_file(&f);
    assert_eq!(during, Some(200), "a scrape while another client trickles");
}
