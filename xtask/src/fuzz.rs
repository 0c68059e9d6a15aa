//! `cargo xtask fuzz`: runs every fuzz target in `fuzz/` (cargo-fuzz, libFuzzer, nightly) for
//! a set time each, starting from the committed seed corpus in `fuzz/corpus/<target>`.
//! New inputs go to a scratch corpus under `fuzz/target`, so the committed seeds stay as
//! they are. A crash fails the task; libFuzzer saves the input under `fuzz/artifacts/<target>/`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::cmd::{self, display};

/// How the targets are built.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Optimized, with AddressSanitizer and overflow checks: for long runs.
    Thorough,
    /// Unoptimized, no sanitizer: compiles in a fraction of the time, for the short runs of
    /// the test tier.
    Quick,
}

fn fuzz_dir() -> PathBuf {
    cmd::workspace_root().join("fuzz")
}

/// The targets, from `fuzz/fuzz_targets/*.rs`.
pub fn targets() -> Result<Vec<String>> {
    let dir = fuzz_dir().join("fuzz_targets");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            if p.extension()? != "rs" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    Ok(names)
}

fn cargo_fuzz() -> Command {
    let mut c = cmd::nightly_cargo();
    // The targets never load the probes: the agent library builds without its eBPF object.
    c.env("AYA_BUILD_SKIP", "1").arg("fuzz");
    c
}

fn build_flags(build: Build) -> &'static [&'static str] {
    match build {
        // cargo-fuzz's default: optimized, with debug assertions and overflow checks.
        Build::Thorough => &["--sanitizer", "address"],
        Build::Quick => &["--dev", "--sanitizer", "none"],
    }
}

/// What one run did.
struct Outcome {
    target: String,
    runs: u64,
    seconds: u64,
    corpus: usize,
}

/// `Done 12345 runs in 30 second(s)` from libFuzzer's log.
fn done_line(log: &str) -> Option<(u64, u64)> {
    let line = log.lines().rev().find(|l| l.starts_with("Done "))?;
    let mut w = line.split_whitespace();
    let runs = w.nth(1)?.parse().ok()?;
    let seconds = w.nth(2)?.parse().ok()?;
    Some((runs, seconds))
}

fn run_one(target: &str, seconds: u64, build: Build) -> Result<Outcome> {
    let root = fuzz_dir();
    let scratch = root.join("target").join("corpus").join(target);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let seeds = root.join("corpus").join(target);
    if !seeds.is_dir() {
        bail!(
            "fuzz target {target} has no seed corpus at {}",
            seeds.display()
        );
    }
    let log_path = root.join("target").join(format!("{target}.log"));
    let log = std::fs::File::create(&log_path)?;
    let mut c = cargo_fuzz();
    c.args(["run"])
        .args(build_flags(build))
        .arg(target)
        .arg(&scratch)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        // One input taking this long is a hang, reported like a crash.
        .arg("-timeout=10")
        .arg("-rss_limit_mb=2048")
        .stdout(Stdio::null())
        .stderr(log);
    println!("$ {}", display(&c));
    let status = c
        .status()
        .with_context(|| format!("starting {}", display(&c)))?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        let saved: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("Test unit written to ").nth(1))
            .collect();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for l in tail.iter().rev() {
            eprintln!("  {l}");
        }
        bail!(
            "fuzz target {target} failed ({status}); input saved at {}; reproduce with: cargo +nightly fuzz run {target} <that file>; full log: {}",
            if saved.is_empty() {
                "(none)".to_string()
            } else {
                saved.join(", ")
            },
            log_path.display()
        );
    }
    let (runs, secs) = done_line(&text).unwrap_or((0, seconds));
    let corpus = std::fs::read_dir(&scratch).map_or(0, |d| d.count());
    Ok(Outcome {
        target: target.to_string(),
        runs,
        seconds: secs,
        corpus,
    })
}

/// Builds the targets, then runs each (or only `only`) for `seconds`.
pub fn fuzz(seconds: u64, only: Option<&str>, build: Build) -> Result<()> {
    let chosen = chosen(only)?;
    build_targets(build)?;
    run_targets(&chosen, seconds, build)
}

/// Every target, or only `only` if it is one.
fn chosen(only: Option<&str>) -> Result<Vec<String>> {
    let all = targets()?;
    match only {
        None => Ok(all),
        Some(t) if all.iter().any(|a| a == t) => Ok(vec![t.to_string()]),
        Some(t) => bail!("no fuzz target {t}; there are: {}", all.join(", ")),
    }
}

pub fn build_targets(build: Build) -> Result<()> {
    if cmd::output("cargo-fuzz", &["--version"]).is_none() {
        bail!("cargo-fuzz is missing; `cargo xtask setup` installs it");
    }
    cmd::step("build fuzz targets", || {
        let mut c = cargo_fuzz();
        c.arg("build").args(build_flags(build));
        cmd::run(&mut c)
    })
}

/// Runs every target for `seconds` each (built by `build_targets`).
pub fn run_all(seconds: u64, build: Build) -> Result<()> {
    run_targets(&targets()?, seconds, build)
}

fn run_targets(chosen: &[String], seconds: u64, build: Build) -> Result<()> {
    let mut outcomes = Vec::new();
    for t in chosen {
        outcomes.push(cmd::step(&format!("fuzz {t} for {seconds} s"), || {
            run_one(t, seconds, build)
        })?);
    }
    println!(
        "{:<18} {:>12} {:>9} {:>10}",
        "target", "executions", "exec/s", "corpus"
    );
    for o in &outcomes {
        println!(
            "{:<18} {:>12} {:>9} {:>10}",
            o.target,
            o.runs,
            o.runs / o.seconds.max(1),
            o.corpus
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzers_closing_line() {
        let log = "#1 INITED\n#85781\tDONE   cov: 2910\nDone 85781 runs in 11 second(s)\n";
        assert_eq!(done_line(log), Some((85781, 11)));
        assert_eq!(done_line("crash"), None);
    }

    #[test]
    fn every_target_has_seeds() {
        for t in targets().unwrap() {
            let seeds = fuzz_dir().join("corpus").join(&t);
            let n = std::fs::read_dir(&seeds).map_or(0, |d| d.count());
            assert!(n > 0, "{t}: no seeds in {}", seeds.display());
        }
    }
}
