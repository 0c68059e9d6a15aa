//! `cargo xtask bench block-overhead`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("benchmark block-overhead is not available in this version")
}
