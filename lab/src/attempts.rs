//! Exact counts on a busy host: the kernel now and then skips a BPF program run without
//! counting a miss (docs/metrics.md), so an exact count can come out one short. A test that
//! compares counts gets three attempts; a real counting error fails every one of them.

/// Runs `attempt` up to three times until it passes; panics with every failure otherwise.
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
