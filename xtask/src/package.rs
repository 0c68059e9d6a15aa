//! `cargo xtask package`: the Debian packages `stornet-agent`, `stornet` and `loadgen`, built
//! by cargo-deb from the `[package.metadata.deb]` tables of agent/Cargo.toml,
//! diagnose/Cargo.toml and loadgen/Cargo.toml, with
//! man pages written from each program's `--help` (help2man), then checked: the files an
//! operator relies on are in them, and lintian reports nothing that packaging/debian/*.lintian-overrides
//! does not explain.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd::{self, cargo, run};

/// A package: its name (also its binary's), its cargo package, man page summary and files it
/// must carry.
struct Package {
    name: &'static str,
    cargo_package: &'static str,
    summary: &'static str,
    must_carry: &'static [&'static str],
}

const PACKAGES: &[Package] = &[
    Package {
        name: "stornet-agent",
        cargo_package: "stornet-agent",
        summary: "eBPF telemetry of storage and network paths for Prometheus",
        must_carry: &[
            "./usr/bin/stornet-agent",
            "./usr/lib/systemd/system/stornet-agent.service",
            "./etc/stornet/agent.toml",
            "./etc/default/stornet-agent",
            "./usr/share/man/man1/stornet-agent.1.gz",
            "./usr/share/stornet/dashboards/host-storage.json",
            "./usr/share/stornet/prometheus/alerts.yml",
            "./usr/share/stornet/prometheus/recording-rules.yml",
            "./usr/share/doc/stornet-agent/copyright",
        ],
    },
    Package {
        name: "stornet",
        cargo_package: "stornet-diagnose",
        summary: "name the root cause of storage latency from Prometheus or a run record",
        must_carry: &[
            "./usr/bin/stornet",
            "./usr/share/man/man1/stornet.1.gz",
            "./usr/share/doc/stornet/copyright",
            "./usr/share/doc/stornet/run-record.md",
        ],
    },
    Package {
        name: "loadgen",
        cargo_package: "loadgen",
        summary: "io_uring storage load generator for stress runs",
        must_carry: &[
            "./usr/bin/loadgen",
            "./usr/share/man/man1/loadgen.1.gz",
            "./usr/share/doc/loadgen/copyright",
        ],
    },
];

/// Where the packages are written.
pub fn out_dir() -> PathBuf {
    cmd::workspace_root().join("target/debian")
}

/// Builds the packages (release binaries included) and checks them; returns their paths.
pub fn package() -> Result<Vec<PathBuf>> {
    crate::setup::cargo_tool(crate::setup::CARGO_DEB)?;
    // The test tiers' build: another selection would unify features differently and
    // rebuild (and replace) the binaries the tests beside this one are running.
    if std::env::var_os(cmd::BUILT).is_none() {
        cmd::build_binaries()?;
    }
    let root = cmd::workspace_root();
    let man = root.join("target/release/man");
    std::fs::create_dir_all(&man)?;
    let mut debs = Vec::new();
    for p in PACKAGES {
        man_page(&root.join("target/release").join(p.name), p.summary, &man)?;
        run(cargo()
            .args(["deb", "-p", p.cargo_package, "--no-build", "--output"])
            .arg(out_dir()))?;
        let deb = out_dir().join(format!(
            "{}_{}-1_amd64.deb",
            p.name,
            env!("CARGO_PKG_VERSION")
        ));
        check_contents(&deb, p.must_carry)?;
        debs.push(deb);
    }
    lintian(&debs)?;
    for d in &debs {
        println!("package: {}", d.display());
    }
    Ok(debs)
}

/// `<man>/<program>.1.gz` from the program's `--help` and `--version`.
fn man_page(program: &Path, summary: &str, man: &Path) -> Result<()> {
    let name = program.file_name().unwrap().to_string_lossy();
    let out = Command::new("help2man")
        .args(["--no-info", "--name", summary])
        .arg(program)
        .output()
        .context("running help2man (apt-get install help2man)")?;
    if !out.status.success() {
        bail!(
            "help2man {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // gzip -9n: no name or time stamp in the header, so the page is reproducible.
    let path = man.join(format!("{name}.1.gz"));
    let file = std::fs::File::create(&path)?;
    let mut gz = Command::new("gzip")
        .args(["-9n", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(file)
        .spawn()
        .context("running gzip")?;
    std::io::Write::write_all(gz.stdin.as_mut().unwrap(), &out.stdout)?;
    drop(gz.stdin.take());
    if !gz.wait()?.success() {
        bail!("gzip of {} failed", path.display());
    }
    Ok(())
}

fn check_contents(deb: &Path, must_carry: &[&str]) -> Result<()> {
    let listing = cmd::output("dpkg-deb", &["-c", &deb.to_string_lossy()])
        .with_context(|| format!("dpkg-deb -c {}", deb.display()))?;
    let paths: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let missing: Vec<&&str> = must_carry.iter().filter(|m| !paths.contains(m)).collect();
    if !missing.is_empty() {
        bail!("{} lacks {missing:?}", deb.display());
    }
    Ok(())
}

/// lintian, failing on any error or warning; the overrides each package ships say why a tag
/// does not apply.
fn lintian(debs: &[PathBuf]) -> Result<()> {
    let out = Command::new("lintian")
        .args(["--fail-on", "error,warning"])
        .args(debs)
        .output()
        .context("running lintian (apt-get install lintian)")?;
    let report = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("lintian:\n{report}{}", String::from_utf8_lossy(&out.stderr));
    }
    println!("lintian: clean");
    Ok(())
}
