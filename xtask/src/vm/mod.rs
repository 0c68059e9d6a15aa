//! The `vm` test tier: the agent on the kernels storage hosts run. For each kernel of the
//! matrix (Debian's 5.10, 6.1, 6.12 and the newest backport), qemu boots the kernel with an
//! initramfs that carries the agent, the probe tests and the tools they use, on real block
//! drivers (NVMe, virtio-blk, AHCI, null_blk); the guest reports each test through its
//! console. Every kernel is booted twice: with every driver, and under
//! `lockdown=confidentiality` without the sock_diag module. Debian 12's kernel is booted a
//! third time, as a whole Debian system with systemd, to install and run the packages.

pub mod guest;
pub mod initramfs;
pub mod kernels;
pub mod modules;
pub mod netdevsim;
pub mod qemu;
pub mod support;
pub mod systemd;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd;
use guest::{BOOTS, Binaries, Boot, Outcome};
use kernels::Kernel;
use qemu::Accel;

/// Which part of the matrix to run (all of it by default).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Kernel series to boot (`5.10`, …); all when empty.
    pub kernels: Vec<String>,
    /// Boots (`drivers`, `lockdown`); all when empty.
    pub boots: Vec<String>,
    /// Only the tests whose names contain one of these; all when empty.
    pub tests: Vec<String>,
    /// Write the kernel support table into docs/agent.md instead of checking it.
    pub bless: bool,
}

/// How long a tier guest may stay silent after qemu starts: its `/init` prints `STORNET
/// boot` within seconds (a whole lockdown boot takes 14-17 s under TCG). A guest silent for
/// longer hung in its kernel before `/init` (seen on 7.3 under TCG), and is booted again.
const FIRST_LINE: Duration = Duration::from_secs(90);

/// One boot's result.
pub struct Run {
    pub kernel: Kernel,
    pub boot: Boot,
    pub drivers: Vec<&'static str>,
    pub outcome: Outcome,
    pub seconds: f64,
}

