//! `cargo xtask image`: the stornet-agent container image for the Kubernetes DaemonSet,
//! built without a container daemon and without a base image from a registry. It also holds
//! `stornet`, the diagnosis command, and loadgen, for the cluster stress runs of loadgen-cluster.yaml and loadgen-run.yaml: one
//! image gives the hosts and the controller the same loadgen version, which they require.
//!
//! buildah (Debian's package, installed if missing) starts from an empty image (`scratch`)
//! and copies in the release binaries and the shared libraries `ldd` lists for them, taken
//! from the build host, so the image holds exactly the glibc the binaries were linked
//! against. The eBPF programs are inside the agent; the configuration comes from the
//! ConfigMap. The result is an OCI archive, which `skopeo copy`, `podman load` or
//! containerd's `ctr images import` take. buildah keeps its storage under target/buildah
//! (vfs driver: no overlay mounts, works inside containers and on any file system), away
//! from the host's own container storage.
//!
//! The image is checked before the command succeeds: its layers are unpacked into a
//! directory and every binary must print its version there under `chroot`, i.e. with no
//! library but the ones in the image.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cmd::{self, run};

/// Where the agent lives in the image (the DaemonSet runs it as the entrypoint).
const BIN: &str = "/usr/bin/stornet-agent";
/// Where the diagnosis command lives in the image.
const STORNET: &str = "/usr/bin/stornet";
/// Where loadgen lives in the image (the loadgen pods name it as their command).
const LOADGEN: &str = "/usr/bin/loadgen";
/// The metrics port (the DaemonSet's `metrics` container port).
const PORT: &str = "9477/tcp";

/// The buildah command with its own storage under `target/buildah`.
fn buildah(target: &Path) -> Command {
    let mut c = Command::new("buildah");
    c.arg("--root")
        .arg(target.join("buildah/storage"))
        .arg("--runroot")
        .arg(target.join("buildah/run"))
        .args(["--storage-driver", "vfs"]);
    c
}

/// stdout of a command that must succeed.
fn stdout(cmd: &mut Command) -> Result<String> {
    println!("$ {}", cmd::display(cmd));
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {}", cmd::display(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            cmd::display(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A root file system with the binaries (build path, path in the image) and their
/// libraries, each at the path the loader uses (symbolic links resolved: the image holds
/// the files themselves).
fn stage(bins: &[(PathBuf, &str)], root: &Path) -> Result<()> {
    if root.exists() {
        std::fs::remove_dir_all(root).with_context(|| format!("removing {}", root.display()))?;
    }
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for (bin, to) in bins {
        let libs = crate::ldd::shared_libraries(bin)?;
        if !libs.iter().any(|l| l.to_string_lossy().contains("libc.so")) {
            bail!("ldd lists no libc for {}: {libs:?}", bin.display());
        }
        files.push((bin.clone(), to.to_string()));
        for l in libs {
            let to = l.to_string_lossy().into_owned();
            if !files.iter().any(|(_, t)| *t == to) {
                files.push((l, to));
            }
        }
    }
    for (from, to) in files {
        let dest = root.join(to.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap())?;
        // fs::copy follows symbolic links and keeps the mode bits.
        std::fs::copy(&from, &dest)
            .with_context(|| format!("copying {} to {}", from.display(), dest.display()))?;
        println!("  {}", dest.strip_prefix(root).unwrap().display());
    }
    Ok(())
}

/// Unpacks the image in `archive` into `dir/rootfs` and returns the image configuration.
fn unpack(archive: &Path, dir: &Path) -> Result<(PathBuf, Value)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let oci = dir.join("oci");
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&oci)?;
    std::fs::create_dir_all(&rootfs)?;
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&oci))?;
    let blob = |digest: &Value| -> Result<PathBuf> {
        let d = digest.as_str().context("digest")?;
        let hex = d.strip_prefix("sha256:").context("sha256 digest")?;
        Ok(oci.join("blobs/sha256").join(hex))
    };
    let json = |path: PathBuf| -> Result<Value> {
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_slice(&text)?)
    };
    let index = json(oci.join("index.json"))?;
    let manifest = json(blob(&index["manifests"][0]["digest"])?)?;
    let config = json(blob(&manifest["config"]["digest"])?)?;
    // Layers in order, each unpacked over the previous (tar detects compression).
    for layer in manifest["layers"].as_array().context("no layers")? {
        run(Command::new("tar")
            .arg("-xf")
            .arg(blob(&layer["digest"])?)
            .arg("-C")
            .arg(&rootfs))?;
    }
    Ok((rootfs, config))
}

