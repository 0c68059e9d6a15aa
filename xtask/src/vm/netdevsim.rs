//! netdevsim, the kernel's simulated network device, whose pause-frame statistics a test can
//! set: the guests' test of the agent's standard pause statistics runs on it. Debian builds
//! it into none of its kernels (`# CONFIG_NETDEVSIM is not set` in every flavour), so the
//! vm tier builds it out of tree from Debian's own source of the guest's kernel
//! (`linux-source-<series>`, the same version) against that kernel's headers, and caches it.
//!
//! The module is built with this machine's gcc when it is at least as new as the gcc that
//! built the kernel (the kernel's build flags are the newer compiler's): Debian 12's gcc 12
//! builds it for 5.10 (gcc 10) and 6.1 (gcc 12); 6.12 and 7.3 were built with gcc 14, so on
//! a Debian 12 machine their guests run without the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::kernels::{Apt, Kernel, cache_dir};
use crate::cmd;

/// The cached module of `k`, built first when missing; None when this machine's compiler
/// is older than the kernel's (said on stdout).
pub fn module(k: &Kernel, apt: &mut Option<Apt>) -> Result<Option<PathBuf>> {
    let dir = cache_dir().join("netdevsim").join(&k.release);
    let ko = dir.join("netdevsim.ko");
    if ko.is_file() {
        println!("netdevsim for {}: {} (cached)", k.release, ko.display());
        return Ok(Some(ko));
    }
    let wanted = config_gcc_major(&kernel_config(k)?)
        .with_context(|| format!("the .config of {} names no gcc", k.release))?;
    let have = cmd::output("gcc", &["-dumpversion"])
        .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
        .context("no gcc on this machine (cargo xtask setup installs it)")?;
    if have < wanted {
        println!(
            "netdevsim for {}: not built (the kernel was built with gcc {wanted}, this \
             machine has gcc {have}): its guests run without the pause-frame test",
            k.release
        );
        return Ok(None);
    }
    if apt.is_none() {
        *apt = Some(Apt::new(&cache_dir().join("apt"))?);
    }
    let apt = apt.as_ref().expect("set above");
    let work = dir.join("build");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let r = build(k, apt, &work);
    let r = r.and_then(|built| Ok(std::fs::copy(built, &ko)?));
    let _ = std::fs::remove_dir_all(&work);
    r.with_context(|| format!("building netdevsim for {}", k.release))?;
    println!("netdevsim for {}: {}", k.release, ko.display());
    Ok(Some(ko))
}

/// The kernel's build configuration, from its package: `boot/config-RELEASE` in older
/// packages, `config` beside the modules in newer ones.
fn kernel_config(k: &Kernel) -> Result<String> {
    let beside = k.modules.join("config");
    let boot = k
        .modules
        .ancestors()
        .map(|root| root.join("boot").join(format!("config-{}", k.release)));
    for p in std::iter::once(beside).chain(boot) {
        if let Ok(text) = std::fs::read_to_string(&p) {
            return Ok(text);
        }
    }
    bail!("no build configuration in the package of {}", k.release)
}

