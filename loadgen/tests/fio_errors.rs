//! fio's options for errors and for the file system filling up, each run by loadgen and by
//! fio (the reference) on the same job: `continue_on_error` with `ignore_error` on a file
//! system that runs out of space, `rw=randtrim` punching holes in a file, and
//! `verify_fatal` stopping a job at the first corrupt block.
//!
//! The full file system is a tmpfs this test mounts, so those tests need root: without it
//! they are skipped with a message, unless CI is set (then they fail).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod beside_fio;

use beside_fio::{BOTH, SmallFs, Tool};

fn scratch(name: &str) -> PathBuf {
    beside_fio::scratch("fio-errors", name)
}

/// Runs `tool` on the job file `job` in `dir`: its exit status, JSON (when it wrote one)
/// and stderr.
fn run(tool: Tool, dir: &Path, job: &str) -> (Option<i32>, Option<Value>, String) {
    std::fs::write(dir.join("job.fio"), job).unwrap();
    let mut c = tool.command();
    c.arg("--output-format=json").arg("job.fio");
    tool.outcome(c, dir)
}

/// A job that writes 16 MiB into a 4 MiB file system, as fio's enospc-pressure.fio does
/// (`fallocate=none`: the file grows as the writes land).
fn enospc_job(fs: &Path, extra: &str) -> String {
    format!(
        "[global]\nioengine=libaio\ndirectory={}\nfallocate=none\n{extra}\n\
         [fill]\nfilename=f\nfilesize=16m\nbs=64k\nrw=write\niodepth=4\n",
        fs.display()
    )
}

/// `continue_on_error=write` with `ignore_error=,ENOSPC`: the writes that find the file
/// system full are counted, not fatal; the job goes on to the end of its size and the run
/// succeeds (exit 0), with fio's `total_err`, `first_error` and `error` (ENOSPC).
#[test]
fn enospc_with_continue_on_error_goes_on_as_fio() {
    for tool in BOTH {
        let Some(fs) = SmallFs::mount("fio-errors", &format!("enospc-go-{tool:?}"), "4m") else {
            return;
        };
        let job = enospc_job(
            &fs.dir,
            "continue_on_error=write\nignore_error=,ENOSPC\nerror_dump=0",
        );
        let (code, json, err) = run(tool, fs.dir.parent().unwrap(), &job);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let j = &json.expect("JSON")["jobs"][0];
        // fio's `error` of a job that went on: its first error.
        assert_eq!(j["error"], 28, "{tool:?}");
        assert_eq!(j["first_error"], 28, "{tool:?}: ENOSPC first");
        let errors = j["total_err"].as_u64().unwrap();
        let bytes = j["write"]["io_bytes"].as_u64().unwrap();
        // The writes that landed fill the 4 MiB, no more; the rest of the 256 failed.
        assert!(bytes > 2 << 20 && bytes <= 4 << 20, "{tool:?}: {bytes}");
        assert!((128..=224).contains(&errors), "{tool:?}: {errors} errors");
        assert!(
            !err.contains("No space left"),
            "{tool:?}: error_dump=0: {err}"
        );
        let size = std::fs::metadata(fs.dir.join("f")).unwrap().len();
        assert!(size <= 4 << 20, "{tool:?}: the file is {size} bytes");
    }
}

/// Without `continue_on_error` the first write that finds the file system full ends the job,
/// and the run fails naming ENOSPC, as fio's (its JSON `error`: 28).
#[test]
fn enospc_without_continue_on_error_fails_naming_it_as_fio() {
    for tool in BOTH {
        let Some(fs) = SmallFs::mount("fio-errors", &format!("enospc-stop-{tool:?}"), "4m") else {
            return;
        };
        let (code, json, err) = run(tool, fs.dir.parent().unwrap(), &enospc_job(&fs.dir, ""));
        assert_ne!(code, Some(0), "{tool:?}: {err}");
        assert!(err.contains("No space left on device"), "{tool:?}: {err}");
        match tool {
            Tool::Fio => assert_eq!(json.expect("JSON")["jobs"][0]["error"], 28),
            Tool::Loadgen => {
                assert_eq!(code, Some(1), "a run-time failure");
                assert!(err.contains("ENOSPC") && err.contains("/fs/f"), "{err}");
                assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            }
        }
    }
}

