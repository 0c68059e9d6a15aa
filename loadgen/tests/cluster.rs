//! `loadgen run --client` against real `loadgen serve --jobs-listen` processes on loopback:
//! the merge is exact, the report is fio's client/server layout, and every refusal and
//! failure names the host. No root needed.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::{Host, controller, read_json, scratch, stderr, strings};

/// A latency histogram of a record as bucket → count.
fn bins(h: &Value) -> BTreeMap<u64, u64> {
    h["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap()))
        .collect()
}

#[test]
fn three_hosts_merge_bin_by_bin_in_fio_client_server_json() {
    let root = scratch("merge");
    let hosts: Vec<Host> = ["a", "b", "c"]
        .iter()
        .map(|n| Host::start(&root, n, &[]))
        .collect();
    let (report, record) = (root.join("report.json"), root.join("record.json"));
    let mut args: Vec<String> = hosts.iter().map(Host::client).collect();
    args.extend(strings(&[
        "--name=w",
        "--rw=randwrite",
        "--bs=4k",
        "--size=2m",
        "--iodepth=4",
        "--output-format=json",
    ]));
    args.push(format!("--output={}", report.display()));
    args.push(format!("--record={}", record.display()));
    let (out, _) = controller(&args);
    assert!(out.status.success(), "{}", stderr(&out));

    // fio's layout: one entry per host's job with its hostname, then "All clients".
    let j = read_json(&report);
    let stats = j["client_stats"].as_array().unwrap();
    assert_eq!(stats.len(), 4, "{stats:?}");
    for (e, h) in stats.iter().zip(&hosts) {
        assert_eq!(e["hostname"], h.name.as_str());
        assert_eq!(e["jobname"], "w");
        assert_eq!(
            e["write"]["total_ios"], 512,
            "2 MiB of 4 KiB writes on {}",
            h.name
        );
        assert!(
            h.dir.join("w.0.0").exists(),
            "the job's file is in {}'s --dir",
            h.name
        );
    }
    assert_eq!(stats[3]["jobname"], "All clients");
    assert_eq!(stats[3]["write"]["total_ios"], 1536);
    assert_eq!(j["loadgen"]["hosts"].as_array().unwrap().len(), 3);
    assert_eq!(j["loadgen"]["incomplete"], false);

    // The record: "All clients" is the sum of the hosts, bin by bin.
    let r = read_json(&record);
    let all = &r["result"]["points"][0]["merged"][1];
    let mut sum: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut ios, mut bytes) = (0, 0);
    for c in r["clients"].as_array().unwrap() {
        let m = &c["result"]["points"][0]["merged"][1];
        ios += m["ios"].as_u64().unwrap();
        bytes += m["bytes"].as_u64().unwrap();
        for (b, n) in bins(&m["lat"]) {
            *sum.entry(b).or_default() += n;
        }
    }
    assert_eq!(
        (all["ios"].as_u64().unwrap(), all["bytes"].as_u64().unwrap()),
        (ios, bytes)
    );
    assert_eq!(ios, 1536);
    assert_eq!(
        bins(&all["lat"]),
        sum,
        "the merged histogram is the hosts' added bin by bin"
    );
    let names: Vec<&str> = r["points"][0]["run"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "every host's input on one timeline");
    let html = root.join("report.html");
    let analyzed = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("analyze")
        .arg(&record)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        analyzed.status.code().is_some_and(|c| c < 2),
        "the record analyses: {}",
        stderr(&analyzed)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let table = &page[page.find("Hosts side by side").expect("the hosts table")..];
    let table = &table[..table.find("</table>").unwrap()];
    for h in &hosts {
        assert!(
            table.contains(&format!("<td class=\"l\">{}</td>", h.name)),
            "{table}"
        );
    }
}

