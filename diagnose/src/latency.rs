//! A load generator's own measurements, as a run record keeps them, as the analysis reads
//! them: per direction and interval the IOPS, p50, p99 and mean latency (from each IO's
//! intended start), the interval's histogram, and the split into local device time and each
//! replica's round trip.

use analysis::{BucketHistogram, Latency, Series};

use crate::signals::replica_address;
use record::histogram::Histogram;
use record::timeline::{DirRow, TimelineRow};

/// Buckets per power of two of the recorded interval histograms (9% apart).
const PER_OCTAVE: i32 = 8;
/// From 1 µs to about 134 s.
const OCTAVES: i32 = 27;

/// Bounds of every recorded interval histogram, in seconds (one layout, so they merge).
pub fn bounds() -> Vec<f64> {
    (0..=PER_OCTAVE * OCTAVES)
        .map(|k| 1e-6 * 2f64.powf(k as f64 / PER_OCTAVE as f64))
        .collect()
}

/// loadgen's fine histogram (nanoseconds) in the analysis layout; `None` when empty.
pub fn convert(h: &Histogram, bounds: &[f64]) -> Option<BucketHistogram> {
    if h.count() == 0 {
        return None;
    }
    let mut counts = vec![0u64; bounds.len() + 1];
    for (lo, width, c) in h.buckets() {
        let mid = (lo as f64 + width as f64 / 2.0) / 1e9;
        let i = bounds.partition_point(|b| *b < mid);
        counts[i] += c;
    }
    Some(BucketHistogram {
        bounds_seconds: bounds.to_vec(),
        counts,
    })
}

fn dir(row: &TimelineRow, read: bool) -> &DirRow {
    if read { &row.read } else { &row.write }
}

fn secs(ns: f64, n: u64) -> Option<f64> {
    (n > 0).then_some(ns / 1e9)
}

/// The latency of one direction over a point's timeline; `None` when the direction saw no
/// IO. `histograms` holds the interval histograms, one per row (or none).
pub fn latency(
    rows: &[TimelineRow],
    read: bool,
    histograms: &[Option<BucketHistogram>],
) -> Option<Latency> {
    if !rows.iter().any(|r| dir(r, read).ios > 0) {
        return None;
    }
    let each = |f: &dyn Fn(&DirRow) -> Option<f64>| -> Series {
        rows.iter().map(|r| f(dir(r, read))).collect()
    };
    let legs: Vec<String> = rows
        .iter()
        .flat_map(|r| dir(r, read).legs.iter().map(|l| l.name.clone()))
        .fold(Vec::new(), |mut acc, n| {
            if !acc.contains(&n) {
                acc.push(n);
            }
            acc
        });
    let leg_mean = |name: &str| -> Series {
        each(&|d| {
            let l = d.legs.iter().find(|l| l.name == name)?;
            secs(l.lat_ns.mean, l.lat_ns.n)
        })
    };
    // Without legs every IO is local: its device time is submission to completion.
    let local = match legs.first() {
        Some(first) => leg_mean(first),
        None => each(&|d| secs(d.clat_ns.mean, d.clat_ns.n)),
    };
    let mut lat = Latency {
        iops: each(&|d| Some(d.iops)),
        p50_seconds: each(&|d| secs(d.lat_ns.p50 as f64, d.lat_ns.n)),
        p99_seconds: each(&|d| secs(d.lat_ns.p99 as f64, d.lat_ns.n)),
        mean_seconds: each(&|d| secs(d.lat_ns.mean, d.lat_ns.n)),
        histograms: if histograms.len() == rows.len() {
            histograms.to_vec()
        } else {
            Vec::new()
        },
        local_device_seconds: local,
        ..Latency::default()
    };
    // A stall: the latency of its rows is the wait of the IOs in flight so far.
    for (i, wait) in stalled_waits(rows).into_iter().enumerate() {
        if let Some(w) = wait {
            for s in [
                &mut lat.p50_seconds,
                &mut lat.p99_seconds,
                &mut lat.mean_seconds,
                &mut lat.local_device_seconds,
            ] {
                s[i] = Some(w);
            }
        }
    }
    for name in legs.iter().skip(1) {
        let s = leg_mean(name);
        if s.iter().any(Option::is_some) {
            lat.replicas.insert(replica_address(name), s);
        }
    }
    Some(lat)
}

/// IOs in flight for at least half of this many of a row's seconds make an interval without
/// completions a stall rather than an idle one.
const STALLED_DEPTH: f64 = 0.5;

/// Per row, in rows where IOs were in flight and none completed in either direction (a
/// stall: a server that stopped answering, a path that drops what is sent), how long the
/// IOs in flight have waited at least: since the first row of that stall. Such a row has no
/// completed IO to measure, yet its latency is that wait, not unknown; the IOs complete
/// later with all of it (or never). `None` elsewhere.
fn stalled_waits(rows: &[TimelineRow]) -> Vec<Option<f64>> {
    let mut waited = 0.0;
    rows.iter()
        .map(|r| {
            let stalled = r.read.ios + r.write.ios == 0 && r.queue_depth >= STALLED_DEPTH;
            waited = if stalled { waited + r.duration_s } else { 0.0 };
            stalled.then_some(waited)
        })
        .collect()
}

