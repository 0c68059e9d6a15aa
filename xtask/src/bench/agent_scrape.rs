//! `cargo xtask bench agent-scrape`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("benchmark agent-scrape is not available in this version")
}