#[test]
fn each_host_runs_its_own_job_file_in_the_fio_form() {
    let root = scratch("perhost");
    let a = Host::start(&root, "a", &[]);
    let b = Host::start(&root, "b", &[]);
    let (fa, fb) = (root.join("a.fio"), root.join("b.fio"));
    std::fs::write(&fa, "[small]\nrw=write\nbs=4k\nsize=1m\n").unwrap();
    std::fs::write(&fb, "[large]\nrw=write\nbs=64k\nsize=1m\n").unwrap();
    let report = root.join("r.json");
    let args = vec![
        "--output-format=json".to_string(),
        format!("--output={}", report.display()),
        a.client(),
        fa.display().to_string(),
        b.client(),
        fb.display().to_string(),
    ];
    let (out, _) = controller(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = read_json(&report);
    let s = &j["client_stats"];
    assert_eq!(
        (
            s[0]["jobname"].as_str(),
            s[0]["write"]["total_ios"].as_u64()
        ),
        (Some("small"), Some(256))
    );
    assert_eq!(
        (
            s[1]["jobname"].as_str(),
            s[1]["write"]["total_ios"].as_u64()
        ),
        (Some("large"), Some(16))
    );
    assert_eq!(s[2]["write"]["total_ios"], 272);
}

#[test]
fn every_host_replicates_to_the_others_into_volumes_of_its_own() {
    let root = scratch("hci");
    let hosts: Vec<Host> = ["a", "b", "c"]
        .iter()
        .map(|n| Host::start(&root, n, &[]))
        .collect();
    let mut args: Vec<String> = hosts.iter().map(Host::client).collect();
    args.extend(strings(&["--name=w", "--rw=write", "--bs=4k", "--size=1m"]));
    // Every host's replication address: each host leaves out its own.
    args.extend(hosts.iter().map(|h| format!("--replica={}", h.listen)));
    let (out, _) = controller(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    for h in &hosts {
        let local = std::fs::read(h.dir.join("w.0.0")).unwrap();
        assert_eq!(local.len(), 1 << 20);
        assert!(
            !h.dir.join(format!("{}.w.0", h.name)).exists(),
            "{} is not its own replica",
            h.name
        );
        for other in hosts.iter().filter(|o| o.name != h.name) {
            let copy = std::fs::read(other.dir.join(format!("{}.w.0", h.name))).unwrap();
            assert!(copy == local, "{}'s copy at {} differs", h.name, other.name);
        }
    }
}

#[test]
fn refusals_name_the_host_and_nothing_runs() {
    let root = scratch("refuse");
    let a = Host::start(&root, "a", &[]);
    let job = strings(&["--name=w", "--rw=write", "--size=1m"]);

    // No host is ever given this address.
    let nobody = "--client=gone=127.77.255.1:7481".to_string();
    let (out, _) = controller(&[vec![a.client(), nobody], job.clone()].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot start: host gone"),
        "{}",
        stderr(&out)
    );
    assert!(
        !a.dir.join("w.0.0").exists(),
        "no job reached the host that answered"
    );

    let outside = format!("--filename={}/x", root.display());
    let (out, _) = controller(&[vec![a.client(), outside], job.clone()].concat());
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("host a") && e.contains("outside the directories"),
        "{e}"
    );
    assert!(e.contains("nothing ran"), "{e}");
    assert!(!root.join("x").exists());

    let (out, _) = controller(
        &[
            vec![a.client(), "--write_lat_log=/tmp/l".into()],
            job.clone(),
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("write_*_log"), "{}", stderr(&out));

    let tokened = Host::start(
        &root,
        "t",
        &["--token-file", &{
            let p = root.join("token");
            std::fs::write(&p, "s3cret\n").unwrap();
            p.display().to_string()
        }],
    );
    let (out, _) = controller(&[vec![tokened.client()], job.clone()].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("host t") && stderr(&out).contains("token"),
        "{}",
        stderr(&out)
    );
    let good = root.join("good-token");
    std::fs::write(&good, "s3cret").unwrap();
    let with = format!("--client-token-file={}", good.display());
    let (out, _) = controller(&[vec![tokened.client(), with], job.clone()].concat());
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_host_runs_one_job_at_a_time_and_tells_a_second_controller_so() {
    let root = scratch("busy");
    let a = Host::start(&root, "a", &[]);
    let job = |runtime: &str| {
        vec![
            a.client(),
            "--name=w".to_string(),
            "--rw=write".into(),
            "--size=1m".into(),
            "--time_based".into(),
            format!("--runtime={runtime}"),
            "--rate_iops=100".into(),
        ]
    };
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| controller(&job("4")));
        std::thread::sleep(Duration::from_millis(1500));
        let second = controller(&job("1"));
        (first.join().unwrap(), second)
    });
    assert!(first.0.status.success(), "{}", stderr(&first.0));
    assert_eq!(second.0.status.code(), Some(2), "{}", stderr(&second.0));
    let e = stderr(&second.0);
    assert!(e.contains("host a") && e.contains("busy"), "{e}");
}

