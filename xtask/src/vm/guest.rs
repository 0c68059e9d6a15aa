//! What runs in a guest: its disks and drivers, the kernel modules and command line, the
//! `/init` script, and the tests; and what its console says happened.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::initramfs::Root;
use super::kernels::Kernel;
use super::modules::ModuleTree;
use super::qemu::{self, Disk};

/// One boot of a kernel.
#[derive(Clone, Copy, Debug)]
pub struct Boot {
    pub name: &'static str,
    /// Boot with `lockdown=confidentiality`.
    pub lockdown: bool,
    /// Load inet_diag and tcp_diag (sock_diag for TCP).
    pub sock_diag: bool,
    /// Every driver and the network and service tests, or only NVMe and the probes.
    pub full: bool,
    /// How long the guest may take before it is killed and its boot failed: a budget for a
    /// hang, about twice what a boot takes under TCG while the host runs the other tiers
    /// (drivers: 260-400 s).
    pub timeout_s: u64,
}

pub const BOOTS: &[Boot] = &[
    Boot {
        name: "drivers",
        lockdown: false,
        sock_diag: true,
        full: true,
        timeout_s: 900,
    },
    Boot {
        name: "lockdown",
        lockdown: true,
        sock_diag: false,
        full: false,
        timeout_s: 300,
    },
];

/// A block driver of the guests: how qemu or a module makes its disk, the disk's name, and
/// the driver tags per hardware queue that setup gives it (what the tests check against).
#[derive(Clone, Copy, Debug)]
pub struct Driver {
    pub name: &'static str,
    pub disk: &'static str,
    pub tags: u64,
    /// Hardware queues that take submissions: one per vCPU where the device has enough.
    pub queues: u64,
    /// Modules it needs (dependencies are found by the module tree).
    pub modules: &'static [&'static str],
}

/// `nvme.io_queue_depth=64` on the command line: 63 tags per queue (one slot stays free).
/// virtio-blk: queues of 64 descriptors (indirect descriptors: one per request). null_blk:
/// `hw_queue_depth=31` on one submission queue, 20 ms per request (the 31-deep controller;
/// newer kernels add a queue for polled IO, which these tests do not use). AHCI: 32 NCQ
/// commands.
pub const DRIVERS: &[Driver] = &[
    Driver {
        name: "nvme",
        disk: "nvme0n1",
        tags: 63,
        queues: 2,
        modules: &["nvme"],
    },
    Driver {
        name: "virtio_blk",
        disk: "vda",
        tags: 64,
        queues: 2,
        modules: &["virtio_pci", "virtio_blk"],
    },
    Driver {
        name: "ahci",
        disk: "sda",
        tags: 32,
        queues: 1,
        modules: &["ahci", "sd_mod"],
    },
    Driver {
        name: "null_blk",
        disk: "nullb0",
        tags: 31,
        queues: 1,
        modules: &["null_blk"],
    },
];

/// 20 ms per request: slow enough that 64 threads keep all 31 tags busy even on an emulated
/// CPU, where waking a thread that waits for a tag takes a while.
const NULL_BLK_PARAMS: &str =
    "nr_devices=1 submit_queues=1 hw_queue_depth=31 irqmode=2 completion_nsec=20000000";
const NVME_DEPTH: &str = "nvme.io_queue_depth=64";

/// Device-mapper (dm-linear is in dm_mod) with its delay, crypt and multipath targets
/// (round-robin path selection), and md with RAID0: the stacked devices.
const STACKED: &[&str] = &[
    "dm_mod",
    "dm_delay",
    "dm_crypt",
    "dm_multipath",
    "dm_round_robin",
    "md_mod",
    "raid0",
];

/// The modules of an NVMe/TCP target and of its initiator.
const NVME_TCP: &[&str] = &["nvmet", "nvmet_tcp", "nvme_tcp"];

/// The network block device driver, whose server the tests run themselves.
const NBD: &str = "nbd";

