//! Debian's kernel packages for the guests: found through the Debian mirror the machine's apt
//! sources already name, downloaded with a private apt state (the machine's own apt state is
//! left alone), unpacked and cached between runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// A kernel series of the matrix: the newest cloud image of `series` in `suites`.
#[derive(Clone, Copy, Debug)]
pub struct Series {
    /// `5.10`, `6.1`, …
    pub series: &'static str,
    /// Where Debian ships it (security updates first).
    pub suites: &'static [&'static str],
    /// How users know it.
    pub distro: &'static str,
}

/// The kernels storage hosts run, oldest first: Debian 11, 12, 13, and the newest series in
/// Debian 13's backports.
pub const MATRIX: &[Series] = &[
    Series {
        series: "5.10",
        suites: &["bullseye-security", "bullseye"],
        distro: "Debian 11",
    },
    Series {
        series: "6.1",
        suites: &["bookworm-security", "bookworm"],
        distro: "Debian 12",
    },
    Series {
        series: "6.12",
        suites: &["trixie-security", "trixie"],
        distro: "Debian 13",
    },
    Series {
        series: "7.3",
        suites: &["trixie-backports"],
        distro: "Debian 13 backports",
    },
];

/// An unpacked kernel package.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub series: Series,
    /// `uname -r` of the kernel, e.g. `6.1.0-57-cloud-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `…/lib/modules/<release>`.
    pub modules: PathBuf,
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("STORNET_VM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/stornet/vm"))
}

/// The kernels of the matrix, from the cache where present, else downloaded.
pub fn fetch_all() -> Result<Vec<Kernel>> {
    let cache = cache_dir();
    let mut apt: Option<Apt> = None;
    let mut out = Vec::new();
    for s in MATRIX {
        if let Some(k) = cached(&cache, s)? {
            println!("kernel {}: {} (cached)", s.series, k.release);
            out.push(k);
            continue;
        }
        if apt.is_none() {
            apt = Some(Apt::new(&cache.join("apt"))?);
        }
        let k = download(apt.as_ref().expect("set above"), &cache, s)?;
        println!("kernel {}: {} (downloaded)", s.series, k.release);
        out.push(k);
    }
    Ok(out)
}

/// The unpacked kernels of a series in the cache: `<cache>/kernels/<release>/`.
fn cached(cache: &Path, s: &Series) -> Result<Option<Kernel>> {
    let dir = cache.join("kernels");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    let mut releases: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|r| in_series(r, s.series) && dir.join(r).join(".complete").exists())
        .collect();
    releases.sort_by(|a, b| natural_cmp(a, b));
    match releases.pop() {
        Some(r) => unpacked(&dir.join(&r), s, &r).map(Some),
        None => Ok(None),
    }
}

/// Whether a release (or package version) belongs to a series: `6.1` takes `6.1.0-57-…` and
/// `6.1.192`, not `6.12.…`.
pub fn in_series(release: &str, series: &str) -> bool {
    release
        .strip_prefix(series)
        .is_some_and(|rest| rest.starts_with(['.', '-', '+']))
}

/// Orders strings by their runs of digits as numbers (`…-9-…` before `…-46-…`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                out.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            ((true, x), (true, y)) => x
                .parse::<u64>()
                .unwrap_or(0)
                .cmp(&y.parse::<u64>().unwrap_or(0)),
            ((_, x), (_, y)) => x.cmp(y),
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

/// The kernel image and module tree of an unpacked package: `boot/vmlinuz-<release>` and
/// `lib/modules/<release>` (older packages) or both under `usr/lib/modules/<release>`.
fn unpacked(root: &Path, s: &Series, release: &str) -> Result<Kernel> {
    let old = (
        root.join("boot").join(format!("vmlinuz-{release}")),
        root.join("lib/modules").join(release),
    );
    let new = (
        root.join("usr/lib/modules").join(release).join("vmlinuz"),
        root.join("usr/lib/modules").join(release),
    );
    let new_modules = new.1.clone();
    for (vmlinuz, modules) in [(old.0.clone(), old.1), (old.0, new_modules), (new.0, new.1)] {
        if vmlinuz.is_file() && modules.is_dir() {
            return Ok(Kernel {
                series: *s,
                release: release.to_string(),
                vmlinuz,
                modules,
            });
        }
    }
    bail!(
        "{}: no vmlinuz and module tree for {release}",
        root.display()
    )
}

/// apt with its own sources list (the machine's Debian mirror, the suites of the matrix) and
/// its own lists and cache.
pub struct Apt {
    options: Vec<String>,
}

