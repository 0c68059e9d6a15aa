//! What some of fio's own example job files need, run by loadgen and by fio side by side:
//! strided zones (`disk-zone-profile.fio`), verifying clones of one file at their own
//! regions (`cross-stripe-verify.fio`), and `--section` with `${VAR}` (`xnvme-compare.fio`).
//! Where IOs landed is read back from the file itself (zeroed first, written with each
//! tool's non-zero data): an independent count of the blocks each tool wrote. No root needed.

use std::path::{Path, PathBuf};

use serde_json::Value;

const EXAMPLES: &str = "/usr/share/doc/fio/examples";

mod beside_fio;

use beside_fio::Tool;

fn scratch(name: &str) -> PathBuf {
    beside_fio::scratch("fio-example-jobs", name)
}

/// Runs `tool` in `dir` with `args` (and `env`, without the variables the examples read
/// unless given): its exit status, JSON (when it wrote one) and stderr.
fn run(
    tool: Tool,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, Option<Value>, String) {
    let mut c = tool.command();
    for k in ["FIO_RW", "FIO_BS", "FIO_IODEPTH"] {
        c.env_remove(k);
    }
    c.args(args).envs(env.iter().copied());
    tool.outcome(c, dir)
}

/// Which `unit`-sized pieces of a file hold anything but zeros, as `x` and `.`.
fn written(path: &Path, unit: usize) -> String {
    std::fs::read(path)
        .unwrap()
        .chunks(unit)
        .map(|c| if c.iter().any(|&b| b != 0) { 'x' } else { '.' })
        .collect()
}

/// Each tool writes a zeroed file of `len` bytes with `args`; (writes it counted, the map
/// of `unit`-byte pieces that hold its data, its JSON).
fn write_map(
    tool: Tool,
    name: &str,
    len: usize,
    args: &[&str],
    unit: usize,
) -> (u64, String, Value) {
    let dir = scratch(&format!("{name}-{tool:?}"));
    std::fs::write(dir.join("f"), vec![0u8; len]).unwrap();
    let mut all = vec!["--output-format=json"];
    all.extend(args);
    let (code, json, err) = run(tool, &dir, &all, &[]);
    assert_eq!(code, Some(0), "{tool:?} {args:?}: {err}");
    let json = json.expect("JSON");
    let ios = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["write"]["total_ios"].as_u64().unwrap())
        .sum();
    let map = written(&dir.join("f"), unit);
    std::fs::remove_dir_all(&dir).unwrap();
    (ios, map, json)
}

