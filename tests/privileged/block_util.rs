//! Shared by the block tests: settled scrapes and reading histograms from samples.

pub use stornet_tests::blockdev::settled;
pub use stornet_tests::metrics::{bucket, count, total};

/// Runs `attempt` up to three times until it passes. On a busy machine the kernel now and
/// then skips a BPF program run (docs/metrics.md), so an exact count can come out one short;
/// a real counting error fails every attempt.
pub fn up_to_three_times(what: &str, mut attempt: impl FnMut() -> anyhow::Result<()>) {
    let mut failures = Vec::new();
    for _ in 0..3 {
        match attempt() {
            Ok(()) => {
                for f in &failures {
                    eprintln!("{what}: an earlier attempt failed: {f:#}");
                }
                return;
            }
            Err(e) => failures.push(e),
        }
    }
    panic!("{what} failed three times: {failures:#?}");
}
