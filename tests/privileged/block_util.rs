//! Shared by the block tests: settled scrapes and reading histograms from samples.

pub use stornet_lab::attempts::up_to_three_times;
pub use stornet_lab::blockdev::settled;
pub use stornet_lab::metrics::{bucket, count, total};

/// Completions of which the agent saw neither the probe run nor the end: the kernel fires
/// `block_rq_complete` for each (an ftrace count of the event equals /sys/block), yet now and
/// then does not run the BPF program for it and counts no miss either (seen on 6.18 with loop
/// devices attached and detached beside a busy one, about 1 in 20,000). The agent finds each
/// such request when its driver tag is dispatched again, still marked, and counts it as
/// `stornet_block_unrecorded_total{reason="unseen_end"}` (docs/metrics.md).
pub fn unseen_ends(s: &[stornet_lab::metrics::Sample]) -> f64 {
    stornet_lab::metrics::sum(
        s,
        "stornet_block_unrecorded_total",
        &[("reason", "unseen_end")],
    )
}

/// What the agent itself reports as not seen on `device` between two scrapes: ends found
/// unseen (`unseen_ends`, counted for all devices) and requests still counted in flight, whose
/// end may be one not seen yet.
pub fn unseen(
    before: &[stornet_lab::metrics::Sample],
    after: &[stornet_lab::metrics::Sample],
    device: &str,
) -> f64 {
    let left = stornet_lab::metrics::sum(after, "stornet_block_inflight", &[("device", device)]);
    unseen_ends(after) - unseen_ends(before) + left
}

/// Asserts that `counted` IOs of `kernel` (the /sys/block count) are all accounted for: never
/// more than the kernel, and any shortfall covered by the probe runs the kernel says it
/// skipped (`missed`, exact, and on preemptible kernels up to about 1% under heavy load) and
/// by what the agent found unseen itself (`unseen`), the latter at most 1 in 5,000.
pub fn assert_accounted(what: &str, counted: f64, missed: f64, unseen: f64, kernel: f64) {
    assert!(
        counted <= kernel,
        "{what}: {counted} counted, more than the kernel's {kernel}"
    );
    assert!(
        counted + missed + unseen >= kernel,
        "{what}: {counted} of {kernel} counted, {missed} runs skipped by the kernel and only \
         {unseen} reported unseen"
    );
    let beyond_misses = (kernel - counted - missed).max(0.0);
    assert!(
        beyond_misses * 5000.0 <= kernel.max(5000.0),
        "{what}: {beyond_misses} of {kernel} neither counted nor skipped by the kernel, more \
         than 1 in 5,000"
    );
    if counted < kernel {
        eprintln!(
            "{what}: {counted} of {kernel} counted; the kernel skipped {missed} runs, the agent \
             reported {unseen} as unseen"
        );
    }
}
