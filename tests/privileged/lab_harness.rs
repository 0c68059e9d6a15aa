//! The lab harness itself: hosts behind a shaped switch with their own MTUs, slowed disks,
//! everything removed on drop, and leftovers of a killed run found, refused and cleaned
//! without touching what live runs hold.

use std::path::Path;
use std::process::{Command, Stdio};

use stornet_lab::blockdev::LoopDevice;
use stornet_lab::cgroup::{BLKIO_ROOT, CPU_ROOT};
use stornet_lab::lab::{Disk, DiskSpec, HostSpec, Lab, Shaping, Throttle, leftovers};
use stornet_lab::netns::{Netns, ip};
use stornet_lab::privilege::require_root;

fn namespaces() -> String {
    ip(&["netns", "list"]).unwrap()
}

#[test]
fn lab_hosts_sit_behind_a_shaped_switch_and_are_removed_on_drop() {
    if !require_root("lab_hosts_sit_behind_a_shaped_switch_and_are_removed_on_drop") {
        return;
    }
    let names: Vec<String>;
    {
        let lab = Lab::new(
            "labtest",
            &[
                HostSpec::new("a").shaped(Shaping::shallow()),
                HostSpec::new("b").mtu(9000, 1500).shaped(Shaping::deep()),
                HostSpec::new("c").mtu(9000, 9000),
            ],
        )
        .expect("lab");
        names = lab.namespaces().iter().map(|n| n.name.clone()).collect();
        assert_eq!(names.len(), 4);
        for n in &names {
            assert!(n.starts_with("stn-labtest-"), "{n}");
        }
        // Each port's shaping and MTU as tc and sysfs show them.
        let tc = |port: &str| lab.switch.tc(&["qdisc", "show", "dev", port]).unwrap();
        let (a, b) = (tc("port-a"), tc("port-b"));
        assert!(
            a.contains("tbf") && a.contains("rate 200Mbit") && a.contains("limit 16Kb"),
            "{a}"
        );
        // tc shows a large limit as the delay it adds: (4 MiB - 32 KiB) at 200 Mbit/s.
        assert!(
            b.contains("tbf") && b.contains("rate 200Mbit") && b.contains("lat 166ms"),
            "{b}"
        );
        assert!(
            !tc("port-c").contains("tbf"),
            "an unshaped port: {}",
            tc("port-c")
        );
        let mtu = |ns: &Netns, dev: &str| {
            ns.run("cat", &[&format!("/sys/class/net/{dev}/mtu")])
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(mtu(&lab.host("b").ns, "eth0"), "9000");
        assert_eq!(mtu(&lab.switch, "port-b"), "1500");
        assert_eq!(mtu(&lab.switch, "port-c"), "9000");
        // Addresses from the lab range, one subnet, hosts reach each other via the bridge.
        let a = lab.host("a");
        assert!(stornet_lab::netns::is_lab_addr(a.addr));
        assert_eq!(lab.host("c").addr.octets()[..3], a.addr.octets()[..3]);
        lab.wait_connected(a).expect("a reaches b and c");
        let bridged = lab.switch.ip(&["link", "show", "master", "br0"]).unwrap();
        for port in ["port-a", "port-b", "port-c"] {
            assert!(bridged.contains(port), "{port} on the bridge: {bridged}");
        }
        // A sysctl of one host's namespace, not the machine's.
        a.sysctl("net.ipv4.tcp_rmem", "4096 1048576 6291456")
            .unwrap();
        let own = a.ns.run("sysctl", &["-n", "net.ipv4.tcp_rmem"]).unwrap();
        assert!(own.split_whitespace().eq(["4096", "1048576", "6291456"]));
        assert!(
            a.sysctl("vm.swappiness", "1").is_err(),
            "only net.* sysctls"
        );
    }
    let list = namespaces();
    for n in names {
        assert!(!list.contains(&n), "{n} left behind");
    }
}

/// The loop devices whose backing file or device is `target`.
fn loops_on(target: &str) -> Vec<String> {
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            std::fs::read_to_string(format!("/sys/block/{n}/loop/backing_file"))
                .is_ok_and(|b| b.trim().trim_end_matches(" (deleted)") == target)
        })
        .collect()
}

