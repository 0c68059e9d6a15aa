//! `cargo xtask bench net-overhead`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("benchmark net-overhead is not available in this version")
}
