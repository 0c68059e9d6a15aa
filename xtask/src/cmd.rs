//! Running commands with their command line printed first ([`stornet_lab::cmd`]), and the
//! cargo commands of the tiers.

use std::process::Command;

use anyhow::{Context, Result};

pub use stornet_lab::cmd::{cargo, display, is_root, output, run, step, workspace_root};

/// `cargo` of the nightly toolchain (eBPF builds, cargo-fuzz), at the workspace root.
pub fn nightly_cargo() -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo"])
        .current_dir(workspace_root());
    // `cargo xtask` exports the stable toolchain's variables; the nightly cargo needs its own.
    for var in ["RUSTC", "RUSTDOC", "CARGO", "RUSTUP_TOOLCHAIN"] {
        c.env_remove(var);
    }
    c
}

/// Every cargo command of the tiers selects the whole workspace (and tests, so with the
/// dev-dependencies): cargo unifies features over what it selects, and one selection means
/// every crate compiles once, not once per tier.
pub const SELECTION: &[&str] = &["--workspace", "--exclude", "agent-ebpf"];

/// Every test binary, and the release binaries the integration tests run (cargo builds a
/// package's binaries for its integration tests), so that the tiers that run side by side
/// do not wait on each other's builds. Returns each test executable by target name.
pub fn build_binaries() -> Result<Vec<(String, std::path::PathBuf)>> {
    let out = cargo()
        .args(["test", "--release", "--no-run"])
        .args(SELECTION)
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    anyhow::ensure!(out.status.success(), "building the test binaries failed");
    let mut exes = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact"
            && let (Some(name), Some(exe)) =
                (v["target"]["name"].as_str(), v["executable"].as_str())
        {
            exes.push((name.to_string(), std::path::PathBuf::from(exe)));
        }
    }
    Ok(exes)
}

/// Set by `cargo xtask test` for the vm tier it runs beside the other tiers: the build is
/// done (a cargo command there would wait for the target directory's lock, which `cargo
/// test` holds while the foreground's tests run), and these are the root tiers' test
/// executables, as `name=path` lines.
pub const BUILT: &str = "STORNET_XTASK_BUILT";

/// `cargo metadata` of the workspace whose manifest is `manifest`, offline.
pub fn metadata(manifest: &std::path::Path) -> Result<serde_json::Value> {
    let out = cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        anyhow::bail!(
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("reading cargo metadata's JSON")
}