#[test]
fn lab_disks_are_throttled_or_behind_a_short_queue_and_removed_on_drop() {
    if !require_root("lab_disks_are_throttled_or_behind_a_short_queue_and_removed_on_drop") {
        return;
    }
    let (dev, backing, cgroup);
    {
        let disk = Disk::new(
            "labtest",
            DiskSpec::new(64 << 20).throttle(Throttle::WriteIops(100)),
        )
        .expect("throttled disk");
        dev = disk.path().display().to_string();
        backing = std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", disk.name()))
            .unwrap()
            .trim()
            .to_string();
        assert!(
            backing.starts_with("/dev/shm/stornet-test-lab-labtest"),
            "{backing}"
        );
        cgroup = std::fs::read_dir(BLKIO_ROOT)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                std::fs::read_to_string(p.join("blkio.throttle.write_iops_device"))
                    .is_ok_and(|t| t.contains(&disk.dev.devnum().unwrap()))
            })
            .expect("a cgroup throttles the disk");
        // 50 direct writes from a process in the disk's cgroup take about half a second at
        // 100 IOPS; the same from outside it are not held.
        let dd = |throttled: bool| {
            let mut c = Command::new("dd");
            c.args(["if=/dev/zero", "bs=4k", "count=50", "oflag=direct"])
                .arg(format!("of={dev}"))
                .stderr(Stdio::null());
            if throttled {
                disk.enter_on_spawn(&mut c).unwrap();
            }
            let t = std::time::Instant::now();
            assert!(c.status().unwrap().success());
            t.elapsed().as_secs_f64()
        };
        let (inside, outside) = (dd(true), dd(false));
        assert!(inside >= 0.3, "50 writes at 100 IOPS took {inside:.2} s");
        assert!(outside < inside, "{outside:.2} s unthrottled");
    }
    assert!(loops_on(&backing).is_empty(), "{dev} still attached");
    assert!(!Path::new(&backing).exists(), "{backing} left behind");
    assert!(!cgroup.exists(), "{} left behind", cgroup.display());

    let (upper, lower);
    {
        let disk = Disk::new(
            "labtest",
            DiskSpec::new(64 << 20)
                .queue_depth(31)
                .slow_behind(Throttle::WriteIops(500)),
        )
        .expect("short-queue disk");
        assert_eq!(disk.nr_requests().unwrap(), 31);
        upper = disk.name().to_string();
        lower = std::fs::read_to_string(format!("/sys/block/{upper}/loop/backing_file"))
            .unwrap()
            .trim()
            .to_string();
        assert!(lower.starts_with("/dev/loop"), "stacked on {lower}");
    }
    assert!(
        loops_on(&lower).is_empty(),
        "{upper} still attached to {lower}"
    );
}