pub fn run(opts: &Options) -> Result<()> {
    if let Err(e) = guest::host_requirements() {
        if std::env::var_os("CI").is_some() {
            return Err(e.context("the vm tier cannot run, and CI is set"));
        }
        println!("SKIPPED the vm tier: {e:#} (with CI set this fails)");
        return Ok(());
    }
    let started = Instant::now();
    let bins = cmd::step("vm: build the agent and the test binaries", build)?;
    let kernels: Vec<Kernel> = cmd::step("vm: kernels", kernels::fetch_all)?
        .into_iter()
        .filter(|k| opts.kernels.is_empty() || opts.kernels.iter().any(|s| s == k.series.series))
        .collect();
    if kernels.is_empty() {
        bail!("no kernel of the matrix matches {:?}", opts.kernels);
    }
    let systemd_kernel = kernels
        .iter()
        .find(|k| k.series.series == systemd::SERIES)
        .filter(|_| opts.boots.is_empty() || opts.boots.iter().any(|b| b == "systemd"))
        .cloned();
    if systemd_kernel.is_some() {
        systemd::host_requirements()?;
    }
    // The Debian root and the packages are made while the other guests boot.
    let prepared = systemd_kernel.as_ref().map(|_| systemd::prepare());
    let boots: Vec<&Boot> = BOOTS
        .iter()
        .filter(|b| opts.boots.is_empty() || opts.boots.iter().any(|n| n == b.name))
        .collect();
    // netdevsim for the pause-frame test of the full boots, built where this machine can.
    let netdevsim: Vec<Option<PathBuf>> = if boots.iter().any(|b| b.full) {
        let mut apt = None;
        cmd::step("vm: netdevsim", || {
            kernels
                .iter()
                .map(|k| netdevsim::module(k, &mut apt))
                .collect()
        })?
    } else {
        vec![None; kernels.len()]
    };
    let work = cmd::workspace_root().join("target/vm");
    std::fs::create_dir_all(&work)?;
    let accel = choose_accel(&kernels[0], &work)?;
    println!("vm: guests run under {}", accel.name());
    let mut runs = Vec::new();
    for (k, nsim) in kernels.iter().zip(&netdevsim) {
        for b in &boots {
            let name = format!("vm: {} ({}) {}", k.series.series, k.release, b.name);
            let nsim = nsim.as_deref();
            let mut r = cmd::step(&name, || boot(k, b, &bins, &work, accel, &opts.tests, nsim))?;
            // A guest whose kernel died or hung before /init said anything ran none of
            // stornet: under TCG a boot now and then oopses while the kernel patches its own
            // code (int3 in sched_clock_cpu, seen on 7.3), or prints nothing at all
            // ([`FIRST_LINE`]). Such a boot is tried once more; a second one, or any failure
            // after /init started, fails the tier.
            if r.outcome.release.is_none() && !r.outcome.passed() {
                println!("vm: the guest's kernel stopped before /init ran; booting it once more");
                r = cmd::step(&name, || boot(k, b, &bins, &work, accel, &opts.tests, nsim))?;
            }
            runs.push(r);
        }
    }
    println!("{}", support::summary(&runs));
    let mut failed: Vec<String> = runs
        .iter()
        .filter(|r| !r.outcome.passed())
        .map(|r| format!("{} {}", r.kernel.series.series, r.boot.name))
        .collect();
    let mut boots_run = runs.len();
    if let (Some(k), Some(prepared)) = (&systemd_kernel, prepared) {
        let (root, debs) = prepared
            .join()
            .map_err(|_| anyhow::anyhow!("preparing the systemd guest panicked"))?
            .context("preparing the systemd guest")?;
        let name = format!("vm: {} ({}) systemd", k.series.series, k.release);
        boots_run += 1;
        if !cmd::step(&name, || systemd::boot(k, &root, &debs, &work, accel))? {
            failed.push(format!("{} systemd", k.series.series));
        }
    }
    println!(
        "vm tier: {} boots under {} in {:.0} s",
        boots_run,
        accel.name(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("vm tier failed on: {}", failed.join(", "));
    }
    // The support table is checked on the whole matrix only.
    if opts.kernels.is_empty() && opts.boots.is_empty() && opts.tests.is_empty() {
        support::check_docs(&runs, opts.bless)?;
    }
    Ok(())
}

/// Boots one guest and reports its tests.
fn boot(
    k: &Kernel,
    b: &Boot,
    bins: &Binaries,
    work: &std::path::Path,
    accel: Accel,
    only: &[String],
    netdevsim: Option<&std::path::Path>,
) -> Result<Run> {
    let dir = work.join(format!("{}-{}", k.series.series, b.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let plan = guest::plan(k, b, bins, &dir, only, netdevsim)?;
    let expected = plan.expected();
    let log = dir.join("console.log");
    let start = Instant::now();
    let console = qemu::run(
        &qemu::Guest {
            vmlinuz: &k.vmlinuz,
            initrd: &plan.initrd,
            append: plan.append.clone(),
            disks: plan.disks.clone(),
            accel,
            timeout: Duration::from_secs(b.timeout_s),
            first_line_within: Some(FIRST_LINE),
            log: log.clone(),
        },
        |line| {
            if let Some(r) = line.strip_prefix("STORNET result ") {
                println!("  {} {}: {r}", k.series.series, b.name);
            }
        },
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let outcome = guest::parse(&console.lines, &expected);
    if !outcome.modules_failed.is_empty() {
        println!(
            "FAILED: modules that did not load: {:?}",
            outcome.modules_failed
        );
    }
    if outcome.check_exit != Some(0) {
        println!(
            "FAILED: stornet-agent check exited {:?}:\n{}",
            outcome.check_exit,
            outcome.check.join("\n")
        );
    }
    Finished {
        kernel: k,
        boot: b.name,
        timeout_s: b.timeout_s,
        log: &log,
        seconds,
    }
    .report(&console, &outcome, expected.len());
    Ok(Run {
        kernel: k.clone(),
        boot: *b,
        drivers: plan.drivers,
        outcome,
        seconds,
    })
}

/// A boot that has ended, for its report.
pub struct Finished<'a> {
    pub kernel: &'a Kernel,
    pub boot: &'a str,
    pub timeout_s: u64,
    pub log: &'a std::path::Path,
    pub seconds: f64,
}

impl Finished<'_> {
    /// Prints each failed test with its output, a guest that stopped early with the end of
    /// its console, tests without a result, and a summary line.
    pub fn report(&self, console: &qemu::Console, outcome: &Outcome, expected: usize) {
        let (k, boot) = (self.kernel, self.boot);
        for r in outcome.results.iter().filter(|r| !r.ok) {
            println!(
                "FAILED on {} ({}), {boot} boot: {}\n{}",
                k.series.series,
                k.release,
                r.name,
                guest::failure_output(&console.lines, &r.name)
            );
        }
        if !console.done {
            let how = if console.silent() {
                format!(
                    "printed nothing within {} s and was killed",
                    FIRST_LINE.as_secs()
                )
            } else if console.timed_out {
                format!("did not finish within {} s and was killed", self.timeout_s)
            } else {
                "stopped before its tests ended (panic or crash)".to_string()
            };
            let running = guest::running_when_stopped(&console.lines)
                .map(|t| format!(", while running {t}"))
                .unwrap_or_default();
            println!(
                "FAILED: the {boot} guest of kernel {} {how}{running}; its console ({}) ended with:\n{}",
                k.release,
                self.log.display(),
                console.tail(25)
            );
        }
        if !outcome.missing.is_empty() {
            println!("FAILED: no result for {:?}", outcome.missing);
        }
        let passed = outcome.results.iter().filter(|r| r.ok).count();
        println!(
            "{} {} {boot}: {passed} of {expected} tests passed in {:.0} s (console: {})",
            k.series.series,
            k.release,
            self.seconds,
            self.log.display()
        );
    }
}

/// KVM where it boots a stock kernel here, else TCG.
fn choose_accel(k: &Kernel, work: &std::path::Path) -> Result<Accel> {
    if let Some(why) = qemu::kvm_unusable() {
        println!("vm: not using KVM: {why}");
        return Ok(Accel::Tcg);
    }
    // A guest that only says it is done: does KVM get that far?
    let mut root = initramfs::Root::default();
    root.program("/bin/busybox", std::path::Path::new("/bin/busybox"))?;
    root.symlink("/bin/sh", "busybox");
    root.bytes(
        "/init",
        format!(
            "#!/bin/sh\n/bin/busybox echo '{}'\n/bin/busybox poweroff -f\n",
            qemu::DONE
        ),
        0o755,
    );
    let initrd = work.join("kvm-probe.cpio");
    root.write(&initrd)?;
    let console = qemu::run(
        &qemu::Guest {
            vmlinuz: &k.vmlinuz,
            initrd: &initrd,
            append: "console=ttyS0 quiet panic=-1".into(),
            disks: Vec::new(),
            accel: Accel::Kvm,
            timeout: Duration::from_secs(30),
            first_line_within: None,
            log: work.join("kvm-probe.log"),
        },
        |_| {},
    )?;
    if console.done {
        Ok(Accel::Kvm)
    } else {
        println!("vm: not using KVM: a KVM guest did not reach /init within 30 s");
        Ok(Accel::Tcg)
    }
}

/// Builds the agent and the test binaries the guests run (or takes them from `cargo xtask
/// test`, which built them).
fn build() -> Result<Binaries> {
    let all = match std::env::var(cmd::BUILT) {
        Ok(list) => list
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
            .collect(),
        Err(_) => cmd::build_binaries()?,
    };
    let tests: Vec<(String, PathBuf)> = all
        .into_iter()
        .filter(|(n, _)| ["privileged", "kernels"].contains(&n.as_str()))
        .collect();
    for wanted in ["privileged", "kernels"] {
        if !tests.iter().any(|(n, _)| n == wanted) {
            bail!("cargo did not report the {wanted} test binary");
        }
    }
    let release = cmd::workspace_root().join("target/release");
    let (agent, loadgen, stornet) = (
        release.join("stornet-agent"),
        release.join("loadgen"),
        release.join("stornet"),
    );
    // The guests have no nightly toolchain: check that the binaries are there.
    for bin in [&agent, &loadgen, &stornet] {
        Command::new(bin)
            .arg("--version")
            .output()
            .with_context(|| format!("{} does not run", bin.display()))?;
    }
    Ok(Binaries {
        agent,
        loadgen,
        stornet,
        tests,
    })
}