impl Apt {
    pub fn new(dir: &Path) -> Result<Apt> {
        let mirror = debian_mirror()?;
        let security = mirror.replace("/debian", "/debian-security");
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        let mut sources = String::new();
        for s in MATRIX {
            for suite in s.suites {
                let base = if suite.ends_with("-security") {
                    &security
                } else {
                    &mirror
                };
                sources.push_str(&format!("deb [signed-by={keyring}] {base} {suite} main\n"));
            }
        }
        let list = dir.join("sources.list");
        std::fs::write(&list, sources)?;
        let options = vec![
            format!("-oDir::Etc::sourcelist={}", list.display()),
            "-oDir::Etc::sourceparts=/nonexistent".into(),
            format!("-oDir::State::Lists={}", dir.join("lists").display()),
            format!("-oDir::Cache={}", dir.join("cache").display()),
            "-oAPT::Sandbox::User=root".into(),
        ];
        let apt = Apt { options };
        cmd::run(
            Command::new("apt-get")
                .args(&apt.options)
                .args(["-q", "update"]),
        )
        .context("apt-get update of the kernel suites")?;
        Ok(apt)
    }

    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.args(&self.options);
        c
    }
}

/// The first Debian mirror of the machine's apt sources (deb822 or one-line format).
pub fn debian_mirror() -> Result<String> {
    let mut texts = Vec::new();
    for dir in ["/etc/apt/sources.list.d"] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                    texts.push(std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
    }
    texts.push(std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default());
    for t in &texts {
        for line in t.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
            let url = line
                .strip_prefix("URIs:")
                .map(str::trim)
                .or_else(|| {
                    line.strip_prefix("deb ").and_then(|rest| {
                        rest.split_whitespace()
                            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
                    })
                })
                .and_then(|u| u.split_whitespace().next());
            if let Some(u) = url
                && u.trim_end_matches('/').ends_with("/debian")
            {
                return Ok(u.trim_end_matches('/').to_string());
            }
        }
    }
    bail!("no Debian mirror (a URI ending in /debian) in the apt sources of this machine")
}

/// Downloads and unpacks the newest cloud kernel of a series.
fn download(apt: &Apt, cache: &Path, s: &Series) -> Result<Kernel> {
    let pattern = format!(
        "^linux-image-{}[.-][0-9].*-cloud-amd64$",
        s.series.replace('.', "\\.")
    );
    let out = apt
        .command("apt-cache")
        .args(["search", "--names-only", &pattern])
        .output()
        .context("apt-cache search")?;
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| !n.ends_with("-dbg") && !n.contains("unsigned"))
        .collect();
    names.sort_by(|a, b| natural_cmp(a, b));
    let Some(image) = names.pop() else {
        bail!(
            "no cloud kernel of series {} in {} through the machine's Debian mirror",
            s.series,
            s.suites.join(", ")
        );
    };
    let release = image
        .strip_prefix("linux-image-")
        .expect("matched the pattern")
        .to_string();
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs)?;
    // Newer packages split the image into linux-binary-*, linux-modules-* and linux-base-*
    // (which has modules.builtin).
    let mut packages = vec![image.clone()];
    for extra in ["linux-binary-", "linux-modules-", "linux-base-"] {
        let name = format!("{extra}{release}");
        if apt
            .command("apt-cache")
            .args(["show", &name])
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
        {
            packages.push(name);
        }
    }
    cmd::run(
        apt.command("apt-get")
            .args(["-q", "download"])
            .args(&packages)
            .current_dir(&debs),
    )
    .with_context(|| format!("downloading {}", packages.join(", ")))?;
    let root = cache.join("kernels").join(&release);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    for p in &packages {
        let deb = std::fs::read_dir(&debs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{p}_")) && n.ends_with(".deb"))
            })
            .with_context(|| format!("{p}: no .deb in {}", debs.display()))?;
        cmd::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        std::fs::remove_file(&deb)?;
    }
    let k = unpacked(&root, s, &release)?;
    std::fs::write(root.join(".complete"), &image)?;
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_membership() {
        assert!(in_series("6.1.0-57-cloud-amd64", "6.1"));
        assert!(!in_series("6.12.117+deb13-cloud-amd64", "6.1"));
        assert!(in_series("6.12.117+deb13-cloud-amd64", "6.12"));
        assert!(in_series("7.3.4+deb13-cloud-amd64", "7.3"));
        assert!(!in_series("5.100.1", "5.10"));
    }

    #[test]
    fn natural_order_of_releases() {
        let mut v = [
            "linux-image-5.10.0-9-cloud-amd64",
            "linux-image-5.10.0-46-cloud-amd64",
            "linux-image-5.10.0-30-cloud-amd64",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v.last(), Some(&"linux-image-5.10.0-46-cloud-amd64"));
        assert!(natural_cmp("7.2.12", "7.3.4").is_lt());
        assert!(natural_cmp("6.12.117", "6.12.99").is_gt());
    }
}
