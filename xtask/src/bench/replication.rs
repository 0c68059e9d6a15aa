//! `cargo xtask bench replication`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("benchmark replication is not available in this version")
}