/// Host programs the tests run in the guest: (name, why).
const TOOLS: &[(&str, &str)] = &[
    ("ip", "namespaces and veth pairs"),
    ("tc", "the shaped link"),
    ("ss", "srtt against the agent"),
    ("losetup", "loop devices"),
    ("mkfs.ext4", "the flush test's file system"),
    ("setpriv", "the agent without privileges"),
    ("dd", "writes from a cgroup of their own"),
    ("dmsetup", "stacked device-mapper devices"),
    ("ethtool", "pause statistics against the agent's"),
];

/// Privileged tests that run in every full boot (module path and name). Left out: tests of
/// the lab's physics rather than of the probes (a shallow buffer makes TCP retransmit, a
/// deep one does not, an MTU mismatch stalls TCP), whose timing an emulated guest does not
/// keep; the kernels tests count retransmits and drops through a lossy link instead.
const PRIVILEGED_FULL: &[&str] = &[
    "block_counts::block_writes_match_sysfs",
    "block_counts::block_reads_match_sysfs",
    "block_depth::block_depth_and_service_time_with_kernel_stamps",
    "block_depth::block_depth_and_service_time_with_probe_stamps",
    "block_errors::block_write_errors_are_counted_by_status",
    "block_flush::block_fsync_is_counted_as_flush",
    "block_probes::block_completion_probe_works_alone",
    "block_cgroups::block_io_of_two_cgroups_counts_for_each_and_adds_up_to_sysfs",
    "net_sockets::srtt_matches_ss",
    "service_lifecycle::service_sigterm_exits_0_within_2s_and_detaches_everything",
    "service_lifecycle::service_sigkill_leaves_no_programs",
    "service_lifecycle::service_degraded_without_bpf_permission_keeps_serving",
];

/// Under lockdown every probe is covered by the kernels tests.
const PRIVILEGED_LOCKDOWN: &[&str] = &[];

const KERNELS_PROBES: &[&str] = &[
    "probes::every_probe_is_up",
    "probes::check_is_clean",
    "probes::kernel_info_names_release_and_lockdown",
    "net::lossy_link_counts_match_the_kernel",
];

/// The standard pause statistics against `ethtool`, on netdevsim where the vm tier could
/// build it for the kernel (see [`super::netdevsim`]).
const PAUSE_TEST: &str = "pause::netdevsim_pause_frames_match_ethtool";

/// The host binaries a guest runs.
pub struct Binaries {
    pub agent: PathBuf,
    /// loadgen, for the runs whose verdict a test checks.
    pub loadgen: PathBuf,
    /// stornet, which judges those runs.
    pub stornet: PathBuf,
    /// Test binaries by target name (`privileged`, `kernels`).
    pub tests: Vec<(String, PathBuf)>,
}

/// Everything one boot needs.
pub struct Plan {
    pub initrd: PathBuf,
    pub append: String,
    pub disks: Vec<(Disk, PathBuf)>,
    /// Drivers whose disk this guest has.
    pub drivers: Vec<&'static str>,
    /// (test binary, test names), in the order they run.
    pub tests: Vec<(String, Vec<String>)>,
}

impl Plan {
    pub fn expected(&self) -> Vec<String> {
        self.tests
            .iter()
            .flat_map(|(_, names)| names.iter().cloned())
            .collect()
    }
}

fn host_tool(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("`{name}` is not installed (cargo xtask setup installs it)"))
}

/// What a boot's kernel offers beyond the drivers: NVMe over TCP, nbd, dm and md stacks,
/// netdevsim.
struct Extras {
    fabrics: bool,
    nbd: bool,
    stacked: bool,
    /// netdevsim is in the tree, for the pause-frame test.
    pause: bool,
}