/// Builds the module in `work`; its path.
fn build(k: &Kernel, apt: &Apt, work: &Path) -> Result<PathBuf> {
    // The headers of the kernel's flavour name the common headers and kbuild they need.
    let headers = format!("linux-headers-{}", k.release);
    let show = apt
        .command("apt-cache")
        .args(["show", &headers])
        .output()
        .context("apt-cache show")?;
    let show = String::from_utf8_lossy(&show.stdout);
    let (version, deps) = package_fields(&show)
        .with_context(|| format!("no package {headers} through the Debian mirror"))?;
    let mut packages = vec![headers.clone()];
    packages.extend(
        deps.into_iter()
            .filter(|d| d.starts_with("linux-headers-") || d.starts_with("linux-kbuild-")),
    );
    let root = work.join("root");
    std::fs::create_dir_all(&root)?;
    for p in &packages {
        let deb = download(apt, &format!("{p}={version}"), work)?;
        cmd::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    }
    // The flavour's Makefile includes the common headers by their installed path.
    let flavour = root.join("usr/src").join(&headers);
    let makefile = flavour.join("Makefile");
    let text =
        std::fs::read_to_string(&makefile).with_context(|| format!("{}", makefile.display()))?;
    let prefix = format!("{}/usr/src/", root.display());
    std::fs::write(&makefile, text.replace("/usr/src/", &prefix))?;

    // The module's source, from the kernel's own source package of the same version.
    let source = format!("linux-source-{}", k.series.series);
    let deb = download(apt, &format!("{source}={version}"), work)?;
    let tarball = format!("./usr/src/{source}.tar.xz");
    cmd::run(
        Command::new("sh")
            .arg("-c")
            .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" \"$3\"")
            .arg("sh")
            .arg(&deb)
            .arg(work)
            .arg(&tarball),
    )?;
    let tree = format!("{source}/drivers/net/netdevsim");
    cmd::run(
        Command::new("tar")
            .arg("-xJf")
            .arg(work.join(&tarball))
            .arg("-C")
            .arg(work)
            .arg(&tree),
    )?;
    let src = work.join(&tree);
    // CC: the kernel's build names its own compiler (gcc-10, gcc-12, …); this machine's
    // gcc is at least as new.
    cmd::run(
        Command::new("make")
            .arg("-C")
            .arg(&flavour)
            .arg(format!("M={}", src.display()))
            .args(["CONFIG_NETDEVSIM=m", "CC=gcc", "modules"]),
    )
    .context("make (gcc and make: cargo xtask setup installs them)")?;
    let built = src.join("netdevsim.ko");
    if !built.is_file() {
        bail!("make built no {}", built.display());
    }
    Ok(built)
}

/// `apt-get download PACKAGE=VERSION` into `dir`; the .deb's path.
fn download(apt: &Apt, spec: &str, dir: &Path) -> Result<PathBuf> {
    cmd::run(
        apt.command("apt-get")
            .args(["-q", "download", spec])
            .current_dir(dir),
    )
    .with_context(|| format!("downloading {spec}"))?;
    let name = spec.split('=').next().expect("a name");
    std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}_")) && n.ends_with(".deb"))
        })
        .with_context(|| format!("{spec}: no .deb in {}", dir.display()))
}

/// The first stanza's version and the names of its dependencies (`apt-cache show`).
pub fn package_fields(show: &str) -> Option<(String, Vec<String>)> {
    let stanza = show.split("\n\n").next()?;
    let field = |name: &str| {
        stanza
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let version = field("Version")?.to_string();
    let deps = field("Depends")
        .unwrap_or("")
        .split(',')
        .filter_map(|d| d.split('|').next()?.split_whitespace().next())
        .map(str::to_string)
        .collect();
    Some((version, deps))
}

/// The major version of the gcc a kernel was built with (`CONFIG_GCC_VERSION=120200`).
pub fn config_gcc_major(config: &str) -> Option<u32> {
    let v: u32 = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_GCC_VERSION="))?
        .trim()
        .parse()
        .ok()?;
    (v > 0).then_some(v / 10000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_name_their_version_and_dependencies() {
        let show = "Package: linux-headers-6.1.0-57-cloud-amd64\nVersion: 6.1.192-3\n\
                    Depends: linux-headers-6.1.0-57-common (= 6.1.192-3), linux-kbuild-6.1 \
                    (>= 6.1.192-3), linux-compiler-gcc-12-x86\nSize: 1\n\n\
                    Package: linux-headers-6.1.0-57-cloud-amd64\nVersion: 6.1.192-2\n";
        let (v, deps) = package_fields(show).unwrap();
        assert_eq!(v, "6.1.192-3");
        assert_eq!(
            deps,
            [
                "linux-headers-6.1.0-57-common",
                "linux-kbuild-6.1",
                "linux-compiler-gcc-12-x86"
            ]
        );
        assert_eq!(package_fields("Package: x\n"), None);
    }

    #[test]
    fn the_compiler_of_a_kernel() {
        assert_eq!(
            config_gcc_major("CONFIG_CC_IS_GCC=y\nCONFIG_GCC_VERSION=140200\n"),
            Some(14)
        );
        assert_eq!(config_gcc_major("CONFIG_GCC_VERSION=0\n"), None);
        assert_eq!(config_gcc_major("CONFIG_CLANG_VERSION=1\n"), None);
    }
}
