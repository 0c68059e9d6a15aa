//! Compiles the eBPF programs (`agent-ebpf`, nightly + rust-src + bpf-linker) into OUT_DIR,
//! where `probes.rs` embeds them.

use anyhow::{Context, anyhow};

fn main() -> anyhow::Result<()> {
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
