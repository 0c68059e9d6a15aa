use serde_json::Value;
use stornet_lab::blockdev::{LoopDevice, read_direct, write_direct};
use stornet_lab::loadgen::{at, num, run};
use stornet_lab::privilege::require_root;

/// A run with --verify writes a header into every block and checks all of them on read-back;
/// a block changed behind loadgen's back (a flipped byte), and one copied to the wrong place,
/// are both found by a later verifying read, with their offsets, and the exit status is 3.
#[test]
fn loadgen_verify_finds_corrupted_blocks() {
    if !require_root("loadgen_verify_finds_corrupted_blocks") {
        return;
    }
    let disk = LoopDevice::new("lgverify", 16 << 20).expect("loop device");
    let dev = disk.dev.to_str().unwrap();
    let common = [
        "--filename",
        dev,
        "--bs=4k",
        "--size=16M",
        "--iodepth=8",
        "--verify",
    ];

    let mut write = common.to_vec();
    write.extend([
        "--rw=randwrite",
        "--time_based",
        "--runtime=1",
        "--output-format=json",
    ]);
    let w = run(&write).unwrap();
    assert_eq!(w.code, Some(0), "{}", w.stderr);
    let wj = w.json().unwrap();
    assert!(num(&wj, "jobs/0/loadgen/verify/blocks_written") > 0.0);
    assert_eq!(
        num(&wj, "jobs/0/loadgen/verify/blocks_checked"),
        num(&wj, "jobs/0/loadgen/verify/readback_ios"),
        "every written block is read back"
    );
    // A random 1 s run does not cover every block: fill the rest sequentially.
    let mut fill = common.to_vec();
    fill.push("--rw=write");
    let f = run(&fill).unwrap();
    assert_eq!(f.code, Some(0), "{}", f.stderr);

    let mut read = common.to_vec();
    read.extend(["--rw=read", "--output-format=json"]);
    let clean = run(&read).unwrap();
    assert_eq!(
        clean.code,
        Some(0),
        "an untouched device verifies: {}",
        clean.stderr
    );
    assert_eq!(
        num(
            &clean.json().unwrap(),
            "jobs/0/loadgen/verify/blocks_checked"
        ),
        4096.0
    );

    // Flip one byte inside block 5; copy block 9 over block 12.
    let flipped = 5 * 4096u64;
    let mut b = read_direct(&disk.dev, flipped, 4096).unwrap();
    b[1000] ^= 0x40;
    write_direct(&disk.dev, flipped, &b).unwrap();
    let misplaced = 12 * 4096u64;
    let b9 = read_direct(&disk.dev, 9 * 4096, 4096).unwrap();
    write_direct(&disk.dev, misplaced, &b9).unwrap();

    let bad = run(&read).unwrap();
    assert_eq!(bad.code, Some(3), "corruption exits 3: {}", bad.stderr);
    let j = bad.json().unwrap();
    let found: Vec<(u64, String)> = at(&j, "jobs/0/loadgen/verify/corruptions")
        .and_then(Value::as_array)
        .expect("corruptions list")
        .iter()
        .map(|c| {
            (
                num(c, "offset") as u64,
                c["problem"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .any(|(o, p)| *o == flipped && p.contains("crc32c")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(o, p)| *o == misplaced && p.contains("misplaced")),
        "{found:?}"
    );
    assert!(
        bad.stderr.contains(&format!("offset {flipped}")),
        "{}",
        bad.stderr
    );
    assert!(
        bad.stderr.contains(&format!("offset {misplaced}")),
        "{}",
        bad.stderr
    );
}
