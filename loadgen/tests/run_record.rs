//! Real runs on a regular file write run records that the analysis reads (sweeps too), with
//! an HTML report, through `loadgen analyze` (the alias of `stornet analyze`, which says so
//! on stderr); and the options of a recorded run are checked before anything runs. No root
//! needed.

use std::path::PathBuf;
use std::process::{Command, Output};

use record::Record;
use serde_json::Value;

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("loadgen runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// `loadgen analyze`'s JSON, after its one line on stderr saying where the command moved.
fn json(o: &Output) -> Value {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with(
            "loadgen: note: `loadgen analyze` is now `stornet analyze` (same options, same output)\n"
        ),
        "{err}"
    );
    serde_json::from_slice(&o.stdout).expect("one JSON document on stdout")
}

fn real_run(name: &str, extra: &[&str]) -> (PathBuf, Output) {
    let file = scratch(&format!("{name}.data"));
    let rec = scratch(&format!("{name}.json"));
    let mut args = vec![
        "run".to_string(),
        format!("--filename={}", file.display()),
        "--size=4M".into(),
        "--direct=0".into(),
        "--rw=randrw".into(),
        "--time_based".into(),
        "--interval=100ms".into(),
        "--eta=never".into(),
        "--output-format=json".into(),
        format!("--record={}", rec.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(&args)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    (rec, o)
}

#[test]
fn a_run_writes_a_record_that_analyze_reads() {
    let (rec, o) = real_run("real", &["--runtime=1500ms", "--iodepth=4"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = Record::read(&rec).expect("the record reads back");
    assert_eq!(r.points.len(), 1);
    let p = &r.points[0];
    let rows = &r.result.points[0].timeline;
    assert!(rows.len() >= 10, "{} rows", rows.len());
    assert_eq!(p.run.starts.len(), rows.len());
    assert!((p.run.interval_seconds - 0.1).abs() < 1e-12);
    let host = &p.run.hosts[0];
    assert_eq!(host.name, r.host);
    let w = host.write.as_ref().expect("writes recorded");
    assert_eq!(w.p99_seconds.len(), rows.len());
    assert_eq!(w.histograms.len(), rows.len());
    // The record's IO counts are the run's: the interval histograms add up to its writes.
    let hist_total: u64 = w.histograms.iter().flatten().map(|h| h.total()).sum();
    let writes = report["loadgen"]["points"][0]["write"]["ios"]
        .as_u64()
        .unwrap();
    assert_eq!(hist_total, writes);
    assert_eq!(r.result.points[0].merged[1].ios, writes);

    let html = scratch("real.html");
    let v = json(&loadgen(&[
        "analyze",
        rec.to_str().unwrap(),
        "--format=json",
        "--html",
        html.to_str().unwrap(),
    ]));
    assert!(v["verdict"]["cause"].is_string());
    assert_eq!(v["hosts"][0]["host"], r.host.as_str());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Latency histograms"));
    assert!(page.contains("no agent was sampled"));
}

#[test]
fn a_sweep_gets_a_verdict_per_point() {
    let (rec, o) = real_run(
        "sweep",
        &["--runtime=1s", "--bs_sweep=4k,16k", "--iodepth_sweep=1,4"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = scratch("sweep.html");
    let v = json(&loadgen(&[
        "analyze",
        rec.to_str().unwrap(),
        "--format=json",
        "--html",
        html.to_str().unwrap(),
    ]));
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert_eq!(points[0]["label"], "bs=4k iodepth=1");
    assert_eq!(points[3]["label"], "bs=16k iodepth=4");
    assert!(
        v["verdict"]["evidence"][0]
            .as_str()
            .unwrap()
            .starts_with("sweep point ")
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Sweep: IOPS and p99 latency per point"));
    assert!(page.contains(">bs=16k iodepth=4<"));
    let o = loadgen(&["analyze", rec.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("== point 4 of 4: bs=16k iodepth=4 =="),
        "{text}"
    );
}

#[test]
fn run_options_for_records_are_checked_before_anything_runs() {
    let file = scratch("opts.data");
    let f = format!("--filename={}", file.display());
    for (args, needle) in [
        (
            vec!["--agent=http://127.0.0.1:9477"],
            "--agent needs --record",
        ),
        (
            vec!["--agent=127.0.0.1:9477", "--record=x.json"],
            "not an http:// or https:// URL",
        ),
        // The TLS files of --agent are read before anything runs.
        (
            vec![
                "--agent=https://127.0.0.1:1",
                "--record=x.json",
                "--agent-ca-file=/stornet-no-such-dir/ca.pem",
            ],
            "--agent-ca-file /stornet-no-such-dir/ca.pem: cannot read it: No such file",
        ),
        (
            vec![
                "--agent=https://127.0.0.1:1",
                "--record=x.json",
                "--agent-cert-file=/stornet-no-such-dir/c.pem",
            ],
            "--agent-cert-file needs --agent-key-file",
        ),
        (
            vec![
                "--agent=https://127.0.0.1:1",
                "--record=x.json",
                "--agent-insecure-skip-verify",
                "--agent-ca-file=/stornet-no-such-dir/ca.pem",
            ],
            "--agent-insecure-skip-verify and --agent-ca-file contradict each other",
        ),
        (
            vec!["--record=/stornet-no-such-dir/r.json"],
            "directory /stornet-no-such-dir does not exist",
        ),
        // Where the record and report go is checked before the workload, not after it.
        (
            vec!["--record=/proc/r.json"],
            "--record: cannot write /proc/r.json",
        ),
        (
            vec!["--output=/proc/r.txt"],
            "--output: cannot write /proc/r.txt",
        ),
        (
            vec!["--output=/stornet-no-such-dir/r.txt"],
            "directory /stornet-no-such-dir does not exist",
        ),
        (
            vec![
                "--agent=a=http://127.0.0.1:1",
                "--agent=a=http://127.0.0.1:2",
                "--record=x.json",
            ],
            "the name a is given twice",
        ),
    ] {
        let mut all = vec!["run", f.as_str(), "--size=1M"];
        all.extend(args.iter().copied());
        let o = loadgen(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!file.exists(), "{args:?}: nothing is created");
    }
}
