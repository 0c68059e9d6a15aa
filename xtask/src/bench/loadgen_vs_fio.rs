//! `cargo xtask bench loadgen-vs-fio`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("benchmark loadgen-vs-fio is not available in this version")
}
