//! The kept outputs of the analysis, and the checks that a command prints them byte for
//! byte: text, JSON and HTML of kept run records (`record/tests/fixtures`: synthetic, lab,
//! real runs on a file, a sweep, a cluster run, runs with an agent and with replicas), and of
//! fleet mode over answers a real Prometheus gave (served again here, as it sent them). The
//! kept outputs are in `diagnose/tests/golden`, printed by `loadgen analyze` before the
//! analysis moved into the diagnosis crate; `stornet` (diagnose/tests/analyze_golden.rs) and
//! its alias `loadgen analyze` (loadgen/tests/analyze_alias.rs) are both held to them, so
//! they print the same bytes. No root needed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    workspace().join("record/tests/fixtures")
}

fn golden() -> PathBuf {
    workspace().join("diagnose/tests/golden")
}

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("analyze-golden-{name}-{}", std::process::id()))
}

/// `PROGRAM ARGS` run in the fixtures' directory, which must exit 0.
pub fn run(program: &Path, args: &[&str]) -> Output {
    let o = Command::new(program)
        .args(args)
        .current_dir(fixtures())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Prints the analysis of its arguments (a record, or fleet options), with `--html FILE`
/// also writing the report; returns stdout.
pub type Analyze<'a> = &'a dyn Fn(&[&str]) -> Vec<u8>;

/// Fails naming where the output first differs from the kept one; what was printed is kept
/// beside the test's scratch files for a closer look. With `UPDATE=1` the kept output is
/// replaced by what is printed now (review the difference with `git diff` before keeping it).
fn same(kept: &Path, got: &[u8]) {
    if std::env::var_os("UPDATE").is_some() {
        std::fs::write(kept, got).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
        return;
    }
    let want = std::fs::read(kept).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
    if want == got {
        return;
    }
    let out = scratch(&kept.file_name().unwrap().to_string_lossy());
    std::fs::write(&out, got).unwrap();
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let around = |b: &[u8]| {
        let from = at.saturating_sub(60);
        String::from_utf8_lossy(&b[from.min(b.len())..(at + 60).min(b.len())]).into_owned()
    };
    panic!(
        "{} differs from what is printed now (kept in {}) at byte {at}:\n  kept: {:?}\n  now:  {:?}",
        kept.display(),
        out.display(),
        around(&want),
        around(got)
    );
}

fn kept_records() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            let n = n.strip_prefix("v1-")?.strip_suffix(".json")?.to_string();
            Some(n)
        })
        .collect();
    names.sort();
    names
}

/// Each kept record's text, JSON, and HTML (`report`: the arguments that write it) as kept.
pub fn record_outputs_are_as_kept(analyze: Analyze, report: Analyze) {
    let names = kept_records();
    assert!(names.len() >= 10, "{names:?}");
    for n in &names {
        let file = format!("v1-{n}.json");
        same(&golden().join(format!("{n}.txt")), &analyze(&[&file]));
        same(
            &golden().join(format!("{n}.json")),
            &analyze(&[&file, "--format=json"]),
        );
        let html = scratch(&format!("{n}.html"));
        let text = report(&[&file, "--html", html.to_str().unwrap()]);
        same(&golden().join(format!("{n}.txt")), &text);
        same(
            &golden().join(format!("{n}.html")),
            &std::fs::read(&html).unwrap(),
        );
        let _ = std::fs::remove_file(&html);
    }
}

/// Answers a real Prometheus gave to fleet mode's queries, by request path, served again on
/// loopback. A query of a family read since they were kept gets what Prometheus answers for
/// a metric it has no series of (an empty matrix); the paths asked are noted, so the test can
/// hold every kept query to its kept text.
fn replay(answers: BTreeMap<String, String>) -> (String, Arc<Mutex<BTreeSet<String>>>) {
    const NO_SERIES: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let answers = Arc::new(answers);
    let asked = Arc::new(Mutex::new(BTreeSet::new()));
    let noted = asked.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let answers = answers.clone();
            let noted = noted.clone();
            std::thread::spawn(move || {
                let mut head = String::new();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                    head.push_str(&line);
                    line.clear();
                }
                let path = head.split(' ').nth(1).unwrap_or_default();
                let body = answers.get(path).map_or(NO_SERIES, String::as_str);
                noted.lock().unwrap().insert(path.to_string());
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.flush();
                let _ = s.read(&mut [0u8; 1]);
            });
        }
    });
    (format!("http://{addr}"), asked)
}

/// Fleet mode's text, JSON and HTML (`report`) over the kept answers, as kept.
pub fn fleet_outputs_over_kept_answers_are_as_kept(analyze: Analyze, report: Analyze) {
    let dir = golden().join("fleet");
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    let args: serde_json::Value = serde_json::from_str(&read("args.json")).unwrap();
    let answers: Vec<serde_json::Value> = serde_json::from_str(&read("answers.json")).unwrap();
    let answers: BTreeMap<String, String> = answers
        .iter()
        .map(|a| {
            (
                a["path"].as_str().unwrap().to_string(),
                a["body"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let kept: BTreeSet<String> = answers.keys().cloned().collect();
    let (url, asked) = replay(answers);
    let arg = |k: &str| args[k].as_str().unwrap().to_string();
    let fleet = [
        "--prometheus".to_string(),
        url.clone(),
        format!("--start={}", arg("start")),
        format!("--end={}", arg("end")),
        format!("--step={}", arg("step")),
        format!("--selector={}", arg("selector")),
    ];
    let fleet: Vec<&str> = fleet.iter().map(String::as_str).collect();
    // The kept outputs name the Prometheus they were read from.
    let as_kept = |out: Vec<u8>| {
        String::from_utf8(out)
            .unwrap()
            .replace(&url, &arg("url"))
            .into_bytes()
    };
    same(&dir.join("fleet.txt"), &as_kept(analyze(&fleet)));
    same(
        &dir.join("fleet.json"),
        &as_kept(analyze(&[&fleet[..], &["--format=json"]].concat())),
    );
    let html = scratch("fleet.html");
    let h = format!("--html={}", html.display());
    same(
        &dir.join("fleet.txt"),
        &as_kept(report(&[&fleet[..], &[h.as_str()]].concat())),
    );
    same(
        &dir.join("fleet.html"),
        &as_kept(std::fs::read(&html).unwrap()),
    );
    let _ = std::fs::remove_file(&html);
    let asked = asked.lock().unwrap();
    let unasked: Vec<&String> = kept.difference(&asked).collect();
    assert!(
        unasked.is_empty(),
        "fleet mode no longer makes these kept queries: {unasked:#?}"
    );
}