/// Builds the guest of one boot: its initramfs in `work`, its disks, its command line.
/// `only`: run just the tests whose names contain one of these (all when empty).
pub fn plan(
    kernel: &Kernel,
    boot: &Boot,
    bins: &Binaries,
    work: &Path,
    only: &[String],
    netdevsim: Option<&Path>,
) -> Result<Plan> {
    let mut tree = ModuleTree::open(&kernel.modules)?;
    let drivers: Vec<&Driver> = DRIVERS
        .iter()
        .filter(|d| boot.full || d.name == "nvme")
        .filter(|d| d.modules.iter().all(|m| tree.has(m)))
        .collect();
    // netdevsim only where its test runs.
    let selected = |test: &str| only.is_empty() || only.iter().any(|o| test.contains(o.as_str()));
    let pause = match netdevsim {
        Some(ko) if boot.full && selected(PAUSE_TEST) => {
            tree.add("netdevsim", ko);
            true
        }
        _ => false,
    };
    // NVMe over TCP (target and initiator), nbd, and dm and md stacks over loop devices and
    // null_blk, in every full boot of a kernel that has them.
    let extras = Extras {
        pause,
        fabrics: boot.full && NVME_TCP.iter().all(|m| tree.has(m)),
        nbd: boot.full && tree.has(NBD),
        stacked: boot.full
            && STACKED.iter().all(|m| tree.has(m))
            && drivers.iter().any(|d| d.name == "null_blk"),
    };
    let mut root = base_root(bins)?;
    add_modules(&mut root, &tree, boot, &drivers, &extras)?;
    let tests = tests(boot, &drivers, &extras, only);
    let spec: Vec<String> = drivers
        .iter()
        .map(|d| format!("{}:{}:{}:{}", d.name, d.disk, d.tags, d.queues))
        .collect();
    let lockdown = if boot.lockdown {
        "confidentiality"
    } else {
        "none"
    };
    root.bytes(
        "/etc/stornet/env",
        format!(
            "export PATH=/stornet/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp CI=true \
             RUST_BACKTRACE=1 STORNET_BIN_DIR=/stornet/bin STORNET_GUEST_DISKS={} \
             STORNET_GUEST_LOCKDOWN={lockdown}\n",
            spec.join(",")
        ),
        0o644,
    );
    root.bytes("/init", init_script(&drivers, &tests), 0o755);
    let initrd = work.join(format!("{}-{}.cpio", kernel.series.series, boot.name));
    root.write(&initrd)?;
    let mut append = format!("console=ttyS0 quiet loglevel=1 panic=-1 oops=panic {NVME_DEPTH}");
    if boot.lockdown {
        append.push_str(" lockdown=confidentiality");
    }
    Ok(Plan {
        initrd,
        append,
        disks: disks(&drivers, work)?,
        drivers: drivers.iter().map(|d| d.name).collect(),
        tests,
    })
}

