//! Exact counts on a busy host: the kernel now and then skips a BPF program run without
//! counting a miss (docs/metrics.md), so an exact count can come out one short. A test that
//! compares counts gets three attempts; a real counting error fails every one of them. And
//! teardowns that a device still busy for a moment refuses, retried.

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

/// Retries a teardown step that fails while a device is still busy (open for a moment after
/// its user closed it): up to 20 times, 100 ms apart; says so when it never succeeds.
pub fn tear_down(what: &str, mut step: impl FnMut() -> anyhow::Result<()>) {
    for _ in 0..20 {
        if step().is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eprintln!("could not {what}");
}
