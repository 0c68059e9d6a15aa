//! Compiles the eBPF programs (`agent-ebpf`, nightly + rust-src + bpf-linker) into OUT_DIR,
//! where `probes.rs` embeds them.

use anyhow::{Context, anyhow};

fn main() -> anyhow::Result<()> {
    revision();
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "agent-ebpf")
        .ok_or_else(|| anyhow!("agent-ebpf package not found in the workspace"))?;
    let root = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("agent-ebpf manifest has no parent"))?;
    // `AYA_BUILD_SKIP=1` (lint and fuzz builds, which never load the probes): aya-build
    // writes nothing, so an empty object stands in and loading it fails with a clear error.
    let skip =
        std::env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR").context("OUT_DIR")?);
        std::fs::write(out.join("stornet"), b"").context("writing the empty eBPF object")?;
    }
    aya_build::build_ebpf(
        [aya_build::Package {
            name: ebpf.name.as_str(),
            root_dir: root.as_str(),
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
    .context(
        "building the eBPF programs (agent-ebpf) failed; it needs the nightly toolchain with \
         rust-src and bpf-linker (`cargo xtask setup` installs them)",
    )
}

/// `STORNET_REVISION` for `stornet_agent_build_info{revision}`: the environment's value (for
/// builds from a source archive), else the git commit, else `unknown`.
fn revision() {
    println!("cargo:rerun-if-env-changed=STORNET_REVISION");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    let revision = std::env::var("STORNET_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    // A commit or checkout moves HEAD's log: the revision is read again then.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/logs/HEAD");
    }
    println!("cargo:rustc-env=STORNET_REVISION={revision}");
}
