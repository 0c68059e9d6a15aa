//! `cargo xtask setup`: installs, idempotently, what stornet's build and tests need on a
//! Debian-based machine, skipping whatever is already present.

use std::process::Command;

use anyhow::{Result, bail};

use crate::cmd::{self, output, run};

/// Debian packages: (package, why).
const PACKAGES: &[(&str, &str)] = &[
    ("llvm-22-dev", "bpf-linker links against LLVM 22"),
    ("libpolly-22-dev", "bpf-linker links against LLVM 22"),
    ("zlib1g-dev", "bpf-linker"),
    ("libzstd-dev", "bpf-linker"),
    ("fio", "reference load in benchmarks and tests"),
    ("python3-six", "fio's fio_jsonplus_clat2csv in tests"),
    (
        "fio-examples",
        "fio's example job files, which loadgen's tests parse",
    ),
    ("iperf3", "network benchmarks"),
    ("prometheus", "promtool and the Prometheus server in tests"),
    ("chromium", "renders loadgen's HTML report to PNG in tests"),
    ("bpftrace", "reference tracer in benchmarks"),
    ("strace", "counts loadgen's io_uring submissions in tests"),
    ("iproute2", "ip netns, veth, tc in the lab"),
    ("e2fsprogs", "mkfs.ext4 in tests"),
    ("util-linux", "losetup in tests"),
    ("iputils-ping", "reachability checks in the lab"),
    ("ethtool", "links without offloads in the lab"),
    ("nftables", "random packet loss at a lab host"),
    ("systemd", "systemd-analyze checks the packaged unit"),
    (
        "qemu-system-x86",
        "the vm tier boots Debian's kernels in qemu",
    ),
    (
        "dmsetup",
        "the vm tier's guests: stacked device-mapper devices",
    ),
    ("busybox-static", "the vm tier's guests: shell and tools"),
    (
        "gcc",
        "the vm tier: netdevsim built for the guests' kernels",
    ),
    (
        "make",
        "the vm tier: netdevsim built for the guests' kernels",
    ),
    ("xz-utils", "the vm tier: compressed kernel modules"),
    ("bpftool", "inspecting probes and maps"),
    ("lintian", "checks the Debian packages"),
    ("debootstrap", "the vm tier's Debian guest with systemd"),
    ("ceph-mon", "the lab's Ceph cluster: its monitor"),
    (
        "ceph-mgr",
        "the lab's Ceph cluster: its manager and exporter",
    ),
    ("ceph-osd", "the lab's Ceph cluster: its OSDs"),
    ("ceph-mds", "the lab's Ceph cluster: CephFS"),
    (
        "ceph-fuse",
        "the lab's Ceph cluster: CephFS mounted through FUSE",
    ),
    (
        "ceph-common",
        "the lab's Ceph cluster: the ceph, rados and rbd clients",
    ),
];

const BPF_LINKER_VERSION: &str = "0.13.0";
const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";

fn installed(pkg: &str) -> bool {
    output("dpkg-query", &["-W", "-f=${Status}", pkg])
        .is_some_and(|s| s.trim_end().ends_with("install ok installed"))
}

fn apt_packages() -> Result<()> {
    let packages: Vec<&str> = PACKAGES.iter().map(|(p, _)| *p).collect();
    apt_install(&packages)
}

/// Installs those of `packages` that are missing (root only), or says what to run.
pub fn apt_install(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        println!("apt packages: all {} present, skipping", packages.len());
        return Ok(());
    }
    let hint = format!("apt-get update && apt-get install -y {}", missing.join(" "));
    if !cmd::is_root() {
        bail!(
            "missing packages {}; as root run: {hint}",
            missing.join(", ")
        );
    }
    println!("apt packages missing: {}", missing.join(", "));
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    let install = |pkgs: &[&str]| {
        let mut c = apt(&["install", "-y", "--no-install-recommends"]);
        c.args(pkgs);
        run(&mut c)
    };
    // The package lists of a fresh machine are often stale or empty: refresh, then install.
    run(&mut apt(&["update"])).map_err(|e| anyhow::anyhow!("{e:#}; by hand: {hint}"))?;
    install(&missing).map_err(|e| anyhow::anyhow!("{e:#}; by hand: {hint}"))
}