#[test]
fn lab_leftovers_of_a_dead_run_are_refused_and_cleaned_but_live_ones_are_not() {
    if !require_root("lab_leftovers_of_a_dead_run_are_refused_and_cleaned_but_live_ones_are_not") {
        return;
    }
    // A pid that no process has any more: a child that has been reaped.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();

    // What a killed run with that pid leaves: a namespace with a process still in it, a
    // loop device on a file in /dev/shm, a cgroup.
    let ns = format!("stn-lefttest-{dead}");
    ip(&["netns", "add", &ns]).unwrap();
    let mut orphan = Command::new("ip")
        .args(["netns", "exec", &ns, "sleep", "60"])
        .spawn()
        .unwrap();
    let file = format!("/dev/shm/stornet-test-lefttest-{dead}.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let out = Command::new("losetup")
        .args(["--show", "-f", &file])
        .output()
        .unwrap();
    let loop_dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(loop_dev.starts_with("/dev/loop"), "{out:?}");
    let cg = Path::new(BLKIO_ROOT).join(format!("stornet-test-lefttest-{dead}"));
    std::fs::create_dir(&cg).unwrap();
    // A node's: its file system mounted on the loop device, a cpu cgroup.
    stornet_lab::fs::mkfs_ext4(Path::new(&loop_dev)).unwrap();
    let mnt = std::env::temp_dir().join(format!("stornet-mnt-lefttest-{dead}"));
    std::fs::create_dir(&mnt).unwrap();
    assert!(
        Command::new("mount")
            .arg(&loop_dev)
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    let cpu_cg = Path::new(CPU_ROOT).join(format!("stornet-test-lefttest-{dead}"));
    std::fs::create_dir(&cpu_cg).unwrap();
    // And what a live run holds: the same kinds of things named with a live pid.
    let live_ns = Netns::new("leftlive").unwrap();
    let live_disk = LoopDevice::new("leftlive", 16 << 20).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));

    let found = leftovers::find();
    let mine = |s: &str| s.contains(&dead.to_string());
    assert!(found.namespaces.contains(&ns), "{found:?}");
    assert!(
        found.processes.iter().any(|p| p.pid == orphan.id()),
        "the process in the namespace: {found:?}"
    );
    assert!(
        found
            .loops
            .iter()
            .any(|l| l.dev == loop_dev && l.backing == file),
        "{found:?}"
    );
    assert!(found.cgroups.contains(&cg), "{found:?}");
    assert!(found.cgroups.contains(&cpu_cg), "{found:?}");
    assert!(found.mounts.contains(&mnt), "{found:?}");
    assert!(found.files.contains(&Path::new(&file).to_path_buf()));
    let live = |s: &str| s.contains(&std::process::id().to_string());
    for d in found.describe() {
        assert!(!live(&d), "a live run's resource listed as leftover: {d}");
    }
    // A new lab refuses to start and says how to clean up.
    let refused = Lab::new("lefttest", &[HostSpec::new("a")]).err().unwrap();
    let text = format!("{refused:#}");
    assert!(
        text.contains(&ns) && text.contains("cargo xtask lab clean"),
        "{text}"
    );

    // Remove what the dead run left (and only that: other runs on this machine may have
    // leftovers of their own, which are not this test's to remove).
    let only_mine = leftovers::Leftovers {
        processes: found
            .processes
            .iter()
            .filter(|p| mine(&p.within))
            .cloned()
            .collect(),
        namespaces: found
            .namespaces
            .iter()
            .filter(|n| mine(n))
            .cloned()
            .collect(),
        mounts: found
            .mounts
            .iter()
            .filter(|m| mine(&m.to_string_lossy()))
            .cloned()
            .collect(),
        loops: found
            .loops
            .iter()
            .filter(|l| mine(&l.backing))
            .cloned()
            .collect(),
        cgroups: found
            .cgroups
            .iter()
            .filter(|c| mine(&c.to_string_lossy()))
            .cloned()
            .collect(),
        files: found
            .files
            .iter()
            .filter(|f| mine(&f.to_string_lossy()))
            .cloned()
            .collect(),
    };
    let (done, failed) = only_mine.remove();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(done.len(), 7, "{done:?}");
    let _ = orphan.wait();
    assert!(!namespaces().contains(&ns));
    assert!(loops_on(&file).is_empty(), "{loop_dev} still attached");
    assert!(!cg.exists() && !cpu_cg.exists() && !Path::new(&file).exists());
    assert!(!mnt.exists(), "{} still there", mnt.display());
    // The live run's things are untouched.
    assert!(namespaces().contains(&live_ns.name));
    assert!(live_disk.stat().is_ok());
    let again = leftovers::find();
    assert!(
        !again.describe().iter().any(|d| mine(d)),
        "{:?}",
        again.describe()
    );
}