/// `zonemode=strided`: `zonesize` bytes of IO per zone of `zonerange` bytes (gone over
/// again while the size is larger), `zoneskip` left out after each, wrapping at the end of
/// the file to the job's `offset`, `size` or `io_size` bounding the bytes, not the place.
/// The blocks each zone got, and the count of writes, are fio's, case by case.
#[test]
fn strided_zones_visit_fios_blocks() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--zonesize=16k", "--zoneskip=48k"],
            "xxxx............xxxx............xxxx............xxxx............",
        ),
        (
            &["--zonesize=16k", "--zonerange=64k"],
            "xxxx............xxxx............xxxx............xxxx............",
        ),
        (
            &["--zonesize=32k", "--zonerange=16k", "--zoneskip=16k"],
            "xxxx....xxxx....xxxx....xxxx....xxxx....xxxx....xxxx....xxxx....",
        ),
        (
            &["--zonesize=16k", "--zoneskip=48k", "--size=128k"],
            "xxxx............xxxx............xxxx............xxxx............",
        ),
        (
            &[
                "--zonesize=16k",
                "--zoneskip=48k",
                "--offset=8k",
                "--size=200k",
            ],
            "..xxxx............xxxx............xxxx............xxxx..........",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "--name=t",
            "--filename=f",
            "--bs=4k",
            "--rw=write",
            "--zonemode=strided",
        ];
        args.extend(*extra);
        let lg = write_map(Tool::Loadgen, "zones", 256 << 10, &args, 4096);
        let fio = write_map(Tool::Fio, "zones", 256 << 10, &args, 4096);
        assert_eq!((lg.0, &lg.1), (fio.0, &fio.1), "loadgen and fio, {extra:?}");
        assert_eq!(&lg.1, want, "{extra:?}");
    }
    // fio's example parses; zbd is refused in one line that says what it needs.
    let dir = scratch("zone-example");
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &["--parse-only", "--name=z", "--size=1m", "--zonemode=zbd"],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.trim().lines().count() == 1
            && err.contains("zoned block device (host-managed or host-aware)"),
        "{err}"
    );
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &[
            "--parse-only",
            "--name=z",
            "--size=1m",
            "--zonemode=strided",
            "--zonesize=64k",
            "--rw=randread",
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--zonemode=strided with --rw=randread"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `cross-stripe-verify.fio`'s shape on a 4 MiB file: 3 verifying clones, each at its own
/// `offset_increment` region, 16k written every 128k (`rw=write:112k`), `io_size`,
/// `verify_backlog`, `loops=2` (each loop going on where the last ended, as fio's). Their
/// regions cannot overlap, so loadgen runs them: the same blocks as fio's and as many
/// writes, no corrupt block. With an `io_size` that
/// reaches the next clone's start, fio warns that writers may overwrite each other's
/// blocks; loadgen refuses it in one line, and so the example itself, whose clones reach
/// 1.9 TiB past their starts (120g of 16k writes 128k apart, twice), 124g apart.
#[test]
fn verifying_clones_at_their_own_regions_run_as_fios() {
    let base = [
        "--name=write-verify",
        "--filename=f",
        "--bs=16k",
        "--rw=write:112k",
        "--verify=crc32c",
        "--verify_backlog=1",
        "--offset_increment=1m",
        "--offset=120k",
        "--loops=2",
        "--numjobs=3",
    ];
    let args = [&base[..], &["--io_size=64k"]].concat();
    let lg = write_map(Tool::Loadgen, "clones", 4 << 20, &args, 16 << 10);
    let fio = write_map(Tool::Fio, "clones", 4 << 20, &args, 16 << 10);
    assert_eq!((lg.0, &lg.1), (fio.0, &fio.1), "loadgen and fio");
    // 3 clones × 4 blocks × 2 loops, the second loop going on from the first (fio's): 8
    // blocks in each clone's first MiB, each across two 16k pieces (at 120k + 128k × n).
    assert_eq!(lg.0, 24);
    assert_eq!(lg.1.matches('x').count(), 48, "{}", lg.1);
    for j in lg.2["jobs"].as_array().unwrap() {
        let v = &j["loadgen"]["verify"];
        assert_eq!(v["corruptions"].as_array().map(Vec::len), Some(0), "{v}");
        assert!(v["blocks_checked"].as_u64().unwrap() >= 8, "{v}");
    }

    let dir = scratch("clones-refused");
    std::fs::write(dir.join("f"), vec![0u8; 4 << 20]).unwrap();
    // 5 IOs a loop, 10 in all: 9 × 128k + 16k past the start, beyond the next clone's.
    let over = [&base[..], &["--io_size=80k", "--parse-only"]].concat();
    let (code, _, err) = run(Tool::Loadgen, &dir, &over, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("could overwrite each other's blocks") && err.contains("offset_increment"),
        "{err}"
    );
    let example = Path::new(EXAMPLES).join("cross-stripe-verify.fio");
    if example.exists() {
        let (code, _, err) = run(
            Tool::Loadgen,
            &dir,
            &["--parse-only", example.to_str().unwrap()],
            &[],
        );
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("more than --offset_increment"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `xnvme-compare.fio`: as fio 3.33, without `--section` its `[override]` section's
/// `${FIO_RW}`, unset, fails the file (fio keeps the text and fails to parse it; loadgen
/// names the variable); `--section=default` runs only that section; `--section=override`
/// with the variables set takes their values (fio parses it; loadgen runs it on a small
/// file: 1 MiB in reads of `FIO_BS`).
#[test]
fn sections_and_environment_variables_as_fios() {
    let example = Path::new(EXAMPLES).join("xnvme-compare.fio");
    if !example.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{EXAMPLES} is missing: `cargo xtask setup` installs fio-examples"
        );
        eprintln!("skipped: {EXAMPLES} is missing (apt-get install fio-examples)");
        return;
    }
    let file = example.to_str().unwrap();
    let dir = scratch("sections");
    for tool in [Tool::Loadgen, Tool::Fio] {
        let (code, _, err) = run(tool, &dir, &["--parse-only", file], &[]);
        assert_ne!(code, Some(0), "{tool:?} without --section: {err}");
        assert!(err.contains("FIO_RW"), "{tool:?}: {err}");
        let (code, _, err) = run(
            tool,
            &dir,
            &["--parse-only", "--section=default", file],
            &[],
        );
        assert_eq!(code, Some(0), "{tool:?} --section=default: {err}");
    }
    let (code, _, err) = run(Tool::Loadgen, &dir, &["--parse-only", file], &[]);
    assert_eq!((code, err.trim().lines().count()), (Some(2), 1), "{err}");
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &["--parse-only", "--section=nope", file],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--section=nope"), "{err}");

    let env = [("FIO_RW", "read"), ("FIO_BS", "8k"), ("FIO_IODEPTH", "4")];
    std::fs::write(dir.join("f"), vec![1u8; 1 << 20]).unwrap();
    let args = [
        "--section=override",
        "--filename=f",
        "--size=1m",
        "--time_based=0",
        "--ramp_time=0",
        "--direct=0",
        "--output-format=json",
        file,
    ];
    let shape = |tool| {
        let (code, json, err) = run(tool, &dir, &args, &env);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let json = json.expect("JSON");
        json["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["jobname"].as_str().unwrap().to_string(),
                    j["read"]["total_ios"].as_u64().unwrap(),
                    j["read"]["io_bytes"].as_u64().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    // fio 3.33 itself does not run this on a file that is there: under the example's
    // `allow_file_create=0` it removes the file to lay it out again, then refuses to
    // create it; so fio's side is the parse above, and loadgen's run is checked alone.
    let parse = [&["--parse-only"][..], &args[..]].concat();
    let (code, _, err) = run(Tool::Fio, &dir, &parse, &env);
    assert_eq!(code, Some(0), "fio: {err}");
    let lg = shape(Tool::Loadgen);
    assert_eq!(lg, [("override".to_string(), 128, 1 << 20)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The offsets of a job's IOs in order, from its latency log written with `log_offset`.
fn logged_offsets(tool: Tool, args: &[&str]) -> Vec<(u64, u64)> {
    let dir = scratch(&format!("zone-log-{tool:?}"));
    std::fs::write(dir.join("f"), vec![0u8; 256 << 10]).unwrap();
    let mut all = vec![
        "--output-format=json",
        "--write_lat_log=z",
        "--log_offset=1",
    ];
    all.extend(args);
    let (code, _, err) = run(tool, &dir, &all, &[]);
    assert_eq!(code, Some(0), "{tool:?}: {err}");
    let log = std::fs::read_to_string(dir.join("z_lat.1.log")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    log.lines()
        .map(|l| {
            let f: Vec<u64> = l.split(", ").map(|v| v.trim().parse().unwrap()).collect();
            assert_eq!(
                f.len(),
                6,
                "time, value, direction, size, offset, priority: {l}"
            );
            (f[3], f[4])
        })
        .collect()
}

/// `disk-zone-profile.fio`'s shape (reads in zones, two in flight, `log_offset`): the
/// latency log of each tool gives every IO's size and offset, in the order they completed;
/// loadgen's are fio's, and `log_offset` adds fio's column.
#[test]
fn strided_zone_reads_log_fios_offsets() {
    let args = [
        "--name=t",
        "--filename=f",
        "--bs=16k",
        "--rw=read",
        "--ioengine=libaio",
        "--iodepth=2",
        "--zonemode=strided",
        "--zonesize=32k",
        "--zoneskip=64k",
    ];
    let lg = logged_offsets(Tool::Loadgen, &args);
    let fio = logged_offsets(Tool::Fio, &args);
    let mut sorted_lg = lg.clone();
    let mut sorted_fio = fio.clone();
    // Two IOs in flight may complete in either order: the same IOs, and each zone's.
    sorted_lg.sort_unstable();
    sorted_fio.sort_unstable();
    assert_eq!(sorted_lg, sorted_fio, "loadgen {lg:?}\nfio {fio:?}");
    let k = 1024;
    let zones: Vec<u64> = lg.iter().map(|&(_, o)| o / k).collect();
    assert_eq!(lg.len(), 16, "256k read 16k at a time: {zones:?}");
    assert!(
        lg.iter()
            .all(|&(bs, o)| bs == 16 * k && [0, 16, 96, 112, 192, 208].contains(&(o / k))),
        "{zones:?}"
    );
    let example = Path::new(EXAMPLES).join("disk-zone-profile.fio");
    if example.exists() {
        let dir = scratch("zone-example");
        let (code, _, err) = run(
            Tool::Loadgen,
            &dir,
            &["--parse-only", example.to_str().unwrap()],
            &[],
        );
        assert_eq!(code, Some(0), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
