//! Shared by the block tests: settled scrapes and reading histograms from samples.

use std::time::Duration;

use stornet_tests::blockdev::{DiskStat, LoopDevice};
use stornet_tests::metrics::{Sample, sum};

/// A scrape and the device's sysfs counters, taken while the device was quiet: retried until
/// sysfs reads the same before and after the scrape.
pub fn settled(
    scrape: &dyn Fn() -> anyhow::Result<Vec<Sample>>,
    disk: &LoopDevice,
) -> (Vec<Sample>, DiskStat) {
    disk.settle();
    for _ in 0..50 {
        let before = disk.stat().expect("sysfs stat");
        let samples = scrape().expect("scrape");
        if disk.stat().expect("sysfs stat") == before && before.in_flight == 0 {
            return (samples, before);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{} did not go quiet", disk.name);
}

/// `<metric>_count` of a histogram series.
pub fn count(s: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    sum(s, &format!("{metric}_count"), labels)
}

/// `<metric>_sum` of a histogram series.
pub fn total(s: &[Sample], metric: &str, labels: &[(&str, &str)]) -> f64 {
    sum(s, &format!("{metric}_sum"), labels)
}

/// The cumulative count of bucket `le` (a bound of the exported set) of a histogram series;
/// 0 where the series does not exist (yet).
pub fn bucket(s: &[Sample], metric: &str, labels: &[(&str, &str)], le: &str) -> f64 {
    let name = format!("{metric}_bucket");
    let series = s
        .iter()
        .any(|x| x.name == name && labels.iter().all(|(k, v)| x.label(k) == Some(*v)));
    if !series {
        return 0.0;
    }
    let found: Vec<&Sample> = s
        .iter()
        .filter(|x| {
            x.name == name
                && x.label("le") == Some(le)
                && labels.iter().all(|(k, v)| x.label(k) == Some(*v))
        })
        .collect();
    assert!(
        !found.is_empty(),
        "no bucket le={le} of {metric} {labels:?}"
    );
    found.iter().map(|x| x.value).sum()
}

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