/// The guest's file tree without its kernel modules: directories, busybox and the host
/// tools, stornet's binaries and the test binaries.
fn base_root(bins: &Binaries) -> Result<Root> {
    let mut root = Root::default();
    for dir in [
        "/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/var/tmp", "/etc",
    ] {
        root.dir(dir);
    }
    root.program("/bin/busybox", &host_tool("busybox")?)?;
    for (tool, _) in TOOLS {
        root.program(&format!("/usr/sbin/{tool}"), &host_tool(tool)?)?;
    }
    for applet in BUSYBOX_APPLETS {
        root.symlink(&format!("/bin/{applet}"), "busybox");
    }
    root.program("/stornet/bin/stornet-agent", &bins.agent)?;
    root.program("/stornet/bin/loadgen", &bins.loadgen)?;
    root.program("/stornet/bin/stornet", &bins.stornet)?;
    for (name, path) in &bins.tests {
        root.program(&format!("/stornet/tests/{name}"), path)?;
    }
    // The tests look users up by id only; ip netns wants /etc/netns-less defaults.
    root.bytes("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644);
    Ok(root)
}

/// The kernel modules the boot loads, in load order, and the list the init script reads.
fn add_modules(
    root: &mut Root,
    tree: &ModuleTree,
    boot: &Boot,
    drivers: &[&Driver],
    extras: &Extras,
) -> Result<()> {
    let mut modules: Vec<&str> = vec!["loop", "veth", "sch_tbf", "sch_netem", "bridge"];
    if boot.sock_diag {
        modules.extend(["inet_diag", "tcp_diag"]);
    }
    if extras.fabrics {
        modules.extend(NVME_TCP);
    }
    if extras.nbd {
        modules.push(NBD);
    }
    if extras.pause {
        modules.push("netdevsim");
    }
    if extras.stacked {
        modules.extend(STACKED);
    }
    for d in drivers {
        modules.extend(d.modules);
    }
    let mut list = String::new();
    for (name, bytes) in tree.load_order(&modules)? {
        let params = match name.as_str() {
            "null_blk" => NULL_BLK_PARAMS,
            // Two devices, not sixteen idle ones.
            NBD => "nbds_max=2",
            _ => "",
        };
        list.push_str(&format!("{name} {params}\n"));
        root.bytes(&format!("/lib/modules/stornet/{name}.ko"), bytes, 0o644);
    }
    root.bytes("/etc/stornet/modules", list, 0o644);
    Ok(())
}

/// (test binary, test names) the boot runs, in order: the `kernels` tests its drivers and
/// extras allow, then the `privileged` ones; `only` keeps those whose names contain one of
/// its words (all when empty).
fn tests(
    boot: &Boot,
    drivers: &[&Driver],
    extras: &Extras,
    only: &[String],
) -> Vec<(String, Vec<String>)> {
    let mut kernels: Vec<String> = KERNELS_PROBES.iter().map(|s| s.to_string()).collect();
    for d in drivers {
        kernels.push(format!("drivers::{}::counts_match_sysfs", d.name));
        if boot.full {
            kernels.push(format!("drivers::{}::inflight_within_tags", d.name));
        }
    }
    if extras.fabrics {
        kernels.push("fabrics::nvme_tcp_device_names_its_target_and_its_retransmits".into());
        kernels.push(
            "dispatch::dispatch_probe_attaches_for_passthrough_and_detaches_with_the_device".into(),
        );
        kernels.push(
            "fabrics::nvme_tcp_through_a_shallow_buffer_is_congestion_toward_its_target".into(),
        );
    }
    if extras.nbd {
        kernels.push("nbd::nbd_device_names_its_server_and_its_retransmits".into());
    }
    if extras.pause {
        kernels.push(PAUSE_TEST.into());
    }
    if extras.stacked {
        kernels.push("stacked::dm_layers_are_counted_each_for_its_own_device".into());
        kernels.push("stacked::md_raid0_is_counted_for_itself_and_for_each_member".into());
        kernels.push("stacked::dm_multipath_is_counted_for_itself_and_for_each_path".into());
    }
    if !boot.sock_diag {
        kernels.push("snapshots::without_sock_diag_only_that_snapshot_is_lost".into());
    }
    let privileged = if boot.full {
        PRIVILEGED_FULL
    } else {
        PRIVILEGED_LOCKDOWN
    };
    let mut tests = vec![
        ("kernels".to_string(), kernels),
        (
            "privileged".to_string(),
            privileged.iter().map(|s| s.to_string()).collect(),
        ),
    ];
    for (_, names) in &mut tests {
        names.retain(|n| only.is_empty() || only.iter().any(|o| n.contains(o.as_str())));
    }
    // (A test binary given no names would run all of its tests.)
    tests.retain(|(_, names)| !names.is_empty());
    tests
}

/// An emulated disk and its 256 MiB image in `work` for each driver qemu provides a device
/// for (the others, null_blk for one, make their own).
fn disks(drivers: &[&Driver], work: &Path) -> Result<Vec<(Disk, PathBuf)>> {
    let mut disks = Vec::new();
    for d in drivers {
        let disk = match d.name {
            "nvme" => Disk::Nvme,
            "virtio_blk" => Disk::VirtioBlk {
                queues: 2,
                queue_size: d.tags as u32,
            },
            "ahci" => Disk::Ahci,
            _ => continue,
        };
        let image = work.join(format!("{}.img", d.name));
        let f = std::fs::File::create(&image)?;
        f.set_len(256 << 20)?;
        disks.push((disk, image));
    }
    Ok(disks)
}

/// busybox applets the init script and the tests use (real tools from [`TOOLS`] win).
const BUSYBOX_APPLETS: &[&str] = &[
    "sh", "mount", "umount", "mkdir", "cat", "echo", "sleep", "poweroff", "insmod", "dmesg", "sed",
    "ls", "dd", "sync", "uname", "true", "rm", "ln", "grep", "kill", "killall", "ps", "chmod",
];

fn init_script(drivers: &[&Driver], tests: &[(String, Vec<String>)]) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         # stornet vm tier: mount, load modules, report the kernel, run the tests, power off.\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev\n\
         . /etc/stornet/env\n\
         dmesg -n 1\n\
         mkdir -p /dev/shm /sys/fs/bpf /run/netns\n\
         mount -t tmpfs -o mode=1777 shm /dev/shm\n\
         mount -t tmpfs tmp /tmp\n\
         mount -t tmpfs run /run\n\
         mount -t tracefs nodev /sys/kernel/tracing\n\
         mount -t debugfs nodev /sys/kernel/debug\n\
         mount -t securityfs none /sys/kernel/security\n\
         mount -t bpf bpf /sys/fs/bpf\n\
         mount -t tmpfs cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/unified\n\
         mount -t cgroup2 none /sys/fs/cgroup/unified\n\
         ip link set lo up\n\
         echo \"STORNET boot $(uname -r)\"\n\
         while read -r name params; do\n\
         \x20 insmod /lib/modules/stornet/$name.ko $params || echo \"STORNET module-failed $name\"\n\
         done < /etc/stornet/modules\n\
         echo \"STORNET lockdown $(cat /sys/kernel/security/lockdown)\"\n",
    );
    for d in drivers {
        s.push_str(&format!(
            "echo \"STORNET disk {n} nr_requests=$(cat /sys/block/{n}/queue/nr_requests) \
             queue_depth=$(cat /sys/block/{n}/device/queue_depth 2>/dev/null) \
             hw_queues=$(ls /sys/block/{n}/mq | wc -l) write_cache=$(cat /sys/block/{n}/queue/write_cache)\"\n",
            n = d.disk
        ));
    }
    s.push_str(
        "stornet-agent check > /tmp/check.txt 2> /tmp/check.log\n\
         echo \"STORNET check-exit $?\"\n\
         sed 's/^/STORNET check /' /tmp/check.txt\n",
    );
    for (binary, names) in tests {
        s.push_str(&format!(
            "/stornet/tests/{binary} --test-threads=1 --exact --show-output --logfile /tmp/{binary}.results {}\n\
             echo \"STORNET exit {binary} $?\"\n\
             sed 's/^/STORNET result /' /tmp/{binary}.results\n\
             killall -9 stornet-agent 2> /dev/null; sleep 1\n",
            names.join(" ")
        ));
    }
    s.push_str(&format!("echo \"{}\"\npoweroff -f\n", qemu::DONE));
    s
}

