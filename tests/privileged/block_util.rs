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

/// Completions of which the agent saw neither the probe run nor the end: the kernel fires
/// `block_rq_complete` for each (an ftrace count of the event equals /sys/block), yet now and
/// then does not run the BPF program for it and counts no miss either (seen on 6.18 with loop
/// devices attached and detached beside a busy one, about 1 in 20,000). The agent finds each
/// such request when its driver tag is dispatched again, still marked, and counts it as
/// `stornet_block_unrecorded_total{reason="unseen_end"}` (docs/metrics.md).
pub fn unseen_ends(s: &[stornet_tests::metrics::Sample]) -> f64 {
    stornet_tests::metrics::sum(
        s,
        "stornet_block_unrecorded_total",
        &[("reason", "unseen_end")],
    )
}

/// Asserts that `counted` IOs of `kernel` (the /sys/block count) are all accounted for: never
/// more than the kernel, and any shortfall covered by what the agent itself reports as not
/// seen (`unseen`: probe runs the kernel skipped, ends found unseen), at most 1 in 5,000.
pub fn assert_accounted(what: &str, counted: f64, unseen: f64, kernel: f64) {
    assert!(
        counted <= kernel,
        "{what}: {counted} counted, more than the kernel's {kernel}"
    );
    assert!(
        counted + unseen >= kernel,
        "{what}: {counted} of {kernel} counted and only {unseen} reported unseen"
    );
    assert!(
        (kernel - counted) * 5000.0 <= kernel.max(5000.0),
        "{what}: {} of {kernel} not counted, more than 1 in 5,000",
        kernel - counted
    );
    if counted < kernel {
        eprintln!(
            "{what}: {counted} of {kernel} counted; the agent reported the other {} as unseen",
            kernel - counted
        );
    }
}
