//! `cargo xtask package`: the Debian packages `stornet-agent`, `stornet` and `loadgen`, built
//! by cargo-deb from the `[package.metadata.deb]` tables of agent/Cargo.toml,
//! diagnose/Cargo.toml and loadgen/Cargo.toml, with the man pages and shell completions each
//! program writes from its own command line (its hidden `generate-docs` subcommand, crate
//! cli-docs), then checked: the files an operator relies on are in them, every option of
//! `loadgen run` is in its man page, and lintian reports nothing that
//! packaging/debian/*.lintian-overrides does not explain.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd::{self, cargo, run};

/// A package: its name (also its binary's), its cargo package and files it must carry (besides
/// the man pages and completions its program writes, which it must carry all of).
struct Package {
    name: &'static str,
    cargo_package: &'static str,
    must_carry: &'static [&'static str],
}

const PACKAGES: &[Package] = &[
    Package {
        name: "stornet-agent",
        cargo_package: "stornet-agent",
        must_carry: &[
            "./usr/bin/stornet-agent",
            "./usr/lib/systemd/system/stornet-agent.service",
            "./etc/stornet/agent.toml",
            "./etc/default/stornet-agent",
            "./usr/share/stornet/dashboards/host-storage.json",
            "./usr/share/stornet/prometheus/alerts.yml",
            "./usr/share/stornet/prometheus/recording-rules.yml",
            "./usr/share/doc/stornet-agent/copyright",
        ],
    },
    Package {
        name: "stornet",
        cargo_package: "stornet-diagnose",
        must_carry: &[
            "./usr/bin/stornet",
            "./usr/share/doc/stornet/copyright",
            "./usr/share/doc/stornet/run-record.md",
        ],
    },
    Package {
        name: "loadgen",
        cargo_package: "loadgen",
        must_carry: &["./usr/bin/loadgen", "./usr/share/doc/loadgen/copyright"],
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
    let mut debs = Vec::new();
    for p in PACKAGES {
        let program = root.join("target/release").join(p.name);
        let docs = generate_docs(&program, &docs_dir(p.name))?;
        run(cargo()
            .args(["deb", "-p", p.cargo_package, "--no-build", "--output"])
            .arg(out_dir()))?;
        let deb = out_dir().join(format!(
            "{}_{}-1_amd64.deb",
            p.name,
            env!("CARGO_PKG_VERSION")
        ));
        let must_carry = p.must_carry.to_vec();
        let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
        check_contents(&deb, &[must_carry, docs].concat())?;
        debs.push(deb);
    }
    let loadgen = root.join("target/release/loadgen");
    let run_help = cmd::output(&loadgen.to_string_lossy(), &["run", "--help"])
        .context("loadgen run --help failed")?;
    let loadgen_deb = out_dir().join(format!("loadgen_{}-1_amd64.deb", env!("CARGO_PKG_VERSION")));
    let page = deb_file(&loadgen_deb, "./usr/share/man/man1/loadgen-run.1.gz")?;
    let n = names_every_option(&page, &run_help)
        .context("loadgen-run.1 against `loadgen run --help`")?;
    println!("loadgen-run.1: names all {n} options of `loadgen run --help`");
    lintian(&debs)?;
    for d in &debs {
        println!("package: {}", d.display());
    }
    Ok(debs)
}

/// Where a program's man pages and completions are written for its package (the assets of its
/// `[package.metadata.deb]`).
fn docs_dir(program: &str) -> PathBuf {
    cmd::workspace_root()
        .join("target/release/docs")
        .join(program)
}

/// Where each file `generate-docs` writes is installed: man pages (compressed) and the
/// completions of bash, zsh and fish at the paths their packages look in.
fn installed_path(program: &str, file: &str) -> Option<String> {
    let path = if file.ends_with(".1") {
        format!("usr/share/man/man1/{file}.gz")
    } else if file == format!("{program}.bash") {
        format!("usr/share/bash-completion/completions/{program}")
    } else if file == format!("_{program}") {
        format!("usr/share/zsh/vendor-completions/{file}")
    } else if file == format!("{program}.fish") {
        format!("usr/share/fish/vendor_completions.d/{file}")
    } else {
        return None;
    };
    Some(format!("./{path}"))
}

/// Runs `program generate-docs` into `dir` (emptied first) and compresses the man pages
/// (`gzip -9n`: no name or time stamp, so they are reproducible); the paths the package
/// installs them at.
fn generate_docs(program: &Path, dir: &Path) -> Result<Vec<String>> {
    let name = program.file_name().unwrap().to_string_lossy().into_owned();
    let _ = std::fs::remove_dir_all(dir);
    run(Command::new(program).arg("generate-docs").arg(dir))?;
    let mut installed = Vec::new();
    let mut pages = Vec::new();
    for sub in ["man", "completions"] {
        for entry in std::fs::read_dir(dir.join(sub))? {
            let path = entry?.path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let Some(at) = installed_path(&name, &file) else {
                bail!("{name} generate-docs wrote {file}, which no package path is known for");
            };
            if sub == "man" {
                pages.push(path);
            }
            installed.push(at);
        }
    }
    run(Command::new("gzip").arg("-9nf").args(&pages))?;
    installed.sort();
    Ok(installed)
}

/// The text of one file of a package, decompressed when it ends in `.gz`.
fn deb_file(deb: &Path, path: &str) -> Result<String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -xO \"$2\"")
        .args(["sh", &deb.to_string_lossy(), path])
        .output()?;
    anyhow::ensure!(
        out.status.success() && !out.stdout.is_empty(),
        "{path} not read from {}: {}",
        deb.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    if !path.ends_with(".gz") {
        return Ok(String::from_utf8(out.stdout)?);
    }
    let mut gz = Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut stdin = gz.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &out.stdout));
    let text = gz.wait_with_output()?;
    writer.join().unwrap()?;
    anyhow::ensure!(text.status.success(), "gzip -d of {path} failed");
    Ok(String::from_utf8(text.stdout)?)
}

