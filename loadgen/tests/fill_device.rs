//! fio's `surface-scan.fio` on a small file system of its own (a tmpfs of 8 MiB): its
//! first job writes 64 KiB blocks, each with a verify header every 512 bytes
//! (`verify=meta`, `verify_interval=512`), until the file system is full (`fill_device`);
//! ENOSPC ends the writes, not the run; its second job, after a wall, reads back and checks
//! every block written. fio, run the same way, writes as much. Needs root (to mount).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// fio's example, as Debian's fio-examples has it.
const SURFACE_SCAN: &str = "; writes 512 byte verification blocks until the disk is full,
; then verifies written data
[global]
thread
bs=64k
direct=1
ioengine=sync
verify=meta
verify_pattern=0xaa555aa5
verify_interval=512

[write-phase]
filename=datafile.tmp\t; or use a full disk, for example /dev/sda
rw=write
fill_device=1
do_verify=0

[verify-phase]
stonewall
create_serialize=0
filename=datafile.tmp
rw=read
do_verify=1
";

mod beside_fio;

use beside_fio::{SmallFs, Tool};

/// Runs `tool` on scan.fio in `dir` with `args`: its output and JSON report.
fn run(tool: Tool, args: &[&str], dir: &Path) -> (Output, Option<Value>) {
    // fio prints its warnings (a verify state file it cannot write on a full file system)
    // on stderr, but may put a line before its JSON.
    let o = tool
        .command()
        .args(args)
        .arg("--output-format=json")
        .arg("scan.fio")
        .current_dir(dir)
        .output()
        .expect("runs (cargo xtask setup installs fio)");
    let json = tool.json(&o);
    (o, json)
}

/// (bytes written by the first job, bytes read by the second), with each job's error.
fn phases(j: &Value) -> (u64, u64) {
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{j}");
    for job in jobs {
        assert_eq!(job["error"], 0, "{job}");
    }
    (
        jobs[0]["write"]["io_bytes"].as_u64().unwrap(),
        jobs[1]["read"]["io_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn fill_device_writes_until_full_and_the_verify_phase_reads_it_all_as_fio() {
    let Some(fs) = SmallFs::mount("fill-device", "scan", "8m") else {
        return;
    };
    let dir = &fs.dir;
    std::fs::write(dir.join("scan.fio"), SURFACE_SCAN).unwrap();
    // The job file stays; what is free is what it leaves.

    let (o, json) = run(Tool::Loadgen, &[], dir);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "loadgen: {err}");
    assert!(
        err.contains("is full at offset"),
        "ENOSPC ended the writes: {err}"
    );
    let json = json.expect("loadgen's JSON");
    let (written, read) = phases(&json);
    let block = 64 << 10;
    assert!(written >= 7 << 20 && written % block == 0, "{written}");
    assert_eq!(
        read, written,
        "the verify phase reads back everything written"
    );
    // The write that found the file system full may have put part of its block there
    // (a short write), which neither tool counts and the verify phase leaves out.
    let size = std::fs::metadata(dir.join("datafile.tmp")).unwrap().len();
    assert!(
        (written..written + block).contains(&size),
        "{size} after {written}"
    );
    let v = &json["jobs"][1]["loadgen"]["verify"];
    assert_eq!(v["blocks_checked"].as_u64(), Some(written / block), "{v}");
    assert_eq!(v["corruptions"].as_array().map(Vec::len), Some(0), "{v}");

    // A byte damaged inside the second 512 bytes of the second block: the verify phase
    // alone (fio's --section) names that piece, and exits 3.
    let path = dir.join("datafile.tmp");
    let mut data = std::fs::read(&path).unwrap();
    data[(block + 700) as usize] ^= 0x10;
    std::fs::write(&path, &data).unwrap();
    drop(data);
    let (o, _) = run(Tool::Loadgen, &["--section=verify-phase"], dir);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("at {} (verify_interval=512)", block + 512)),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();

    let (o, json) = run(Tool::Fio, &[], dir);
    assert!(
        o.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (fio_written, fio_read) = phases(&json.expect("fio's JSON"));
    assert_eq!(fio_read, fio_written, "fio's verify phase");
    assert!(
        written.abs_diff(fio_written) <= 2 * block,
        "loadgen wrote {written}, fio {fio_written}"
    );
}
