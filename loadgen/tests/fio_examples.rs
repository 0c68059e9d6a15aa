//! fio's own example job files (Debian's `fio-examples`, which `cargo xtask setup`
//! installs) through `loadgen run --parse-only`: those whose engines loadgen runs must parse,
//! at least as many as [`PARSED_AT_LEAST`], and every one refused says why in one line that
//! names an option of the file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `fio-examples` puts them.
const EXAMPLES: &str = "/usr/share/doc/fio/examples";

/// How many of them parse today; only ever raised.
const PARSED_AT_LEAST: usize = 35;

/// fio's engines that loadgen runs (fio's default, psync, when a file names none).
const ENGINES: &[&str] = &["io_uring", "libaio", "sync", "psync", "posixaio", "null"];

/// Options an example's own header says to run it with (fio's `--section`): the
/// `[override]` sections of `xnvme-compare.fio` and `xnvme-zoned.fio` take `${FIO_RW}` and
/// others, which fio 3.33 refuses unset, as loadgen does, so without `--section` neither
/// tool runs them (`xnvme-zoned.fio` is refused anyway, for its `zonemode=zbd`).
fn invocation(name: &str) -> &'static [&'static str] {
    match name {
        "xnvme-compare.fio" | "xnvme-zoned.fio" => &["--section=default"],
        _ => &[],
    }
}

/// The `ioengine=` values of a job file (after comments are stripped).
fn engines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split([';', '#']).next().unwrap_or("").trim())
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == "ioengine")
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

fn example_files() -> Option<Vec<PathBuf>> {
    let dir = Path::new(EXAMPLES);
    if !dir.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{EXAMPLES} is missing: `cargo xtask setup` installs fio-examples"
        );
        eprintln!("skipped: {EXAMPLES} is missing (apt-get install fio-examples)");
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fio"))
        .collect();
    files.sort();
    Some(files)
}

#[test]
fn fio_example_job_files_parse() {
    let Some(files) = example_files() else {
        return;
    };
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fio-examples");
    std::fs::create_dir_all(&scratch).unwrap();
    let (mut parsed, mut refused) = (Vec::new(), Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if !engines(&text).iter().all(|e| ENGINES.contains(&e.as_str())) {
            continue;
        }
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(["run", "--parse-only"])
            .args(invocation(&name))
            .arg(f)
            .current_dir(&scratch)
            .output()
            .expect("loadgen runs");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if o.status.success() {
            parsed.push(name);
            continue;
        }
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        let line = err.trim_end();
        assert_eq!(line.lines().count(), 1, "{name}: one line, got {err:?}");
        // The line names the option it refuses: a key of the file, or its value.
        let keys: Vec<&str> = text
            .lines()
            .map(|l| l.split([';', '#']).next().unwrap_or("").trim())
            .filter(|l| !l.is_empty() && !l.starts_with('['))
            .flat_map(|l| {
                let (k, v) = l.split_once('=').unwrap_or((l, ""));
                [k.trim(), v.trim()]
            })
            .filter(|w| w.len() > 1)
            .collect();
        assert!(
            keys.iter().any(|k| line.contains(k)),
            "{name}: the refusal names no option of the file: {line}"
        );
        refused.push((name, line.to_string()));
    }
    let total = parsed.len() + refused.len();
    eprintln!(
        "{} of {total} fio example job files with an engine loadgen runs parse",
        parsed.len()
    );
    for (name, why) in &refused {
        eprintln!("  refused {name}: {why}");
    }
    assert!(
        parsed.len() >= PARSED_AT_LEAST,
        "{} parse, fewer than {PARSED_AT_LEAST}",
        parsed.len()
    );
}

/// Runs `prog` (loadgen run, or fio) on a job file in `dir`; its JSON report.
fn json_of(prog: &str, args: &[&str], dir: &Path) -> serde_json::Value {
    let o = Command::new(prog)
        .args(args)
        .arg("--output-format=json")
        .arg(dir.join("g.fio"))
        .current_dir(dir)
        .output()
        .expect("runs (cargo xtask setup installs fio)");
    assert!(
        o.status.success(),
        "{prog}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

/// `stonewall`, `new_group` and `wait_for` run the jobs in fio's order and groups: each job
/// reported with fio's `groupid` and IO counts, fio run alongside on the same file; and the
/// groups of one-second jobs follow one another (three of them take three seconds at least,
/// whatever the machine's load).
#[test]
fn groups_run_in_fios_order_and_report_as_fio() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("groups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |time: &str| {
        format!(
            "[global]\ndirectory={}\nsize=1m ; one MiB\nbs=4k\ndescription=three groups # of jobs\n{time}\n\
             [w]\nname=writer\nrw=write\n\n[r]\nstonewall\nrw=read\nnumjobs=2\n\n\
             [r2]\nnew_group\nwait_for=r\nrw=randread\n",
            dir.display()
        )
    };
    std::fs::write(dir.join("g.fio"), file("")).unwrap();
    let shape = |j: &serde_json::Value| -> Vec<(String, u64, u64, u64)> {
        j["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["jobname"].as_str().unwrap().to_string(),
                    j["groupid"].as_u64().unwrap(),
                    j["read"]["total_ios"].as_u64().unwrap(),
                    j["write"]["total_ios"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let lg = shape(&json_of(env!("CARGO_BIN_EXE_loadgen"), &["run"], &dir));
    let fio = shape(&json_of("fio", &[], &dir));
    assert_eq!(lg, fio, "loadgen and fio");
    assert_eq!(lg.iter().map(|j| j.1).collect::<Vec<_>>(), [0, 1, 1, 2]);
    let text = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("run")
        .arg(dir.join("g.fio"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("group 1/3: ") && text.contains("group 3/3: "),
        "{text}"
    );

    std::fs::write(dir.join("g.fio"), file("time_based\nruntime=1")).unwrap();
    let start = std::time::Instant::now();
    let j = json_of(env!("CARGO_BIN_EXE_loadgen"), &["run"], &dir);
    let took = start.elapsed();
    assert_eq!(j["jobs"].as_array().unwrap().len(), 4);
    assert!(
        took >= std::time::Duration::from_secs(3),
        "three groups of 1 s jobs in {took:?}: they ran together"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
