//! Running commands with their command line printed first.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// Prints `$ cmd args` and runs it with inherited stdio; fails on a non-zero exit.
pub fn run(cmd: &mut Command) -> Result<()> {
    println!("$ {}", display(cmd));
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {}", display(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", display(cmd));
    }
    Ok(())
}

/// Runs a command quietly and returns its stdout, or None if it could not run or failed.
pub fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn display(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `f` as a named step and prints how long it took.
pub fn step<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    println!("==> {name}");
    let start = Instant::now();
    let r = f().with_context(|| format!("step `{name}` failed"));
    println!(
        "<== {name}: {:.1}s{}",
        start.elapsed().as_secs_f64(),
        if r.is_ok() { "" } else { " (failed)" }
    );
    r
}

pub fn is_root() -> bool {
    output("id", &["-u"]).is_some_and(|s| s.trim() == "0")
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// `cargo` as invoked by the user (so that `cargo xtask` uses the same toolchain).
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

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
