//! `cargo xtask test`: the test tiers, in order. Everything builds in release mode once, so
//! the binaries the privileged tests run are the ones users run.

use std::process::Command;

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::background::Background;
use crate::cmd::{self, cargo, run};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Tier {
    /// Formatting, clippy and unit tests.
    Unit,
    /// Root: real probes, loop devices, namespaces.
    Privileged,
    /// Root: end-to-end lab scenarios.
    Scenarios,
    /// The probe tests in qemu guests of Debian's kernels, on real block drivers.
    Vm,
}

fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--check"]))?;
    crate::circles::check(&cmd::workspace_root())?;
    crate::unused_deps::check(&cmd::workspace_root())?;
    crate::dep_policy::check(&cmd::workspace_root())?;
    // The eBPF programs are linted by the second command; the first needs no object of them.
    run(cargo()
        .env("AYA_BUILD_SKIP", "1")
        .args(["clippy", "--release"])
        .args(cmd::SELECTION)
        .args(["--all-targets", "--", "-D", "warnings"]))?;
    run(cmd::nightly_cargo().args([
        "clippy",
        "--release",
        "-p",
        "agent-ebpf",
        "--target",
        "bpfel-unknown-none",
        "-Z",
        "build-std=core",
        "--bins",
        "--",
        "-D",
        "warnings",
    ]))
}

fn unit() -> Result<()> {
    run(cargo()
        .args(["test", "--release"])
        .args(cmd::SELECTION)
        .args(["--exclude", "stornet-tests"]))
}

fn root_tier(test: &str, extra: &[&str]) -> Result<()> {
    if !cmd::is_root() {
        println!(
            "not root: the {test} tests will report themselves skipped (with CI set they fail)"
        );
    }
    run(cargo()
        .args([
            "test",
            "--release",
            "--workspace",
            "--exclude",
            "agent-ebpf",
            "--test",
            test,
            "--",
            "--test-threads=1",
        ])
        .args(extra))
}

/// Seconds each fuzz target runs in the unit tier.
const FUZZ_SECONDS: u64 = 8;

pub fn test(only: Option<Tier>, skip_setup: bool) -> Result<()> {
    if !skip_setup {
        crate::setup::setup()?;
    }
    let wants = |t: Tier| only.is_none_or(|o| o == t);
    let root = wants(Tier::Privileged) || wants(Tier::Scenarios);
    let mut exes = Vec::new();
    if (root || wants(Tier::Vm)) && std::env::var_os(cmd::BUILT).is_none() {
        exes = cmd::step(
            "build release binaries and test binaries",
            cmd::build_binaries,
        )?;
    }
    // The guests of the vm tier keep the CPUs busy while the root tiers mostly wait on
    // devices and links: when both are asked for, the vm tier runs beside them, and beside
    // the unit tests, the lint and the fuzz targets (whose builds the first step shares).
    let vm = if wants(Tier::Vm) && root {
        let exe = std::env::current_exe().context("locating cargo xtask")?;
        let mut c = Command::new(exe);
        let list: Vec<String> = exes
            .iter()
            .filter(|(n, _)| ["privileged", "kernels"].contains(&n.as_str()))
            .map(|(n, p)| format!("{n}={}", p.display()))
            .collect();
        c.args(["test", "--tier", "vm", "--skip-setup"])
            .env(cmd::BUILT, list.join("\n"));
        Some(Background::start("vm", &mut c)?)
    } else {
        None
    };
    let mut foreground = foreground(wants, vm.is_none());
    let background = vm.map_or(Ok(()), Background::wait);
    // The scenarios judge latency verdicts, so they run alone: a guest's emulated CPU beside
    // them takes a whole core and makes a loop device's service time jump (a verdict that
    // flips on a busy host is a finding of its own, not something CI should roll dice on).
    if foreground.is_ok() && wants(Tier::Scenarios) {
        // Each scenario prints its verdict and key numbers.
        foreground = cmd::step("end-to-end scenarios", || {
            root_tier("scenarios", &["--nocapture"])
        });
    }
    // Both are reported; the foreground's failure first.
    match (foreground, background) {
        (Ok(()), Ok(())) => {
            println!("all requested test tiers passed");
            Ok(())
        }
        (Err(f), Err(b)) => Err(f.context(format!("also: {b:#}"))),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
    }
}

fn foreground(wants: impl Fn(Tier) -> bool, vm_here: bool) -> Result<()> {
    if wants(Tier::Unit) {
        cmd::step("unit tests", unit)?;
    }
    if wants(Tier::Privileged) {
        cmd::step("privileged integration tests", || {
            root_tier("privileged", &[])
        })?;
    }
    if wants(Tier::Unit) {
        cmd::step(
            "lint: fmt, import circles, unused dependencies and clippy",
            lint,
        )?;
        crate::fuzz::build_targets(crate::fuzz::Build::Quick)?;
        // Every parser of outside input; `cargo xtask fuzz` runs them longer.
        cmd::step("fuzz targets", || {
            crate::fuzz::run_all(FUZZ_SECONDS, crate::fuzz::Build::Quick)
        })?;
    }
    if wants(Tier::Vm) && vm_here {
        cmd::step("vm tier: kernels and block drivers in qemu", || {
            crate::vm::run(&crate::vm::Options::default())
        })?;
    }
    Ok(())
}
