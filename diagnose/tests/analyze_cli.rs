//! `stornet analyze` as a user runs it: synthetic records of every cause get their verdict
//! and an HTML report, bad files and arguments give one line and exit 2, and fleet mode
//! fails clearly on a Prometheus that cannot answer. (Records of real runs:
//! loadgen/tests/run_record.rs.) No root needed.

#[allow(
    dead_code,
    reason = "the synthetic lab of the analysis tests; this test uses a part"
)]
#[path = "../../analysis/tests/synth/mod.rs"]
mod synth;

use std::path::PathBuf;
use std::process::{Command, Output};

use record::Record;
use serde_json::Value;
use synth::{Fault, Lab};

fn stornet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stornet"))
        .args(args)
        .output()
        .expect("stornet runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("stornet-analyze-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn record(run: analysis::Run) -> Record {
    Record::for_run("h1", run)
}

fn json(o: &Output) -> Value {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON document on stdout")
}

#[test]
fn every_cause_is_named_from_a_synthetic_record() {
    let cases = [
        (Lab::new(Fault::Congestion).noisy(), "network_congestion"),
        (Lab::new(Fault::Saturation).noisy(), "device_saturation"),
        (Lab::new(Fault::SlowDevice).noisy(), "slow_device"),
        (Lab::new(Fault::Mtu), "mtu_mismatch"),
        (Lab::new(Fault::SlowDevice).throughout(), "slow_device"),
        (Lab::new(Fault::None).noisy(), "none"),
    ];
    for (i, (lab, cause)) in cases.into_iter().enumerate() {
        let path = scratch(&format!("cause-{i}.json"));
        record(lab.build()).write(&path).unwrap();
        let v = json(&stornet(&[
            "analyze",
            path.to_str().unwrap(),
            "--format=json",
        ]));
        assert_eq!(v["verdict"]["cause"], cause, "case {i}: {v:#}");
        assert_eq!(v["source"]["record"]["path"], path.to_str().unwrap());
        let conf = v["verdict"]["confidence"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&conf));
        assert!(!v["verdict"]["evidence"].as_array().unwrap().is_empty());
        let write = v["hosts"][0]["directions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["direction"] == "write")
            .expect("writes analysed");
        assert!(
            write["signals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["rho"].is_number()),
            "per-signal scores"
        );
        let o = stornet(&["analyze", path.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(&format!("verdict: {cause}")), "{text}");
        assert!(text.contains("p99 write latency"), "{text}");
    }
}

#[test]
fn congestion_evidence_reads_like_an_operator_writes_it() {
    let path = scratch("congestion.json");
    let html = scratch("congestion.html");
    record(Lab::new(Fault::Congestion).build())
        .write(&path)
        .unwrap();
    let o = stornet(&[
        "analyze",
        path.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "verdict: network_congestion",
        "in 12 of 40 intervals",
        "of the rise is waiting for replica 198.18.0.2",
        "retransmits to 198.18.0.2 in the 12 raised intervals",
        "rank correlation",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        !page.contains(" src=") && !page.contains(" href="),
        "self-contained: nothing fetched"
    );
    // The latency, the congestion counters and the breakdown are drawn with 40 points each.
    let long = page
        .split("<polyline points=\"")
        .skip(1)
        .filter(|p| p.split('"').next().unwrap().split(' ').count() >= 40)
        .count();
    assert!(long >= 5, "{long} polylines with 40 points");
    assert!(page.contains("replica 198.18.0.2 round trip"));
    assert!(page.contains("class=\"shade\""), "raised intervals shaded");
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let o = stornet(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
    let lines: Vec<&str> = err.trim_end().lines().collect();
    // clap adds a usage hint after its own one-line error.
    assert!(
        lines.len() == 1 || lines[0].starts_with("error: "),
        "{args:?}: {err:?}"
    );
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
}

#[test]
fn bad_records_and_arguments_exit_2_with_one_line() {
    let missing = scratch("missing.json");
    let p = |name: &str, text: &str| {
        let f = scratch(name);
        std::fs::write(&f, text).unwrap();
        f.to_str().unwrap().to_string()
    };
    let garbage = p("garbage.json", "\u{0}\u{1}not json at all");
    let fio = p("fio.json", "{\"fio version\": \"fio-3.33\", \"jobs\": []}");
    let future = p(
        "future.json",
        "{\"format\": \"stornet-run-record\", \"version\": 99}",
    );
    let truncated = {
        let f = scratch("truncated-src.json");
        record(Lab::new(Fault::None).build()).write(&f).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        p("truncated.json", &text[..text.len() / 2])
    };
    let misaligned = {
        let mut r = record(Lab::new(Fault::None).build());
        r.points[0].run.hosts[0]
            .write
            .as_mut()
            .unwrap()
            .p99_seconds
            .pop();
        let f = scratch("misaligned.json");
        r.write(&f).unwrap();
        f.to_str().unwrap().to_string()
    };
    assert_usage_error(&["analyze", missing.to_str().unwrap()], "cannot read");
    assert_usage_error(&["analyze", &garbage], "not JSON");
    assert_usage_error(&["analyze", &fio], "not a stornet run record");
    assert_usage_error(&["analyze", &future], "record version 99");
    let fractional = p(
        "fractional.json",
        "{\"format\": \"stornet-run-record\", \"version\": 1.5}",
    );
    assert_usage_error(
        &["analyze", &fractional],
        "version 1.5 is not a whole number",
    );
    assert_usage_error(
        &["analyze", "/dev/zero"],
        "is a character device, not a file",
    );
    assert_usage_error(&["analyze", &truncated], "not JSON");
    assert_usage_error(&["analyze", &misaligned], "p99_seconds has 39 entries");
    assert_usage_error(&["analyze"], "give a run record");
    assert_usage_error(&["analyze", &fio, "--format=xml"], "--format");
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "http://127.0.0.1:1",
            "--end",
            "now",
        ],
        "needs --start",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "127.0.0.1:9090",
            "--start=now-5m",
            "--end=now",
        ],
        "not an http:// or https:// URL",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "https://127.0.0.1:1",
            "--start=now-5m",
            "--end=now",
            "--prometheus-ca-file=/stornet-no-such-dir/ca.pem",
        ],
        "--prometheus-ca-file /stornet-no-such-dir/ca.pem: cannot read it",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "http://127.0.0.1:1",
            "--start=yesterday",
            "--end=now",
        ],
        "--start: `yesterday` is not a time",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "http://127.0.0.1:1",
            "--start=now",
            "--end=now-1h",
        ],
        "--end must be after --start",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "http://127.0.0.1:1",
            "--start=now-1m",
            "--end=now",
            "--step=soon",
        ],
        "--step",
    );
    assert_usage_error(
        &[
            "analyze",
            "--prometheus",
            "http://127.0.0.1:1",
            "--start=now-1m",
            "--end=now",
            "--selector={job=\"a\"",
        ],
        "unbalanced braces",
    );
    assert_usage_error(
        &["analyze", &fio, "--start=now"],
        "--start belongs to fleet mode",
    );
    let watch = ["analyze", "--prometheus", "http://127.0.0.1:1", "--watch"];
    assert_usage_error(
        &[&watch[..], &["--start=now-1m", "--end=1700000000"]].concat(),
        "--end=1700000000: --watch needs a window that moves with the clock",
    );
    assert_usage_error(
        &[
            &watch[..],
            &["--start=now-1m", "--end=now", "--html=/tmp/w.html"],
        ]
        .concat(),
        "--watch prints a line per step and writes no HTML report",
    );
    assert_usage_error(
        &["analyze", &fio, "--watch"],
        "--watch belongs to fleet mode",
    );
    let html_dir = scratch("no-such-dir").join("r.html");
    let good = scratch("good.json");
    record(Lab::new(Fault::None).build()).write(&good).unwrap();
    let o = stornet(&[
        "analyze",
        good.to_str().unwrap(),
        "--html",
        html_dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--html: cannot write"));
}

#[test]
fn an_unreachable_prometheus_is_a_runtime_failure() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = stornet(&[
        "analyze",
        "--prometheus",
        &format!("http://127.0.0.1:{port}"),
        "--start=now-2m",
        "--end=now",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("Prometheus at http://127.0.0.1"), "{err}");
}

#[test]
fn a_watch_reports_a_failed_query_and_goes_on() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_stornet"))
        .args([
            "watch",
            "--prometheus",
            &format!("http://127.0.0.1:{port}"),
            "--start=now-2m",
            "--end=now",
            "--step=200ms",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let got: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(alive, "the watch stopped after a failed query");
    for l in &got {
        assert!(
            l.contains(" error: Prometheus at http://127.0.0.1"),
            "{got:?}"
        );
    }
}

/// A Prometheus that answers without end: refused at the size limit, not read until the
/// memory runs out. (The limit is on all the answers of one analysis together.)
#[test]
fn an_endless_prometheus_answer_is_refused() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut req = [0u8; 4096];
                let _ = s.read(&mut req);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[",
                );
                let series =
                    b"{\"metric\":{\"instance\":\"a:1\"},\"values\":[[1,\"1\"]]},".repeat(1000);
                while s.write_all(&series).is_ok() {}
            });
        }
    });
    let o = stornet(&[
        "analyze",
        "--prometheus",
        &format!("http://{addr}"),
        "--start=now-2m",
        "--end=now",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("larger than 256 MiB in all"), "{err}");
}

