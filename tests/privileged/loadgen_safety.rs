use std::process::Command;

use stornet_lab::blockdev::{LoopDevice, Mount};
use stornet_lab::loadgen::run;
use stornet_lab::privilege::{require_root, require_tool};

/// A loop device holding ext4 is refused for writing (exit 2, one line naming the filesystem
/// and the override) and not one block is written; when mounted it is refused even with
/// --force-destroy-data; unmounted and forced, loadgen writes.
#[test]
fn loadgen_refuses_a_device_with_a_filesystem() {
    if !require_root("loadgen_refuses_a_device_with_a_filesystem")
        || !require_tool("loadgen_refuses_a_device_with_a_filesystem", "mkfs.ext4")
    {
        return;
    }
    let disk = LoopDevice::new("lgsafety", 64 << 20).expect("loop device");
    let dev = disk.dev.to_str().unwrap();
    let st = Command::new("mkfs.ext4")
        .args(["-q", "-F", dev])
        .status()
        .unwrap();
    assert!(st.success(), "mkfs.ext4");
    disk.settle();
    let args = ["--filename", dev, "--rw=randwrite", "--bs=4k", "--size=1M"];

    let before = disk.stat().unwrap();
    let r = run(&args).unwrap();
    let after = disk.stat().unwrap();
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {}", r.stderr);
    assert!(r.stderr.contains("ext2/ext3/ext4"), "{}", r.stderr);
    assert!(r.stderr.contains("--force-destroy-data"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    assert_eq!(after.write_ios, before.write_ios, "nothing was written");

    // Reading is harmless and allowed.
    let read = run(&["--filename", dev, "--rw=randread", "--bs=4k", "--size=1M"]).unwrap();
    assert_eq!(read.code, Some(0), "{}", read.stderr);

    {
        let m = Mount::new(&disk.dev, "lgsafety").expect("mount");
        let mut forced = args.to_vec();
        forced.push("--force-destroy-data");
        let r = run(&forced).unwrap();
        assert_eq!(r.code, Some(2), "{}", r.stderr);
        assert!(r.stderr.contains("is mounted at"), "{}", r.stderr);
        assert!(r.stderr.contains(m.dir.to_str().unwrap()), "{}", r.stderr);
    }

    let mut forced = args.to_vec();
    forced.push("--force-destroy-data");
    let before = disk.stat().unwrap();
    let r = run(&forced).unwrap();
    let after = disk.stat().unwrap();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        after.write_ios - before.write_ios,
        256,
        "1 MiB of 4 KiB writes"
    );
}
