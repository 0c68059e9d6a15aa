//! Running commands with their command line printed first, as `cargo xtask` does.

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

fn display(cmd: &Command) -> String {
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

/// The workspace root (this crate lives one level below it).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench is inside the workspace")
        .to_path_buf()
}

/// `cargo` as `cargo xtask` was invoked (the same toolchain), at the workspace root.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(workspace_root());
    c
}
