//! The vm tier's systemd boot: a Debian root made by debootstrap, booted in qemu with systemd
//! as PID 1 on the kernel of the same release. In it, systemd-check.sh installs the packages
//! `cargo xtask package` builds with dpkg and runs stornet-agent as the service they install:
//! readiness, probes inside the sandbox, the journal, the exposure score, the watchdog, stop,
//! remove and purge.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::guest;
use super::initramfs::Root;
use super::kernels::{self, Kernel};
use super::qemu::{self, Accel};
use crate::cmd::{self, run};

/// The kernel series whose Debian release the root is: bookworm ships 6.1.
pub const SERIES: &str = "6.1";
const SUITE: &str = "bookworm";
/// Beyond minbase: systemd as init, curl to scrape, bpftool to list programs and links.
const INCLUDE: &str = "systemd-sysv,curl,bpftool";

/// The checks systemd-check.sh reports, in its order.
pub const CHECKS: &[&str] = &[
    "install_without_btf_says_so",
    "install_enables_nothing",
    "start_reports_ready",
    "probes_attached_in_sandbox",
    "journal_is_logfmt",
    "exposure_at_most_2",
    "watchdog_restarts_a_stopped_agent",
    "stop_detaches_everything",
    "remove_keeps_conffiles",
    "purge_leaves_nothing",
    "stornet_package",
    "loadgen_package",
];

const TIMEOUT: Duration = Duration::from_secs(900);

/// The Debian root in the vm cache, made once by debootstrap (`.complete` marks it done).
pub fn debian_root() -> Result<PathBuf> {
    let dir = kernels::cache_dir().join("debian").join(SUITE);
    if dir.join(".complete").exists() {
        println!("debian root: {} (cached)", dir.display());
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mirror = kernels::debian_mirror()?;
    // Its hundreds of progress lines go to a log, shown only when it fails.
    let log = dir.with_extension("log");
    let file = std::fs::File::create(&log)?;
    let made = run(std::process::Command::new("debootstrap")
        .args(["--variant=minbase", &format!("--include={INCLUDE}"), SUITE])
        .arg(&dir)
        .arg(&mirror)
        .stdout(file.try_clone()?)
        .stderr(file));
    if let Err(e) = made {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{e:#} (cargo xtask setup installs debootstrap); the end of {}:\n{}",
            log.display(),
            tail.join("\n")
        );
    }
    // What the guest does not need: downloaded packages, documentation, translations.
    for sub in [
        "var/cache/apt/archives",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/locale",
    ] {
        let p = dir.join(sub);
        if p.exists() {
            std::fs::remove_dir_all(&p)?;
            std::fs::create_dir_all(&p)?;
        }
    }
    std::fs::write(dir.join(".complete"), "")?;
    Ok(dir)
}

/// The root as an initramfs: the Debian root, the packages, the check and its unit.
fn initrd(root: &Path, debs: &[PathBuf], out: &Path) -> Result<()> {
    let mut r = Root::default();
    r.tree(root, "")?;
    for d in debs {
        let name = d.file_name().context("package path")?.to_string_lossy();
        r.host_file(&format!("/root/debs/{name}"), d, 0o644);
    }
    r.bytes(
        "/usr/local/sbin/stornet-vm-check",
        include_str!("systemd-check.sh"),
        0o755,
    );
    r.bytes(
        "/etc/systemd/system/stornet-vm-check.service",
        "[Unit]\nDescription=stornet vm tier checks\nAfter=multi-user.target\n\n\
         [Service]\nType=oneshot\nExecStart=/usr/local/sbin/stornet-vm-check\n\
         StandardOutput=tty\nStandardError=tty\nTTYPath=/dev/ttyS0\n",
        0o644,
    );
    r.symlink(
        "/etc/systemd/system/multi-user.target.wants/stornet-vm-check.service",
        "/etc/systemd/system/stornet-vm-check.service",
    );
    // A fixed machine id: no first-boot setup. No login prompt on the console, and no apt
    // timers (the guest has no network).
    r.bytes(
        "/etc/machine-id",
        "5f0b7a6c1d2e4f3a8b9c0d1e2f3a4b5c\n",
        0o444,
    );
    r.bytes("/etc/hostname", "stornet-vm\n", 0o644);
    for unit in [
        "serial-getty@ttyS0.service",
        "getty@tty1.service",
        "apt-daily.timer",
        "apt-daily-upgrade.timer",
        "e2scrub_all.timer",
    ] {
        r.symlink(&format!("/etc/systemd/system/{unit}"), "/dev/null");
    }
    r.write(out)?;
    Ok(())
}

/// Boots the root on `k` and reads the checks' results.
pub fn boot(k: &Kernel, root: &Path, debs: &[PathBuf], work: &Path, accel: Accel) -> Result<bool> {
    let dir = work.join(format!("{}-systemd", k.series.series));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let initrd_path = dir.join("root.cpio");
    initrd(root, debs, &initrd_path)?;
    let log = dir.join("console.log");
    let start = Instant::now();
    let console = qemu::run(
        &qemu::Guest {
            vmlinuz: &k.vmlinuz,
            initrd: &initrd_path,
            append: "console=ttyS0 rdinit=/sbin/init panic=-1 quiet systemd.show_status=0 \
                     systemd.firstboot=off"
                .into(),
            disks: Vec::new(),
            accel,
            timeout: TIMEOUT,
            first_line_within: None,
            log: log.clone(),
        },
        |line| {
            if let Some(r) = line.strip_prefix("STORNET result ") {
                println!("  {} systemd: {r}", k.series.series);
            }
        },
    )?;
    let _ = std::fs::remove_file(&initrd_path);
    let expected: Vec<String> = CHECKS.iter().map(|c| c.to_string()).collect();
    let outcome = guest::parse(&console.lines, &expected);
    super::Finished {
        kernel: k,
        boot: "systemd",
        timeout_s: TIMEOUT.as_secs(),
        log: &log,
        seconds: start.elapsed().as_secs_f64(),
    }
    .report(&console, &outcome, CHECKS.len());
    Ok(console.done && outcome.missing.is_empty() && outcome.results.iter().all(|r| r.ok))
}

/// The root and the packages, made while the other guests boot.
pub fn prepare() -> std::thread::JoinHandle<Result<(PathBuf, Vec<PathBuf>)>> {
    std::thread::spawn(|| {
        let root = debian_root()?;
        let debs = crate::package::package()?;
        Ok((root, debs))
    })
}

/// Fails when the host cannot make the root.
pub fn host_requirements() -> Result<()> {
    if cmd::output("debootstrap", &["--version"]).is_none() {
        bail!("debootstrap is missing (cargo xtask setup installs it)");
    }
    Ok(())
}