/// The image must start the agent, stornet and loadgen with nothing from the host.
fn verify(archive: &Path, dir: &Path, version: &str) -> Result<()> {
    let (rootfs, config) = unpack(archive, dir)?;
    let entry = &config["config"]["Entrypoint"];
    if *entry != serde_json::json!([BIN]) {
        bail!("image entrypoint is {entry}, not [{BIN:?}]");
    }
    if config["config"]["ExposedPorts"][PORT].is_null() {
        bail!("image does not expose {PORT}");
    }
    for (bin, name) in [
        (BIN, "stornet-agent"),
        (STORNET, "stornet"),
        (LOADGEN, "loadgen"),
    ] {
        let out = stdout(Command::new("chroot").arg(&rootfs).args([bin, "--version"]))?;
        let want = format!("{name} {version}");
        if out.trim() != want {
            bail!("`{name} --version` in the image printed {out:?}, not {want:?}");
        }
        println!("in the image: {}", out.trim());
    }
    Ok(())
}

/// Builds `target/stornet-agent-image.tar` (root: buildah's vfs storage and chroot).
pub fn image(tag: Option<String>) -> Result<()> {
    if !cmd::is_root() {
        bail!("`cargo xtask image` runs as root (buildah without user namespaces, chroot)");
    }
    // The workspace's version, which the agent and loadgen share.
    let version = env!("CARGO_PKG_VERSION");
    let tag = tag.unwrap_or_else(|| format!("stornet-agent:{version}"));
    let root = cmd::workspace_root();
    let target = root.join("target");
    let archive = target.join("stornet-agent-image.tar");

    cmd::step("image: buildah", || crate::setup::apt_install(&["buildah"]))?;
    cmd::step("image: build stornet-agent, stornet and loadgen", || {
        run(cmd::cargo().args([
            "build",
            "--release",
            "-p",
            "stornet-agent",
            "-p",
            "stornet-diagnose",
            "-p",
            "loadgen",
        ]))
    })?;
    let staged = target.join("image/rootfs");
    cmd::step("image: stage the binaries and their libraries", || {
        stage(
            &[
                (target.join("release/stornet-agent"), BIN),
                (target.join("release/stornet"), STORNET),
                (target.join("release/loadgen"), LOADGEN),
            ],
            &staged,
        )
    })?;

    cmd::step("image: commit", || {
        let ctr = stdout(buildah(&target).args(["from", "scratch"]))?;
        let ctr = ctr.trim().to_string();
        // The working container is removed also when a step fails.
        let result = (|| {
            run(buildah(&target).arg("copy").arg(&ctr).arg(&staged).arg("/"))?;
            let source = env!("CARGO_PKG_REPOSITORY");
            let license = env!("CARGO_PKG_LICENSE");
            run(buildah(&target).args([
                "config",
                "--entrypoint",
                &format!("[\"{BIN}\"]"),
                "--port",
                PORT,
                "--os",
                "linux",
                "--created-by",
                "cargo xtask image",
                "--label",
                "org.opencontainers.image.title=stornet-agent",
                "--label",
                &format!("org.opencontainers.image.version={version}"),
                "--label",
                &format!("org.opencontainers.image.source={source}"),
                "--label",
                &format!("org.opencontainers.image.licenses={license}"),
                &ctr,
            ]))?;
            if archive.exists() {
                std::fs::remove_file(&archive)?;
            }
            let mut commit = buildah(&target);
            commit.args(["commit", "--quiet"]);
            // The commit time of the source as the image's creation time: the same source
            // gives the same image metadata.
            if let Some(t) = cmd::output(
                "git",
                &["-C", root.to_str().unwrap(), "log", "-1", "--format=%ct"],
            ) {
                commit.args(["--timestamp", t.trim()]);
            }
            commit
                .arg(&ctr)
                .arg(format!("oci-archive:{}:{tag}", archive.display()));
            run(&mut commit)
        })();
        let removed = run(buildah(&target).args(["rm", &ctr]));
        result.and(removed)
    })?;

    cmd::step(
        "image: run the agent, stornet and loadgen inside it",
        || verify(&archive, &target.join("image/check"), version),
    )?;
    let size = std::fs::metadata(&archive)?.len();
    println!(
        "{} ({:.1} MiB), tag {tag}. Push it with e.g.\n  skopeo copy oci-archive:{} docker://REGISTRY/{tag}",
        archive.display(),
        size as f64 / (1 << 20) as f64,
        archive.display()
    );
    Ok(())
}