/// A test's outcome as the guest's libtest logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResult {
    pub name: String,
    pub ok: bool,
}

/// What one boot's console says.
pub struct Outcome {
    pub release: Option<String>,
    pub lockdown: Option<String>,
    /// `stornet-agent check`'s table rows and exit code.
    pub check: Vec<String>,
    pub check_exit: Option<i32>,
    pub results: Vec<TestResult>,
    /// Tests that should have run and have no result (the guest died, hung, or the binary
    /// crashed).
    pub missing: Vec<String>,
    pub modules_failed: Vec<String>,
    pub disks: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.missing.is_empty()
            && self.modules_failed.is_empty()
            && self.check_exit == Some(0)
            && self.results.iter().all(|r| r.ok)
    }

    /// A check row by its first column.
    pub fn check_row(&self, check: &str) -> Option<(String, String)> {
        self.check.iter().find_map(|l| {
            let rest = l.strip_prefix(check)?;
            if !rest.starts_with(' ') {
                return None;
            }
            let rest = rest.trim_start();
            let (status, detail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            Some((status.to_string(), detail.trim().to_string()))
        })
    }
}

/// Reads the `STORNET …` lines of a console.
pub fn parse(lines: &[String], expected: &[String]) -> Outcome {
    let mut o = Outcome {
        release: None,
        lockdown: None,
        check: Vec::new(),
        check_exit: None,
        results: Vec::new(),
        missing: Vec::new(),
        modules_failed: Vec::new(),
        disks: Vec::new(),
    };
    for l in lines {
        let Some(rest) = l.trim_end().strip_prefix("STORNET ") else {
            continue;
        };
        let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
        match key {
            "boot" => o.release = Some(value.to_string()),
            "lockdown" => {
                o.lockdown = value
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
                    .map(str::to_string)
            }
            "check" => o.check.push(value.to_string()),
            "check-exit" => o.check_exit = value.trim().parse().ok(),
            "module-failed" => o.modules_failed.push(value.to_string()),
            "disk" => o.disks.push(value.to_string()),
            "result" => {
                if let Some((status, name)) = value.split_once(' ') {
                    o.results.push(TestResult {
                        name: name.trim().to_string(),
                        ok: status == "ok",
                    });
                }
            }
            _ => {}
        }
    }
    o.missing = expected
        .iter()
        .filter(|e| !o.results.iter().any(|r| &r.name == *e))
        .cloned()
        .collect();
    o
}

