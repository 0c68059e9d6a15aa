//! fio's `surface-scan.fio` on a small file system of its own (a tmpfs of 8 MiB): its
//! first job writes 64 KiB blocks, each with a verify header every 512 bytes
//! (`verify=meta`, `verify_interval=512`), until the file system is full (`fill_device`);
//! ENOSPC ends the writes, not the run; its second job, after a wall, reads back and checks
//! every block written. fio, run the same way, writes as much. Needs root (to mount).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// A tmpfs mounted for the test, unmounted (and its directory removed) however the test
/// ends.
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(dir: &Path, size: &str) -> Mounted {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "mount: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Mounted(dir.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: umount2 reads a NUL-terminated path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn root_or_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "the fill_device test mounts a tmpfs and needs root in CI"
    );
    eprintln!("skipped: mounting a tmpfs needs root");
    false
}

fn run(prog: &str, args: &[&str], dir: &Path) -> (Output, Option<Value>) {
    let mut c = Command::new(prog);
    if prog != "fio" {
        c.arg("run");
    }
    let o = c
        .args(args)
        .arg("--output-format=json")
        .arg("scan.fio")
        .current_dir(dir)
        .output()
        .expect("runs (cargo xtask setup installs fio)");
    // fio prints its warnings (a verify state file it cannot write on a full file system)
    // on stderr, but may put a line before its JSON.
    let at = o.stdout.iter().position(|&b| b == b'{').unwrap_or(0);
    let json = serde_json::from_slice(&o.stdout[at..]).ok();
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
    if !root_or_skip() {
        return;
    }
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fill-device-{}", std::process::id()));
    let mnt = Mounted::tmpfs(&base.join("mnt"), "8m");
    let dir = &mnt.0;
    std::fs::write(dir.join("scan.fio"), SURFACE_SCAN).unwrap();
    // The job file stays; what is free is what it leaves.
    let lg_bin = env!("CARGO_BIN_EXE_loadgen");

    let (o, json) = run(lg_bin, &[], dir);
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
    let (o, _) = run(lg_bin, &["--section=verify-phase"], dir);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("at {} (verify_interval=512)", block + 512)),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();

    let (o, json) = run("fio", &[], dir);
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
    drop(mnt);
    let _ = std::fs::remove_dir_all(&base);
}