/// Whether a file holds data anywhere (SEEK_DATA from its start finds any).
fn has_data(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: a plain system call on a file opened here.
    unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_DATA) >= 0 }
}

/// `rw=randtrim` on a file: every 4 KiB of it becomes a hole (its blocks freed, its size
/// kept) and the IOs are counted in the JSON's `trim` section. fio 3.33 trims files only with
/// its `falloc` engine (its other engines send a block device's BLKDISCARD, which a file
/// refuses): that one is the reference here.
#[test]
fn randtrim_punches_holes_counted_as_fios_trims() {
    for tool in BOTH {
        let dir = scratch(&format!("trim-{tool:?}"));
        let f = dir.join("f");
        std::fs::write(&f, vec![0x5au8; 1 << 20]).unwrap();
        let engine = match tool {
            Tool::Loadgen => "io_uring",
            Tool::Fio => "falloc",
        };
        // lfsr: every block once (loadgen's random offsets use no map otherwise).
        let job = format!(
            "[t]\nfilename=f\nsize=1m\nbs=4k\nrw=randtrim\nrandom_generator=lfsr\nioengine={engine}\n"
        );
        let (code, json, err) = run(tool, &dir, &job);
        assert_eq!(code, Some(0), "{tool:?}: {err}");
        let j = &json.expect("JSON")["jobs"][0];
        assert_eq!(j["trim"]["total_ios"], 256, "{tool:?}");
        assert_eq!(j["trim"]["io_bytes"], 1 << 20, "{tool:?}");
        assert_eq!(j["write"]["total_ios"], 0, "{tool:?}");
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(m.len(), 1 << 20, "{tool:?}: the size is kept");
        assert_eq!(m.blocks(), 0, "{tool:?}: every block freed");
        assert!(!has_data(&f), "{tool:?}: SEEK_DATA finds none");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // The synchronous engine punches the same holes.
    let dir = scratch("trim-psync");
    std::fs::write(dir.join("f"), vec![0x5au8; 64 << 10]).unwrap();
    let (code, json, err) = run(
        Tool::Loadgen,
        &dir,
        "[t]\nfilename=f\nsize=64k\nbs=8k\nrw=trim\nioengine=psync\n",
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(json.unwrap()["jobs"][0]["trim"]["total_ios"], 8);
    assert!(!has_data(&dir.join("f")));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `verify_fatal=1`: reading back a file with two damaged blocks, the job stops at the
/// first (one corrupt block reported, the reads after it never issued); without it every
/// block is read and both are reported. Both runs exit 3 (corrupt data).
#[test]
fn verify_fatal_stops_the_job_at_the_first_corrupt_block() {
    let dir = scratch("verify-fatal");
    let common = "filename=f\nsize=64k\nbs=4k\nverify=crc32c\niodepth=1\n";
    let (code, _, err) = run(
        Tool::Loadgen,
        &dir,
        &format!("[w]\n{common}rw=write\ndo_verify=0\n"),
    );
    assert_eq!(code, Some(0), "{err}");
    let mut data = std::fs::read(dir.join("f")).unwrap();
    for block in [3, 10] {
        data[block * 4096 + 100] ^= 0xff;
    }
    std::fs::write(dir.join("f"), &data).unwrap();
    let check = |fatal: &str| {
        let (code, json, err) = run(
            Tool::Loadgen,
            &dir,
            &format!("[r]\n{common}rw=read\nverify_fatal={fatal}\n"),
        );
        assert_eq!(code, Some(3), "verify_fatal={fatal}: {err}");
        let j = json.expect("JSON")["jobs"][0].clone();
        let bad: Vec<u64> = j["loadgen"]["verify"]["corruptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["offset"].as_u64().unwrap())
            .collect();
        (j["read"]["total_ios"].as_u64().unwrap(), bad)
    };
    assert_eq!(check("1"), (4, vec![3 * 4096]), "stopped at block 3");
    assert_eq!(
        check("0"),
        (16, vec![3 * 4096, 10 * 4096]),
        "every block read"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bad values of the new options: one line naming the option, exit 2.
#[test]
fn bad_error_and_layout_values_are_refused_in_one_line() {
    for (arg, named) in [
        ("--continue_on_error=sometimes", "--continue_on_error"),
        ("--ignore_error=,ENOPE", "--ignore_error"),
        ("--ignore_error=EIO,EIO,EIO,EIO", "--ignore_error"),
        ("--fallocate=2", "--fallocate"),
        ("--create_on_open=maybe", "--create_on_open"),
        ("--verify_fatal=x", "--verify_fatal"),
        ("--verify_async=-1", "--verify_async"),
        ("--error_dump=2", "--error_dump"),
        ("--rw=trimwrite", "trimwrite"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(["run", "--parse-only", "--name=t", "--size=1m", arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{arg}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{arg}: {err}");
        assert!(err.contains(named), "{arg}: {err}");
    }
}

/// fio's enospc-pressure.fio itself, on a 16 MiB tmpfs for 2 s (its `directory` and
/// `runtime` changed, nothing else): loadgen runs it to the end with fio's meaning — the
/// direct writes go on after ENOSPC (`total_err`, `first_error` 28), the trims punch holes
/// in the same file (counted in `trim`), the verifier finds no corrupt block — and exits 0.
/// fio 3.33 beside it: its trim job fails at once with ENOTTY (its engines trim a file with
/// a block device's BLKDISCARD; see docs/loadgen.md) and `exitall` ends the others.
#[test]
fn enospc_pressure_example_runs_on_a_full_file_system() {
    let example = Path::new("/usr/share/doc/fio/examples/enospc-pressure.fio");
    if !example.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing",
            example.display()
        );
        eprintln!("skipped: {} is missing", example.display());
        return;
    }
    let text = std::fs::read_to_string(example).unwrap();
    for tool in BOTH {
        let Some(fs) = SmallFs::mount("fio-errors", &format!("enospc-example-{tool:?}"), "16m")
        else {
            return;
        };
        let job = text
            .replace(
                "directory=/scratch",
                &format!("directory={}", fs.dir.display()),
            )
            .replace("runtime=100", "runtime=2");
        assert_ne!(job, text);
        let (code, json, err) = run(tool, fs.dir.parent().unwrap(), &job);
        let jobs = json.expect("JSON")["jobs"].clone();
        let by = |name: &str| {
            jobs.as_array()
                .unwrap()
                .iter()
                .find(|j| j["jobname"] == name)
                .unwrap()
                .clone()
        };
        let (dio, punch, verifier) = (
            by("dio-raicer"),
            by("punch_hole-raicer"),
            by("aio-dio-verifier"),
        );
        match tool {
            Tool::Loadgen => {
                assert_eq!(code, Some(0), "{err}");
                assert_eq!(dio["first_error"], 28, "ENOSPC");
                assert!(dio["total_err"].as_u64().unwrap() > 0);
                assert!(dio["write"]["io_bytes"].as_u64().unwrap() > 0);
                assert_eq!(punch["error"], 0);
                assert!(punch["trim"]["total_ios"].as_u64().unwrap() > 0);
                assert_eq!(punch["write"]["total_ios"], 0);
                assert_eq!(
                    verifier["loadgen"]["verify"]["corruptions"],
                    serde_json::json!([]),
                    "{err}"
                );
            }
            Tool::Fio => {
                assert_eq!(code, Some(1), "{err}");
                assert_eq!(
                    punch["error"],
                    libc::ENOTTY,
                    "fio 3.33: BLKDISCARD on a file"
                );
                assert_eq!(dio["error"], 0);
            }
        }
    }
}