/// The console lines libtest printed for failed test `name` (its captured output).
pub fn failure_output(lines: &[String], name: &str) -> String {
    let head = format!("---- {name} stdout ----");
    let Some(start) = lines.iter().position(|l| l.trim_end() == head) else {
        return String::new();
    };
    lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("---- ") && l.trim_end() != "failures:")
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The test that was running when a guest stopped answering: the last `test X ... ` line
/// without a result.
pub fn running_when_stopped(lines: &[String]) -> Option<String> {
    let last = lines.iter().rev().find(|l| l.starts_with("test "))?;
    let name = last.strip_prefix("test ")?.split(" ... ").next()?;
    let finished = last.trim_end().ends_with(" ok")
        || last.contains(" ... FAILED")
        || last.contains(" ... ignored");
    (!finished).then(|| name.to_string())
}

/// Fails when the host lacks something every guest needs, naming it.
pub fn host_requirements() -> Result<()> {
    let mut missing = Vec::new();
    for tool in [
        "qemu-system-x86_64",
        "busybox",
        "xz",
        "dpkg-deb",
        "apt-get",
        "ldd",
    ]
    .into_iter()
    .chain(TOOLS.iter().map(|(t, _)| *t))
    {
        if host_tool(tool).is_err() {
            missing.push(tool);
        }
    }
    if !missing.is_empty() {
        bail!(
            "the vm tier needs {} (cargo xtask setup installs them)",
            missing.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn console_is_read_into_an_outcome() {
        let console = lines(
            "noise\nSTORNET boot 6.1.0-57-cloud-amd64\nSTORNET lockdown none integrity [confidentiality]\n\
             STORNET check-exit 0\nSTORNET check probe skb_drop               ok      attached (x)\n\
             STORNET check block layout                   ok      QUEUE_FLAG_STATS bit 20\n\
             test a ... ok\nSTORNET result ok a\nSTORNET result failed b\n",
        );
        let o = parse(&console, &["a".into(), "b".into(), "c".into()]);
        assert_eq!(o.release.as_deref(), Some("6.1.0-57-cloud-amd64"));
        assert_eq!(o.lockdown.as_deref(), Some("confidentiality"));
        assert_eq!(o.check_exit, Some(0));
        assert_eq!(
            o.check_row("probe skb_drop"),
            Some(("ok".into(), "attached (x)".into()))
        );
        assert_eq!(
            o.check_row("block layout").unwrap().1,
            "QUEUE_FLAG_STATS bit 20"
        );
        assert_eq!(o.missing, ["c"]);
        assert!(!o.passed());
        assert_eq!(o.results.len(), 2);
    }

    #[test]
    fn failures_and_hangs_are_named() {
        let console = lines(
            "---- drivers::nvme::counts_match_sysfs stdout ----\nthread panicked: 3 != 4\n\n\
             ---- other stdout ----\nx\nfailures:\n",
        );
        assert_eq!(
            failure_output(&console, "drivers::nvme::counts_match_sysfs"),
            "thread panicked: 3 != 4\n"
        );
        let hung = lines("test a ... ok\ntest drivers::ahci::inflight_within_tags ... ");
        assert_eq!(
            running_when_stopped(&hung).as_deref(),
            Some("drivers::ahci::inflight_within_tags")
        );
        assert_eq!(running_when_stopped(&lines("test a ... ok")), None);
    }
}