/// The share of the point's IO slots (`slots`: the jobs' queue depths added up) in use in
/// each row: its mean IOs in flight over the slots; empty when the slots are unknown.
pub fn slots_in_use(rows: &[TimelineRow], slots: u32) -> Series {
    if slots == 0 {
        return Series::new();
    }
    rows.iter()
        .map(|r| Some((r.queue_depth / slots as f64).min(1.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::timeline::LegRow;

    fn hist(values_ns: &[u64]) -> Histogram {
        let mut h = Histogram::new();
        for &v in values_ns {
            h.record(v);
        }
        h
    }

    #[test]
    fn conversion_keeps_counts_and_percentiles_close() {
        let b = bounds();
        let mut values: Vec<u64> = (1..=990).map(|i| 100_000 + i * 100).collect();
        values.extend([50_000_000; 10]);
        let h = hist(&values);
        let a = convert(&h, &b).unwrap();
        assert_eq!(a.total(), 1000);
        assert!(a.is_well_formed());
        let p99 = a.quantile(0.995).unwrap();
        assert!((p99 / 0.05 - 1.0).abs() < 0.1, "{p99}");
        let p50 = a.quantile(0.5).unwrap();
        assert!((p50 / 0.00015 - 1.0).abs() < 0.1, "{p50}");
        assert_eq!(convert(&Histogram::new(), &b), None);
    }

    fn row(ios: u64, lat_ns: &[u64], legs: &[(&str, f64, u64)]) -> TimelineRow {
        let h = hist(lat_ns);
        let mut r = TimelineRow::default();
        r.write.ios = ios;
        r.write.iops = ios as f64;
        r.write.lat_ns = h.summary();
        r.write.clat_ns = h.summary();
        r.write.legs = legs
            .iter()
            .map(|(n, mean, count)| LegRow {
                name: n.to_string(),
                lat_ns: record::histogram::Summary {
                    n: *count,
                    mean: *mean,
                    ..Default::default()
                },
            })
            .collect();
        r
    }

    #[test]
    fn legs_split_local_device_and_replicas() {
        let rows = vec![
            row(
                2,
                &[1_000_000, 3_000_000],
                &[
                    ("local", 500_000.0, 2),
                    ("replica 198.18.0.2:7000", 2_000_000.0, 2),
                ],
            ),
            row(
                0,
                &[],
                &[("local", 0.0, 0), ("replica 198.18.0.2:7000", 0.0, 0)],
            ),
        ];
        let l = latency(&rows, false, &[]).unwrap();
        assert_eq!(l.iops, vec![Some(2.0), Some(0.0)]);
        assert_eq!(l.mean_seconds, vec![Some(0.002), None], "no IO: no latency");
        assert_eq!(l.local_device_seconds, vec![Some(0.0005), None]);
        assert_eq!(l.replicas["198.18.0.2"], vec![Some(0.002), None]);
        assert!(latency(&rows, true, &[]).is_none(), "no reads");
    }

    #[test]
    fn rows_without_completions_while_ios_wait_carry_the_wait_so_far() {
        let mut rows = vec![TimelineRow::default(); 5];
        for (i, r) in rows.iter_mut().enumerate() {
            r.duration_s = 1.0;
            r.queue_depth = 4.0;
            if i == 0 || i == 3 {
                r.write.ios = 10;
                r.write.lat_ns.n = 10;
                r.write.lat_ns.mean = 2e6;
                r.write.lat_ns.p50 = 2_000_000;
                r.write.lat_ns.p99 = 3_000_000;
                r.write.clat_ns.n = 10;
                r.write.clat_ns.mean = 2e6;
            }
        }
        // The last row has nothing in flight: idle, not stalled.
        rows[4].queue_depth = 0.0;
        let l = latency(&rows, false, &[]).unwrap();
        assert_eq!(
            l.p99_seconds,
            vec![Some(0.003), Some(1.0), Some(2.0), Some(0.003), None]
        );
        assert_eq!(l.mean_seconds[2], Some(2.0));
        assert_eq!(l.local_device_seconds[1], Some(1.0));
        assert_eq!(l.iops[1], Some(0.0));
        // A direction without IO has no latency, stall or not.
        assert!(latency(&rows, true, &[]).is_none());
    }

    #[test]
    fn slots_in_use_are_the_queue_depth_over_the_slots() {
        let mut rows = vec![TimelineRow::default(), TimelineRow::default()];
        rows[0].queue_depth = 3.0;
        rows[1].queue_depth = 4.0;
        assert_eq!(slots_in_use(&rows, 4), vec![Some(0.75), Some(1.0)]);
        assert!(slots_in_use(&rows, 0).is_empty());
    }

    #[test]
    fn without_legs_the_device_time_is_completion_latency() {
        let rows = vec![row(1, &[4_000_000], &[])];
        let l = latency(&rows, false, &[None]).unwrap();
        assert!((l.local_device_seconds[0].unwrap() - 0.004).abs() < 1e-4);
        assert!(l.replicas.is_empty());
        assert_eq!(l.histograms, vec![None]);
    }
}