/// One exchange on a raw connection to a job service: what it answers to `line`.
fn raw(addr: &str, line: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(line).unwrap();
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).unwrap();
    answer
}

#[test]
fn a_foreign_version_or_foreign_bytes_get_an_error_and_the_service_stays_up() {
    let root = scratch("bytes");
    let a = Host::start(&root, "a", &[]);
    let answer = raw(
        &a.jobs,
        b"{\"type\":\"hello\",\"version\":\"0.0.1\",\"token\":\"\"}\n",
    );
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["type"], "error");
    let m = v["message"].as_str().unwrap();
    assert!(
        m.contains("0.0.1")
            && m.contains(env!("CARGO_PKG_VERSION"))
            && m.contains("version mismatch"),
        "{m}"
    );
    for junk in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"\xff\xfe\n",
        b"{\"type\":\"start\",\"unix_ns\":1}\n",
    ] {
        let v: Value = serde_json::from_str(&raw(&a.jobs, junk)).unwrap();
        assert_eq!(v["type"], "error", "{junk:?}");
    }
    let (out, _) = controller(&[
        a.client(),
        "--name=w".into(),
        "--rw=write".into(),
        "--size=1m".into(),
    ]);
    assert!(out.status.success(), "still serving: {}", stderr(&out));
}

fn two_hosts_running(root: &Path) -> (Host, Host, PathBuf, Vec<String>) {
    let a = Host::start(root, "a", &[]);
    let b = Host::start(root, "b", &[]);
    let record = root.join("record.json");
    let args = vec![
        a.client(),
        b.client(),
        "--name=w".into(),
        "--rw=randwrite".into(),
        "--bs=4k".into(),
        "--size=4m".into(),
        "--runtime=20".into(),
        "--time_based".into(),
        "--rate_iops=500".into(),
        "--client-timeout=2".into(),
        format!("--record={}", record.display()),
    ];
    (a, b, record, args)
}

/// The controller's verdict on a run whose host b failed at 3 s: a was stopped before the
/// end of its 20 s job (by its own measure, not this machine's clock) and reported, the
/// record says incomplete.
fn assert_b_failed(out: &Output, record: &Path, why: &str) {
    let e = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("host b") && e.contains(why), "{e}");
    let r = read_json(record);
    let ran_ns = r["clients"][0]["result"]["points"][0]["runtime_ns"]
        .as_u64()
        .unwrap();
    assert!(
        ran_ns < 20_000_000_000,
        "a's job stopped early: {ran_ns} ns"
    );
    assert_eq!(r["incomplete"], true);
    let a = &r["clients"][0];
    assert_eq!(
        (a["stopped"].as_bool(), a["exit"].as_i64()),
        (Some(true), Some(130))
    );
    let ios = a["result"]["points"][0]["merged"][1]["ios"]
        .as_u64()
        .unwrap();
    assert!(ios > 0, "a's IOs until it stopped are kept");
    assert!(r["clients"][1]["error"].as_str().unwrap().contains(why));
}

#[test]
fn a_host_that_dies_mid_run_stops_the_others() {
    let root = scratch("dies");
    let (_a, mut b, record, args) = two_hosts_running(&root);
    let (out, _) = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            let _ = b.child.kill();
        });
        controller(&args)
    });
    let _ = b.child.wait();
    assert_b_failed(&out, &record, "closed the connection");
}

#[test]
fn a_host_that_stalls_is_given_up_after_the_timeout() {
    let root = scratch("stalls");
    let (_a, b, record, args) = two_hosts_running(&root);
    let (out, _) = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            b.signal(libc::SIGSTOP);
        });
        controller(&args)
    });
    b.signal(libc::SIGCONT);
    assert_b_failed(&out, &record, "silent");
}