/// The long options (`--name`) a help text lists at the start of its lines.
fn help_options(help: &str) -> Vec<&str> {
    help.lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split(['=', ' ', ',']).next())
        .filter(|o| !o.is_empty())
        .collect()
}

/// Fails naming the options of `help` that the roff `page` does not name; how many it names.
fn names_every_option(page: &str, help: &str) -> Result<usize> {
    // roff writes a dash as `\-`.
    let page = page.replace("\\-", "-");
    let options = help_options(help);
    anyhow::ensure!(options.len() > 1, "no options in the help text:\n{help}");
    let missing: Vec<&&str> = options
        .iter()
        .filter(|o| {
            let opt = format!("--{o}");
            !page.match_indices(&opt).any(|(i, _)| {
                !page[i + opt.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            })
        })
        .collect();
    anyhow::ensure!(missing.is_empty(), "the man page lacks {missing:?}");
    Ok(options.len())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_go_where_their_packages_look() {
        let at = |f| installed_path("loadgen", f);
        assert_eq!(
            at("loadgen-run.1").unwrap(),
            "./usr/share/man/man1/loadgen-run.1.gz"
        );
        assert_eq!(
            at("loadgen.bash").unwrap(),
            "./usr/share/bash-completion/completions/loadgen"
        );
        assert_eq!(
            at("_loadgen").unwrap(),
            "./usr/share/zsh/vendor-completions/_loadgen"
        );
        assert_eq!(
            at("loadgen.fish").unwrap(),
            "./usr/share/fish/vendor_completions.d/loadgen.fish"
        );
        assert_eq!(at("stornet.bash"), None);
    }

    #[test]
    fn a_man_page_without_an_option_fails() {
        let help = "Usage: x\n\nOptions:\n  --bs=SIZE   IO size\n  --rate_iops=R  rate\n  --unlink  remove\n";
        let page = ".TP\n\\fB\\-\\-bs\\fR=\\fISIZE\\fR\n.TP\n\\-\\-rate_iops\n.TP\n\\-\\-unlink\n";
        assert_eq!(help_options(help), ["bs", "rate_iops", "unlink"]);
        assert_eq!(names_every_option(page, help).unwrap(), 3);
        // `--rate` is not named by `--rate_iops`.
        let e = names_every_option(page, &format!("{help}  --rate=R  x\n")).unwrap_err();
        assert!(e.to_string().contains("\"rate\""), "{e}");
    }
}
