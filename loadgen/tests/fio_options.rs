//! fio's options for where IOs land and when jobs run (`rw=…:N`, `rw_sequencer`,
//! `blockalign`, `startdelay`, `exitall`, `exit_what`, `rate_min`, `flow`, `numa_*`), each
//! run by loadgen and by fio on the same job. Where IOs landed is read back from the file
//! itself (a file of zeros, written with loadgen's and fio's non-zero data): an independent
//! count of the blocks each tool wrote. No root needed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

mod beside_fio;

use beside_fio::Tool;

fn scratch(name: &str) -> PathBuf {
    beside_fio::scratch("fio-options", name)
}

/// Runs `tool` in `dir` with `args`: its exit status, JSON (when it wrote one) and stderr.
fn run(tool: Tool, dir: &Path, args: &[&str]) -> (Option<i32>, Option<Value>, String) {
    let mut c = tool.command();
    c.args(args).arg("--output-format=json");
    tool.outcome(c, dir)
}

/// Which `unit`-sized pieces of a file hold anything but zeros.
fn written(path: &Path, unit: usize) -> Vec<bool> {
    std::fs::read(path)
        .unwrap()
        .chunks(unit)
        .map(|c| c.iter().any(|&b| b != 0))
        .collect()
}

/// Each tool writes a zeroed 64 KiB file with `args`; (writes it counted, blocks of `unit`
/// bytes that hold its data).
fn write_map(tool: Tool, name: &str, args: &[&str], unit: usize) -> (u64, Vec<bool>) {
    let dir = scratch(&format!("{name}-{tool:?}"));
    let f = dir.join("f");
    std::fs::write(&f, vec![0u8; 64 << 10]).unwrap();
    let mut all = vec!["--name=t", "--filename=f", "--bs=4k", "--size=64k"];
    all.extend(args);
    let (code, json, err) = run(tool, &dir, &all);
    assert_eq!(code, Some(0), "{tool:?} {args:?}: {err}");
    let ios = json.expect("JSON")["jobs"][0]["write"]["total_ios"]
        .as_u64()
        .unwrap();
    let map = written(&f, unit);
    std::fs::remove_dir_all(&dir).unwrap();
    (ios, map)
}

fn shown(map: &[bool]) -> String {
    map.iter().map(|&w| if w { 'x' } else { '.' }).collect()
}

/// `rw=write:4k` skips a block after every write; `rw=write:-8k` (fio's backwards-read)
/// steps back; both wrap as fio's do. The blocks written are the same as fio's, block by
/// block, and so is the count of writes.
#[test]
fn sequential_offsets_skip_and_step_back_as_fios() {
    for (m, want) in [
        ("--rw=write:4k", "x.x.x.x.x.x.x.x."),
        ("--rw=write:-8k", "xxxxxxxxxxxxxxx."),
    ] {
        let lg = write_map(Tool::Loadgen, "seq", &[m], 4096);
        let fio = write_map(Tool::Fio, "seq", &[m], 4096);
        assert_eq!((lg.0, shown(&lg.1)), (16, want.to_string()), "loadgen {m}");
        assert_eq!((fio.0, shown(&fio.1)), (16, want.to_string()), "fio {m}");
    }
}

/// `rw=randwrite:N`: a new random offset every N writes. With `rw_sequencer=sequential`
/// the 15 writes before the first random one cover blocks 0 to 14 (fio's countdown); with
/// `identical` they repeat one offset, so at most 1 + 16/N blocks hold data. fio alike.
#[test]
fn random_offsets_change_every_n_ios_as_fios() {
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (ios, map) = write_map(
            tool,
            "seqnr",
            &["--rw=randwrite:16", "--rw_sequencer=sequential"],
            4096,
        );
        assert_eq!(ios, 16, "{tool:?}");
        assert!(map[..15].iter().all(|&w| w), "{tool:?}: {}", shown(&map));
        for n in [16, 4] {
            let rw = format!("--rw=randwrite:{n}");
            let (ios, map) = write_map(tool, "ident", &[&rw, "--rw_sequencer=identical"], 4096);
            let blocks = map.iter().filter(|&&w| w).count();
            assert_eq!(ios, 16, "{tool:?}");
            assert!(
                (1..=1 + 16 / n).contains(&blocks),
                "{tool:?} {rw}: {}",
                shown(&map)
            );
        }
    }
}