fn nightly_rust_src() -> Result<()> {
    let Some(toolchains) = output("rustup", &["toolchain", "list"]) else {
        bail!(
            "rustup not found; install it from https://rustup.rs, then: rustup toolchain install nightly --component rust-src"
        );
    };
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        bail!(
            "the nightly toolchain is missing; install it: rustup toolchain install nightly --component rust-src"
        );
    }
    let components = output(
        "rustup",
        &["component", "list", "--toolchain", "nightly", "--installed"],
    )
    .unwrap_or_default();
    if components.lines().any(|l| l.starts_with("rust-src")) {
        println!("nightly rust-src: present, skipping");
        return Ok(());
    }
    run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
        .map_err(|e| {
            anyhow::anyhow!("{e:#}; by hand: rustup component add rust-src --toolchain nightly")
        })
}

fn bpf_linker() -> Result<()> {
    if let Some(v) = output("bpf-linker", &["--version"]) {
        println!("bpf-linker: {} present, skipping", v.trim());
        return Ok(());
    }
    let hint = format!(
        "PATH={LLVM_BIN}:$PATH cargo install bpf-linker --version {BPF_LINKER_VERSION} --no-default-features --features llvm-22"
    );
    let path = format!("{LLVM_BIN}:{}", std::env::var("PATH").unwrap_or_default());
    // Build outside the workspace so its config and lock file do not apply.
    run(Command::new("cargo")
        .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
        .args(["--no-default-features", "--features", "llvm-22"])
        .env("PATH", path)
        .current_dir(std::env::temp_dir()))
    .map_err(|e| anyhow::anyhow!("{e:#}; by hand: {hint}"))?;
    if output("bpf-linker", &["--version"]).is_none() {
        bail!("bpf-linker installed but not on PATH; add ~/.cargo/bin to PATH");
    }
    Ok(())
}

/// cargo-fuzz runs the fuzz targets in `fuzz/` (`cargo xtask fuzz` and the unit tier).
pub const CARGO_FUZZ: (&str, &str) = ("cargo-fuzz", "0.13.2");
/// cargo-deb builds the Debian packages. `cargo xtask package` (and so the vm tier, beside
/// its other guests) installs it when it first needs it, rather than every setup.
pub const CARGO_DEB: (&str, &str) = ("cargo-deb", "3.8.0");

/// Installs a cargo subcommand at a fixed version unless some version of it is present.
pub fn cargo_tool((name, version): (&str, &str)) -> Result<()> {
    if let Some(v) = output(name, &["--version"]) {
        println!("{name}: {} present, skipping", v.trim());
        return Ok(());
    }
    let hint = format!("cargo install {name} --version {version} --locked");
    run(Command::new("cargo")
        .args(["install", name, "--version", version, "--locked"])
        .current_dir(std::env::temp_dir()))
    .map_err(|e| anyhow::anyhow!("{e:#}; by hand: {hint}"))?;
    if output(name, &["--version"]).is_none() {
        bail!("{name} installed but not on PATH; add ~/.cargo/bin to PATH");
    }
    Ok(())
}

/// Mounts tracefs where the kernel has it and nothing is mounted (tracepoints by name need it).
fn tracefs() -> Result<()> {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"));
    if mounted {
        println!("tracefs: mounted, skipping");
        return Ok(());
    }
    if !cmd::is_root() {
        println!("tracefs: not mounted and not root; skipping (tests that need it will say so)");
        return Ok(());
    }
    run(Command::new("mount").args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"]))
}

/// Mounts securityfs (the kernel's lockdown mode is read from it) where nothing is mounted.
fn securityfs() -> Result<()> {
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("securityfs"));
    if mounted {
        println!("securityfs: mounted, skipping");
        return Ok(());
    }
    if !cmd::is_root() {
        println!("securityfs: not mounted and not root; skipping");
        return Ok(());
    }
    run(Command::new("mount").args(["-t", "securityfs", "none", "/sys/kernel/security"]))
}

/// Fetches every crate the lock files name, for every platform: the lint step reads the
/// dependency graph with `cargo metadata --offline`, which needs them all, where a build
/// fetches only this platform's. Quick and silent when they are cached.
fn crates() -> Result<()> {
    let root = cmd::workspace_root();
    for manifest in [root.join("Cargo.toml"), root.join("fuzz/Cargo.toml")] {
        run(Command::new("cargo")
            .args(["fetch", "--locked", "--manifest-path"])
            .arg(&manifest))?;
    }
    Ok(())
}

pub fn setup() -> Result<()> {
    cmd::step("setup: apt packages", apt_packages)?;
    cmd::step("setup: crates", crates)?;
    cmd::step("setup: nightly rust-src", nightly_rust_src)?;
    cmd::step("setup: bpf-linker", bpf_linker)?;
    cmd::step("setup: cargo-fuzz", || cargo_tool(CARGO_FUZZ))?;
    cmd::step("setup: tracefs", tracefs)?;
    cmd::step("setup: securityfs", securityfs)?;
    Ok(())
}
