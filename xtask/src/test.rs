//! `cargo xtask test`: the test tiers, in order. Everything builds in release mode once, so
//! the binaries the privileged tests run are the ones users run.

use anyhow::Result;
use clap::ValueEnum;

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
    run(cargo().args([
        "clippy",
        "--release",
        "--workspace",
        "--exclude",
        "agent-ebpf",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
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
    run(cargo().args([
        "test",
        "--release",
        "--workspace",
        "--exclude",
        "agent-ebpf",
        "--exclude",
        "stornet-tests",
    ]))?;
    // The lab harness's own unit tests.
    run(cargo().args(["test", "--release", "-p", "stornet-tests", "--lib"]))
}

fn build_binaries() -> Result<()> {
    run(cargo().args(["build", "--release", "--bins"]))
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
            "-p",
            "stornet-tests",
            "--test",
            test,
            "--",
            "--test-threads=1",
        ])
        .args(extra))
}

/// Seconds each fuzz target runs in the unit tier: nine targets keep the tier within a few
/// minutes (the build comes first).
const FUZZ_SECONDS: u64 = 10;

pub fn test(only: Option<Tier>, skip_setup: bool) -> Result<()> {
    if !skip_setup {
        crate::setup::setup()?;
    }
    let wants = |t: Tier| only.is_none_or(|o| o == t);
    if wants(Tier::Unit) {
        cmd::step("lint: fmt and clippy", lint)?;
        cmd::step("unit tests", unit)?;
        // Every parser of outside input, briefly; `cargo xtask fuzz` runs them longer.
        cmd::step("fuzz targets", || {
            crate::fuzz::fuzz(FUZZ_SECONDS, None, crate::fuzz::Build::Quick)
        })?;
    }
    if wants(Tier::Privileged) || wants(Tier::Scenarios) {
        cmd::step("build release binaries", build_binaries)?;
    }
    if wants(Tier::Privileged) {
        cmd::step("privileged integration tests", || {
            root_tier("privileged", &[])
        })?;
    }
    if wants(Tier::Scenarios) {
        // Each scenario prints its verdict and key numbers.
        cmd::step("end-to-end scenarios", || {
            root_tier("scenarios", &["--nocapture"])
        })?;
    }
    if wants(Tier::Vm) {
        cmd::step("vm tier: kernels and block drivers in qemu", || {
            crate::vm::run(&crate::vm::Options::default())
        })?;
    }
    println!("all requested test tiers passed");
    Ok(())
}