/// `blockalign=1k` with 4 KiB writes: the data starts on 1 KiB boundaries that are not all
/// on the 4 KiB grid, for loadgen as for fio; without it, every write is on the grid.
#[test]
fn blockalign_moves_random_writes_off_the_io_size_grid() {
    let starts = |map: &[bool]| -> Vec<usize> {
        (0..map.len())
            .filter(|&i| map[i] && (i == 0 || !map[i - 1]))
            .collect()
    };
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (ios, map) = write_map(tool, "ba", &["--rw=randwrite", "--blockalign=1k"], 1024);
        assert_eq!(ios, 16, "{tool:?}");
        assert!(
            starts(&map).iter().any(|s| s % 4 != 0),
            "{tool:?}: no write off the 4k grid: {}",
            shown(&map)
        );
        let (_, map) = write_map(tool, "noba", &["--rw=randwrite"], 1024);
        assert!(
            starts(&map).iter().all(|s| s % 4 == 0),
            "{tool:?}: {}",
            shown(&map)
        );
    }
}

/// The jobs of a job file, by name: (writes, job_runtime in ms).
fn jobs(json: &Value) -> Vec<(String, u64, u64)> {
    json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["jobname"].as_str().unwrap().to_string(),
                j["write"]["total_ios"].as_u64().unwrap(),
                j["job_runtime"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `startdelay=2`: the job starts two seconds after its group, so the run takes that long
/// at least, and its own runtime leaves the delay out (16 small writes), as fio's.
#[test]
fn startdelay_holds_a_job_back() {
    let dir = scratch("startdelay");
    std::fs::write(
        dir.join("g.fio"),
        "[global]\nrw=write\nbs=4k\nsize=64k\n[now]\n[later]\nstartdelay=2\n",
    )
    .unwrap();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let start = Instant::now();
        let (code, json, err) = run(tool, &dir, &["g.fio"]);
        let took = start.elapsed();
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let jobs = jobs(&json.unwrap());
        assert_eq!(jobs.len(), 2, "{tool:?}");
        assert!(jobs.iter().all(|j| j.1 == 16), "{tool:?}: {jobs:?}");
        assert!(took >= Duration::from_secs(2), "{tool:?}: {took:?}");
        assert!(
            jobs[1].2 < 1500,
            "{tool:?}: the delay is not run time: {jobs:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `exitall`: when the short job ends, the 60-second one of its group ends with it.
#[test]
fn exitall_ends_the_group_with_the_first_job() {
    let dir = scratch("exitall");
    std::fs::write(
        dir.join("g.fio"),
        "[global]\nrw=write\nbs=4k\nsize=64k\n[long]\ntime_based\nruntime=60\nrate_iops=100\n\
         [short]\nexitall\n",
    )
    .unwrap();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let start = Instant::now();
        let (code, json, err) = run(tool, &dir, &["g.fio"]);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        assert!(start.elapsed() < Duration::from_secs(30), "{tool:?}");
        let jobs = jobs(&json.unwrap());
        assert_eq!(jobs[1].1, 16, "{tool:?}: the short job ran whole: {jobs:?}");
        assert!(jobs[0].2 < 30_000, "{tool:?}: {jobs:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `rate_min`: a job held to 200 IOs of 4 KiB a second (800 KiB/s) misses a minimum of
/// 1 MiB/s and fails with fio's words; a minimum it meets changes nothing. `rate_iops` caps
/// the rate, so the outcome does not depend on the machine; the checks begin after 2 s and
/// judge 1 s windows, so 6 s leave several windows even when a busy machine delays them.
#[test]
fn a_job_below_rate_min_fails_naming_the_rate() {
    let dir = scratch("ratemin");
    let args = |min: &'static str| {
        vec![
            "--name=t",
            "--filename=f",
            "--rw=write",
            "--bs=4k",
            "--size=1m",
            "--time_based",
            "--runtime=6",
            "--rate_iops=200",
            min,
        ]
    };
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, _, err) = run(tool, &dir, &args("--rate_min=1m"));
        assert_eq!(code, Some(1), "{tool:?}: {err}");
        assert!(
            err.contains("rate_min=1048576B/s not met, got "),
            "{tool:?}: {err}"
        );
    }
    let (code, _, err) = run(Tool::Loadgen, &dir, &args("--rate_min=1m"));
    assert_eq!(code, Some(1));
    assert_eq!(err.matches("error").count(), 1, "one line: {err}");
    let line = err.lines().last().unwrap();
    // The window is the rate cycle (1000 ms) or, on a busy machine, a little more.
    let (got, window): (u64, u64) = line
        .strip_prefix("loadgen: error: job t: rate_min=1048576B/s not met, got ")
        .and_then(|r| r.strip_suffix(" ms)"))
        .and_then(|r| r.split_once("B/s (writes, over the last "))
        .and_then(|(n, ms)| Some((n.parse().ok()?, ms.parse().ok()?)))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(got < 1 << 20, "{line}");
    assert!((1000..2000).contains(&window), "{line}");
    let (code, json, err) = run(Tool::Loadgen, &dir, &args("--rate_min=256k"));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        json.unwrap()["jobs"][0]["write"]["total_ios"]
            .as_u64()
            .unwrap()
            > 0
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ioengine=null` (fio's null.fio) touches no file: the file it names is never created,
/// and it counts `size / bs` IOs, as fio's null engine does.
#[test]
fn ioengine_null_creates_no_file_and_counts_as_fio() {
    let dir = scratch("null");
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, json, err) = run(
            tool,
            &dir,
            &[
                "--name=n",
                "--filename=never",
                "--ioengine=null",
                "--rw=randread",
                "--bs=4k",
                "--size=64m",
            ],
        );
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let reads = json.unwrap()["jobs"][0]["read"]["total_ios"].as_u64();
        assert_eq!(reads, Some(16384), "{tool:?}");
        assert!(!dir.join("never").exists(), "{tool:?} created the file");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The files in `dir` and their sizes, sorted.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    v.sort();
    v
}

/// `nrfiles` with `filename_format`: each job thread gets its own files, named and sized
/// as fio's (`--size` divided among them), and `unlink` removes them at the end.
#[test]
fn file_sets_are_named_and_sized_as_fios_and_unlinked() {
    let mut seen = Vec::new();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let dir = scratch(&format!("nrfiles-{tool:?}"));
        std::fs::create_dir(dir.join("d")).unwrap();
        let args = |unlink: &'static str| {
            vec![
                "--name=t",
                "--nrfiles=4",
                "--filename_format=d/$jobname.$filenum.$jobnum",
                "--numjobs=2",
                "--size=64k",
                "--bs=4k",
                "--rw=write",
                unlink,
            ]
        };
        let (code, json, err) = run(tool, &dir, &args("--unlink=0"));
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let jobs = jobs(&json.unwrap());
        assert!(jobs.iter().all(|j| j.1 == 16), "{tool:?}: {jobs:?}");
        let files = listing(&dir.join("d"));
        assert_eq!(files.len(), 8, "{tool:?}: {files:?}");
        assert!(files.iter().all(|f| f.1 == 16 << 10), "{tool:?}: {files:?}");
        seen.push(files);
        let (code, _, err) = run(tool, &dir, &args("--unlink=1"));
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        assert_eq!(listing(&dir.join("d")), [], "{tool:?}: unlinked");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert_eq!(seen[0], seen[1], "loadgen's files and fio's");
}

/// `file_service_type`: which of four zeroed files four writes land in, block by block,
/// the same as fio's (`sequential` fills one file first, `roundrobin:2` gives each file
/// two writes); `random` still writes four blocks in all.
#[test]
fn file_service_types_pick_files_as_fios() {
    for (service, want) in [
        ("sequential", Some("xxxx .... .... ....")),
        ("roundrobin", Some("x... x... x... x...")),
        ("roundrobin:2", Some("xx.. xx.. .... ....")),
        ("random", None),
    ] {
        for tool in [Tool::Loadgen, Tool::Fio] {
            let dir = scratch(&format!("service-{tool:?}"));
            for i in 0..4 {
                std::fs::write(dir.join(format!("t.0.{i}")), vec![0u8; 16 << 10]).unwrap();
            }
            let st = format!("--file_service_type={service}");
            let (code, _, err) = run(
                tool,
                &dir,
                &[
                    "--name=t",
                    "--nrfiles=4",
                    "--size=64k",
                    "--bs=4k",
                    "--rw=write",
                    "--number_ios=4",
                    &st,
                ],
            );
            assert_eq!(code, Some(0), "{tool:?} {service}: {err}");
            let maps: Vec<String> = (0..4)
                .map(|i| shown(&written(&dir.join(format!("t.0.{i}")), 4096)))
                .collect();
            let got = maps.join(" ");
            match want {
                Some(w) => assert_eq!(got, w, "{tool:?} {service}"),
                None => assert_eq!(got.matches('x').count(), 4, "{tool:?} {service}: {got}"),
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// `random_generator=lfsr`: 16 random writes over 16 blocks write every block once, as
/// fio's; loadgen's independent draws (the default) leave some untouched.
#[test]
fn lfsr_writes_every_block_once_as_fios() {
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (ios, map) = write_map(
            tool,
            "lfsr",
            &["--rw=randwrite", "--random_generator=lfsr"],
            4096,
        );
        assert_eq!((ios, shown(&map)), (16, "x".repeat(16)), "{tool:?}");
    }
    let (_, map) = write_map(Tool::Loadgen, "tausworthe", &["--rw=randwrite"], 4096);
    assert!(map.contains(&false), "{}", shown(&map));
}

/// A job held back by `startdelay` keeps its group's seconds on the timeline: the reader
/// that starts 2 s after the writer reads nothing in the first two rows and reads in the
/// third, whatever the machine's load (it cannot start sooner).
#[test]
fn a_delayed_job_keeps_its_groups_seconds_on_the_timeline() {
    let dir = scratch("delay-timeline");
    std::fs::write(
        dir.join("g.fio"),
        "[global]\nbs=4k\nsize=1m\ntime_based\nrate_iops=50\n\
         [writer]\nrw=write\nruntime=3\n[reader]\nrw=read\nstartdelay=2\nruntime=1\n",
    )
    .unwrap();
    let (code, json, err) = run(Tool::Loadgen, &dir, &["g.fio"]);
    assert_eq!(code, Some(0), "{err}");
    let json = json.unwrap();
    let rows = json["loadgen"]["points"][0]["timeline"].as_array().unwrap();
    let reads: Vec<u64> = rows
        .iter()
        .map(|r| r["read"]["ios"].as_u64().unwrap())
        .collect();
    assert!(reads.len() >= 3, "{reads:?}");
    assert_eq!(&reads[..2], [0, 0], "{reads:?}");
    assert!(reads[2] > 0, "{reads:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `exitall_on_error`: a job that fails (here, below its `rate_min` after 3 s) ends the
/// 30-second job beside it, for loadgen (which always does) as for fio.
#[test]
fn exitall_on_error_ends_the_others_when_a_job_fails() {
    let dir = scratch("exitall-on-error");
    std::fs::write(
        dir.join("g.fio"),
        "[global]\nrw=write\nbs=4k\nsize=1m\ntime_based\nruntime=30\nexitall_on_error\n\
         [steady]\nrate_iops=50\n[slow]\nrate_iops=200\nrate_min=1m\n",
    )
    .unwrap();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let start = Instant::now();
        let (code, _, err) = run(tool, &dir, &["g.fio"]);
        assert_eq!(code, Some(1), "{tool:?}: {err}");
        assert!(
            err.contains("rate_min=1048576B/s not met"),
            "{tool:?}: {err}"
        );
        assert!(start.elapsed() < Duration::from_secs(20), "{tool:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The jobs of a job file: (name, groupid, writes, job_runtime in ms).
fn grouped(json: &Value) -> Vec<(String, u64, u64, u64)> {
    json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["jobname"].as_str().unwrap().to_string(),
                j["groupid"].as_u64().unwrap(),
                j["write"]["total_ios"].as_u64().unwrap(),
                j["job_runtime"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `new_group` without a wall reports a group of its own among jobs that run together, and
/// `exitall` (fio's: for every job once one has it) ends what `exit_what` names: `group`
/// (the default) only the finished job's group, so the 3 s job of the next group runs
/// whole; `stonewall` every job running, of any group; `all` every job, so the one after
/// the next wall never starts (reported with no IO). fio runs the same files. The short job
/// takes about two seconds (16 IOs at 8 a second): a job that ends sooner can end before a
/// busy machine has started the jobs beside it, which then run whole.
#[test]
fn exit_what_ends_a_group_the_running_jobs_or_all_as_fios() {
    let dir = scratch("exit-what");
    let head = "[global]\nrw=write\nbs=4k\nsize=64k\nexitall\n";
    let long = "time_based\nruntime=60\nrate_iops=100\n";
    std::fs::write(
        dir.join("group.fio"),
        format!("{head}[short]\nrate_iops=8\n[long]\n{long}[other]\nnew_group\ntime_based\nruntime=3\nrate_iops=100\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("wall.fio"),
        format!(
            "{head}[short]\nrate_iops=8\nexit_what=stonewall\n[long]\nnew_group\n{long}\
             [wall]\nstonewall\nrate_iops=8\nexit_what=all\n[long2]\n{long}[never]\nstonewall\n"
        ),
    )
    .unwrap();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let start = Instant::now();
        let (code, json, err) = run(tool, &dir, &["group.fio"]);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let j = grouped(&json.unwrap());
        let ids: Vec<u64> = j.iter().map(|j| j.1).collect();
        assert_eq!(ids, [0, 0, 1], "{tool:?}: {j:?}");
        assert_eq!(j[0].2, 16, "{tool:?}: {j:?}");
        assert!(j[1].3 < 30_000, "{tool:?}: long ended with short: {j:?}");
        assert!(j[2].3 >= 2_500, "{tool:?}: other ran whole: {j:?}");

        let (code, json, err) = run(tool, &dir, &["wall.fio"]);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let j = grouped(&json.unwrap());
        let shape: Vec<(&str, u64)> = j.iter().map(|j| (j.0.as_str(), j.1)).collect();
        assert_eq!(
            shape,
            [
                ("short", 0),
                ("long", 1),
                ("wall", 2),
                ("long2", 2),
                ("never", 3)
            ],
            "{tool:?}"
        );
        assert_eq!((j[0].2, j[2].2), (16, 16), "{tool:?}: {j:?}");
        assert!(j[1].3 < 30_000 && j[3].3 < 30_000, "{tool:?}: {j:?}");
        assert_eq!(j[4].2, 0, "{tool:?}: never ran: {j:?}");
        assert!(start.elapsed() < Duration::from_secs(50), "{tool:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `io_submit_mode=offload` (fixed- and poisson-rate-submission.fio): IOs go out on the
/// rate's schedule, 200 of them at 200 a second taking a second at least; with an engine
/// that does one IO at a time it is refused, naming the option. (fio 3.33 is not run beside
/// it: its offload mode hangs here with `rate_process=poisson` and with `time_based`.)
#[test]
fn offload_submits_on_the_schedule() {
    let dir = scratch("offload");
    std::fs::write(dir.join("f"), vec![0u8; 1 << 20]).unwrap();
    let args = [
        "--name=t",
        "--filename=f",
        "--size=1m",
        "--rw=randread",
        "--ioengine=libaio",
        "--iodepth=8",
        "--io_submit_mode=offload",
        "--rate_iops=200",
        "--number_ios=200",
    ];
    for process in ["linear", "poisson"] {
        let p = format!("--rate_process={process}");
        let (code, json, err) = run(Tool::Loadgen, &dir, &[&args[..], &[p.as_str()]].concat());
        assert_eq!(code, Some(0), "{err}");
        let j = &json.unwrap()["jobs"][0];
        assert_eq!(j["read"]["total_ios"], 200, "{process}");
        let ms = j["job_runtime"].as_u64().unwrap();
        // The schedule is seeded (randrepeat): the same gaps on every run.
        let least = if process == "linear" { 900 } else { 700 };
        assert!(ms >= least, "{process}: 200 IOs at 200/s in {ms} ms");
    }
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &[
            &args[..4],
            &["--ioengine=psync", "--io_submit_mode=offload"],
        ]
        .concat(),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--io_submit_mode=offload") && err.trim().lines().count() == 1,
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `numa_cpu_nodes`/`numa_mem_policy` (numa.fio): node 0 runs as fio's; a node the machine
/// lacks is one line naming it (fio refuses it too), while `--parse-only` takes it, as fio's.
#[test]
fn numa_nodes_run_and_a_missing_node_is_named() {
    let dir = scratch("numa");
    let base = ["--name=t", "--filename=f", "--size=64k", "--rw=write"];
    for tool in [Tool::Loadgen, Tool::Fio] {
        let args = [
            &base[..],
            &["--numa_cpu_nodes=0", "--numa_mem_policy=bind:0"],
        ]
        .concat();
        let (code, json, err) = run(tool, &dir, &args);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        assert_eq!(
            json.unwrap()["jobs"][0]["write"]["total_ios"],
            16,
            "{tool:?}"
        );
        let (code, _, _) = run(tool, &dir, &[&base[..], &["--numa_cpu_nodes=999"]].concat());
        assert_ne!(code, Some(0), "{tool:?} runs on a node the machine lacks");
    }
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &[&base[..], &["--numa_mem_policy=interleave:0,999"]].concat(),
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("numa_mem_policy") && err.contains("no NUMA node 999"),
        "{err}"
    );
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &[&base[..], &["--numa_cpu_nodes=999", "--parse-only"]].concat(),
    );
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `flow` (flow.fio, butterfly.fio): two jobs of one flow with weights 1 and 3 do their
/// IOs in that ratio, whatever either could do alone, as fio's.
#[test]
fn flow_weights_share_the_ios_as_fios() {
    let dir = scratch("flow");
    std::fs::write(
        dir.join("g.fio"),
        "[global]\nioengine=null\nsize=1m\nrw=randread\ntime_based\nruntime=1\nflow_sleep=100\n\
         [one]\nflow=1\n[three]\nflow=3\n",
    )
    .unwrap();
    let shares = |tool| {
        let (code, json, err) = run(tool, &dir, &["g.fio"]);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let json = json.unwrap();
        let ios: Vec<u64> = (0..2)
            .map(|i| json["jobs"][i]["read"]["total_ios"].as_u64().unwrap())
            .collect();
        let r = ios[1] as f64 / ios[0] as f64;
        (ios[0] > 100 && (2.5..=3.5).contains(&r), ios)
    };
    let (ok, ios) = shares(Tool::Loadgen);
    assert!(ok, "loadgen: {ios:?}");
    // fio adds a job's weight to its flow when the job's thread starts: on a busy machine a
    // job that starts late leaves the other to run alone for a while, so fio, the reference,
    // gets three tries; loadgen's flows know every weight before any job starts.
    let mut fio = Vec::new();
    while fio.len() < 3 && !fio.last().is_some_and(|(ok, _)| *ok) {
        fio.push(shares(Tool::Fio));
    }
    assert!(fio.last().unwrap().0, "fio: {fio:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The last column of a latency log (the IO's priority), counted by value.
fn prio_column(path: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut n = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let p = line.rsplit(", ").next().unwrap().to_string();
        *n.entry(p).or_insert(0) += 1;
    }
    n
}

/// `cmdprio_percentage`, `cmdprio_class`, `prioclass`, `log_prio` (cmdprio-percentage.fio):
/// about half of 200 reads carry the realtime class in their io_uring entry, which the
/// kernel takes (the run succeeds), the others the job's idle class, as the latency log
/// says, as fio's does; without `log_prio` the column is 1 for realtime, 0 else.
#[test]
fn cmdprio_gives_its_share_of_ios_the_priority_as_fios() {
    let dir = scratch("cmdprio");
    std::fs::write(dir.join("f"), vec![1u8; 1 << 20]).unwrap();
    let args = [
        "--name=p",
        "--filename=f",
        "--size=1m",
        "--rw=randread",
        "--ioengine=io_uring",
        "--iodepth=4",
        "--number_ios=200",
        "--cmdprio_percentage=50",
        "--cmdprio_class=1",
        "--prioclass=3",
        "--write_lat_log=p",
    ];
    for tool in [Tool::Loadgen, Tool::Fio] {
        for log_prio in ["--log_prio=1", "--log_prio=0"] {
            let (code, _, err) = run(tool, &dir, &[&args[..], &[log_prio]].concat());
            assert_eq!(code, Some(0), "{tool:?}: {err}");
            let n = prio_column(&dir.join("p_lat.1.log"));
            let (high, low) = if log_prio.ends_with('1') {
                ("0x2000", "0x6000")
            } else {
                ("1", "0")
            };
            let (h, l) = (n.get(high).copied(), n.get(low).copied());
            assert_eq!(n.len(), 2, "{tool:?} {log_prio}: {n:?}");
            let h = h.unwrap_or(0);
            assert!((60..=140).contains(&h), "{tool:?} {log_prio}: {n:?}");
            assert_eq!(h + l.unwrap_or(0), 200, "{tool:?} {log_prio}: {n:?}");
        }
    }
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &[&args[..4], &["--ioengine=psync", "--cmdprio_percentage=5"]].concat(),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--cmdprio_percentage"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `allow_file_create=0` (xnvme-compare.fio): a missing file is refused and not created,
/// as fio's; a file that exists runs.
#[test]
fn allow_file_create_0_refuses_a_missing_file_as_fio() {
    let dir = scratch("allow-file-create");
    let args = |f: &'static str| {
        [
            "--name=t",
            f,
            "--size=64k",
            "--rw=write",
            "--allow_file_create=0",
        ]
    };
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, _, err) = run(tool, &dir, &args("--filename=missing"));
        assert_ne!(code, Some(0), "{tool:?}: {err}");
        assert!(!dir.join("missing").exists(), "{tool:?} created it");
    }
    let (_, _, err) = run(Tool::Loadgen, &dir, &args("--filename=missing"));
    assert!(
        err.contains("allow_file_create=0") && err.trim().lines().count() == 1,
        "{err}"
    );
    std::fs::write(dir.join("there"), vec![0u8; 64 << 10]).unwrap();
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, json, err) = run(tool, &dir, &args("--filename=there"));
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        assert_eq!(
            json.unwrap()["jobs"][0]["write"]["total_ios"],
            16,
            "{tool:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

/// `steadystate`/`ss`, `ss_dur`, `ss_ramp` (fio's steadystate.fio): a job held at 1000 IOPS
/// settles, and both tools stop it long before its 60 s, with fio's `steadystate` section
/// (the same keys, criterion, window and attained); with group_reporting two such jobs are
/// judged as one (2000 IOPS). A criterion that cannot be met (a deviation below 0) runs the
/// whole runtime and reports it not attained.
#[test]
fn steadystate_stops_a_settled_job_and_reports_as_fio() {
    let dir = scratch("ss");
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "--name=t",
            "--filename=f",
            "--rw=randread",
            "--bs=4k",
            "--size=16m",
            "--time_based",
            "--rate_iops=1000",
        ];
        a.extend(extra);
        a
    };
    let settled: &[&[&str]] = &[
        &["--runtime=60", "--ss=iops:20%", "--ss_dur=3", "--ss_ramp=1"],
        &[
            "--runtime=60",
            "--steadystate=bw_slope:10%",
            "--ss_dur=3",
            "--numjobs=2",
            "--group_reporting",
        ],
    ];
    for (extra, jobs) in settled.iter().zip([1u64, 2]) {
        let mut sections = Vec::new();
        for tool in [Tool::Loadgen, Tool::Fio] {
            let started = Instant::now();
            let (code, json, err) = run(tool, &dir, &args(extra));
            let took = started.elapsed();
            assert_eq!(code, Some(0), "{tool:?} {extra:?}: {err}");
            let json = json.unwrap();
            assert_eq!(json["jobs"].as_array().unwrap().len(), 1, "{tool:?}");
            let job = &json["jobs"][0];
            assert!(
                took < Duration::from_secs(30),
                "{tool:?} {extra:?}: {took:?}"
            );
            let ss = job["steadystate"].clone();
            assert_eq!(ss["attained"], 1, "{tool:?} {extra:?}: {ss}");
            assert_eq!(ss["duration"], 3, "{tool:?}");
            assert_eq!(ss["data"]["iops"].as_array().unwrap().len(), 3, "{ss}");
            // The window's IOPS are the rate of the jobs it judges.
            let mean = ss["data"]["iops_mean"].as_u64().unwrap();
            assert!(
                mean.abs_diff(1000 * jobs) < 250 * jobs,
                "{tool:?} {extra:?}: {ss}"
            );
            let bw = ss["data"]["bw_mean"].as_u64().unwrap();
            assert!(bw.abs_diff(4096 * mean) < 4096 * 250 * jobs, "{ss}");
            sections.push(ss);
        }
        let [lg, fio] = &sections[..] else {
            unreachable!()
        };
        assert_eq!(keys(lg), keys(fio));
        assert_eq!(keys(&lg["data"]), keys(&fio["data"]));
        assert_eq!(lg["ss"], fio["ss"]);
    }
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, json, err) = run(
            tool,
            &dir,
            &args(&["--runtime=3", "--ss=iops:0", "--ss_dur=2"]),
        );
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let job = &json.unwrap()["jobs"][0];
        assert_eq!(job["steadystate"]["attained"], 0, "{tool:?}");
        assert_eq!(job["steadystate"]["ss"], "iops:0.000000", "{tool:?}");
        let ms = job["read"]["runtime"].as_u64().unwrap();
        assert!(ms >= 2900, "{tool:?} stopped at {ms} ms");
    }
    // Without ss_dur there is no check, as fio's default; a window under 1 s is refused.
    let (code, json, _) = run(Tool::Loadgen, &dir, &args(&["--runtime=1", "--ss=iops:5"]));
    assert_eq!(code, Some(0));
    assert!(json.unwrap()["jobs"][0].get("steadystate").is_none());
    let (code, _, err) = run(Tool::Loadgen, &dir, &args(&["--ss_dur=500ms"]));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--steadystate_duration: `500ms` is under a second"),
        "{err}"
    );
    let (code, _, err) = run(Tool::Loadgen, &dir, &args(&["--ss=iops_mean:1"]));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("use iops, iops_slope, bw or bw_slope"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Flips one bit of the byte at `at` in `path`.
fn flip(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
}

/// `verify_pattern` (fio's surface-scan) with `do_verify=0`: each tool writes a file whose
/// blocks carry the pattern after their header; one byte of the fourth block is damaged
/// between the write and a read-only verifying run, and each tool names that block's offset
/// (12288) and the pattern byte it got and wanted, as fio does, and fails; with
/// `verify_dump` both write the block as read and as written to fio's file names.
#[test]
fn verify_pattern_is_written_and_a_damaged_block_is_named_as_fio() {
    let common = [
        "--name=v",
        "--filename=f",
        "--size=64k",
        "--bs=4k",
        "--verify_pattern=0xaa555aa5",
    ];
    for tool in [Tool::Loadgen, Tool::Fio] {
        let dir = scratch(&format!("vpat-{tool:?}"));
        let mut write = common.to_vec();
        write.extend(["--rw=write", "--do_verify=0"]);
        let (code, _, err) = run(tool, &dir, &write);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let data = std::fs::read(dir.join("f")).unwrap();
        // The pattern fills every block past its header (fio's header: 40 bytes here).
        for block in data.chunks(4096) {
            let tail = &block[64..];
            assert!(
                tail.chunks(4).all(|c| c == [0xaa, 0x55, 0x5a, 0xa5]),
                "{tool:?}: the pattern is not in the block"
            );
        }
        let mut read = common.to_vec();
        read.push("--rw=read");
        let (code, _, err) = run(tool, &dir, &read);
        assert_eq!(code, Some(0), "{tool:?} before the damage: {err}");
        flip(&dir.join("f"), 12288 + 100);
        read.push("--verify_dump=1");
        let (code, _, err) = run(tool, &dir, &read);
        // verify_dump: the block as read, and as written: past the headers (fio rebuilds
        // its own header's fields), only the damaged bit differs.
        let received = std::fs::read(dir.join("f.12288.received")).unwrap();
        let expected = std::fs::read(dir.join("f.12288.expected")).unwrap();
        assert_eq!(
            received,
            std::fs::read(dir.join("f")).unwrap()[12288..16384]
        );
        let diff: Vec<usize> = (64..4096).filter(|&i| received[i] != expected[i]).collect();
        assert_eq!(diff, [100], "{tool:?}");
        assert_eq!(received[100] ^ expected[100], 0x10, "{tool:?}");
        assert_ne!(code, Some(0), "{tool:?} missed the damage");
        match tool {
            Tool::Fio => {
                assert!(err.contains("got pattern 'ba', wanted 'aa'"), "{err}");
                assert!(
                    err.contains("verify failed at file f offset 12288"),
                    "{err}"
                );
            }
            Tool::Loadgen => {
                assert_eq!(code, Some(3));
                assert!(
                    err.contains(
                        "f offset 12288 (0x3000): pattern: got 0xba, wanted 0xaa at byte 100 of the block (file offset 12388)"
                    ),
                    "{err}"
                );
                assert_eq!(err.matches("offset 12288").count(), 1, "{err}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `verify_backlog=N` (fio's cross-stripe-verify): the blocks written are read back every N
/// writes during the workload, so even with `do_verify=0` (no read-back at the end) every
/// block written is checked; without the backlog none is.
#[test]
fn verify_backlog_reads_back_during_the_workload() {
    let dir = scratch("backlog");
    let verify = |extra: &[&str]| {
        let mut a = vec![
            "--name=b",
            "--filename=f",
            "--size=1m",
            "--bs=4k",
            "--rw=randwrite",
            "--verify=crc32c",
            "--do_verify=0",
        ];
        a.extend(extra);
        let (code, json, err) = run(Tool::Loadgen, &dir, &a);
        assert_eq!(code, Some(0), "{err}");
        json.unwrap()["jobs"][0]["loadgen"]["verify"].clone()
    };
    let v = verify(&["--verify_backlog=16"]);
    assert_eq!(v["blocks_written"], 256, "{v}");
    assert_eq!(v["readback_ios"], 256, "{v}");
    assert_eq!(v["blocks_checked"], 256, "{v}");
    let v = verify(&[]);
    assert_eq!(v["readback_ios"], 0, "{v}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A read of `/dev/zero` on a busy machine: io_uring's non-blocking first try returns early
/// with part of the bytes when the CPU is wanted elsewhere. As in fio's io_uring engine, such
/// a read counts with the bytes it moved and the job goes on (it once failed as a short read).
#[test]
fn dev_zero_read_cut_short_on_a_busy_machine_counts_what_it_moved() {
    let dir = scratch("zero-busy");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let (code, json, err) = run(
        Tool::Loadgen,
        &dir,
        &[
            "--name=z",
            "--filename=/dev/zero",
            "--rw=read",
            "--bs=64m",
            "--size=1g",
            "--ioengine=io_uring",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinners.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(code, Some(0), "{err}");
    let read = &json.unwrap()["jobs"][0]["read"];
    assert_eq!(read["total_ios"], 16, "{read}");
    let bytes = read["io_bytes"].as_u64().unwrap();
    assert!(bytes > 0 && bytes <= 1 << 30, "{bytes}");
    eprintln!("read {bytes} of {} bytes", 1u64 << 30);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/dev/null` and `/dev/zero` as targets (fio's steadystate.fio writes one and reads the
/// other): both tools do the IO of `size` there, and no other character device is taken.
#[test]
fn dev_null_and_dev_zero_take_io_as_fios() {
    let dir = scratch("sinks");
    for tool in [Tool::Loadgen, Tool::Fio] {
        for (target, rw, d) in [
            ("/dev/null", "write", "write"),
            ("/dev/zero", "read", "read"),
        ] {
            let (code, json, err) = run(
                tool,
                &dir,
                &[
                    "--name=s",
                    &format!("--filename={target}"),
                    &format!("--rw={rw}"),
                    "--bs=128k",
                    "--size=16m",
                ],
            );
            assert_eq!(code, Some(0), "{tool:?} {target}: {err}");
            let ios = json.unwrap()["jobs"][0][d]["total_ios"].as_u64();
            assert_eq!(ios, Some(128), "{tool:?} {target}");
        }
    }
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &["--name=s", "--filename=/dev/urandom", "--size=1m"],
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("only /dev/null and /dev/zero"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