/// Answers that are each of a fair size but together far too large (every query of the
/// analysis gets 24 MiB): refused once their sum passes the limit, instead of all being held.
#[test]
fn answers_too_large_together_are_refused() {
    use std::io::{Read, Write};
    use std::sync::Arc;
    let series = b"{\"metric\":{\"instance\":\"a:1\",\"device\":\"loop0\",\"op\":\"read\"},\"values\":[[1796013455,\"540\"]]},";
    let mut body =
        b"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[".to_vec();
    while body.len() < 24 << 20 {
        body.extend_from_slice(series);
    }
    body.pop();
    body.extend_from_slice(b"]}}");
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    let answer = Arc::new(answer);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let _ = s.read(&mut [0u8; 4096]);
                let _ = s.write_all(&answer);
            });
        }
    });
    let o = stornet(&[
        "analyze",
        "--prometheus",
        &format!("http://{addr}"),
        "--start=1796013451",
        "--end=1796013461",
        "--step=2s",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("larger than 256 MiB in all"), "{err}");
    assert!(err.contains("--selector"), "{err}");
}

/// A Prometheus that answers every query, each a little slowly, cannot hold fleet mode for
/// its dozens of queries times a minute each: all of them together get --timeout.
#[test]
fn fleet_queries_have_one_deadline_in_all() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut req = [0u8; 4096];
                let _ = s.read(&mut req);
                std::thread::sleep(std::time::Duration::from_millis(700));
                let body =
                    b"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}";
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(body);
            });
        }
    });
    let start = std::time::Instant::now();
    let o = stornet(&[
        "analyze",
        "--prometheus",
        &format!("http://{addr}"),
        "--start=now-2m",
        "--end=now",
        "--timeout=2",
    ]);
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("queries within 2 s"), "{err}");
    assert!(took < std::time::Duration::from_secs(8), "{took:?}");
}

/// Names from a record reach the terminal without their control characters.
#[test]
fn names_in_a_record_reach_the_terminal_plain() {
    let path = scratch("escape.json");
    let mut r = record(Lab::new(Fault::SlowDevice).noisy().build());
    r.points[0].run.hosts[0].name = "h\u{1b}]0;owned\u{7}\u{1b}[2J1".into();
    r.write(&path).unwrap();
    let o = stornet(&["analyze", path.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
}
