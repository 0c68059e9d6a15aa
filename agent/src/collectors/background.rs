//! Readers too slow for the request path — the network snapshots (netlink, sock_diag and
//! ethtool dumps in every watched namespace), the block topology (a walk of sysfs) and the
//! eBPF maps' fill (a read of every entry) — read
//! on a thread of their own every [`INTERVAL`]; a scrape shows the last read, with how long
//! ago it began (`stornet_scrape_collector_age_seconds`), how long it took and whether it
//! succeeded. What a scrape shows from them is at most one interval plus one read old, so a
//! gone interface or peer leaves the series within that time.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use tracing::warn;

use crate::model::{Collector, MetricFamily, Reading};

/// How often the background readers read.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How long a scrape waits for the first read after start before it goes without.
const FIRST_READ_WAIT: Duration = Duration::from_secs(10);

/// The readers whose reads move off the request path.
pub const NAMES: [&str; 3] = [
    "network_snapshots",
    crate::collectors::BLOCK_TOPOLOGY,
    crate::collectors::MAP_FILL,
];

struct Last {
    families: Arc<Vec<MetricFamily>>,
    error: Option<String>,
    began: Instant,
    took: Duration,
}

#[derive(Default)]
struct State {
    last: Option<Last>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A reader refreshed on its own thread; the thread ends when this is dropped.
pub struct Background {
    name: &'static str,
    shared: Arc<Shared>,
}

impl Background {
    /// `inner` read every `interval` from now on; if no thread can be started, `inner` itself
    /// (read at each scrape).
    pub fn spawn(inner: Box<dyn Collector>, interval: Duration) -> Box<dyn Collector> {
        let name = inner.name();
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        // The reader moves to the thread only once it has started; a failed spawn hands it
        // back.
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn Collector>>();
        let spawned = std::thread::Builder::new()
            .name(format!("read-{name}"))
            .spawn(move || {
                if let Ok(inner) = rx.recv() {
                    refresh(&*inner, &theirs, interval);
                }
            });
        match spawned {
            Ok(_) => {
                let _ = tx.send(inner);
                Box::new(Background { name, shared })
            }
            Err(e) => {
                warn!(collector = name, error = %e, "no thread to read in the background; read at each scrape");
                inner
            }
        }
    }
}

/// Reads `inner` every `interval` (from the start of one read to the next, and at least a
/// tenth of it between reads) until stopped.
fn refresh(inner: &dyn Collector, shared: &Shared, interval: Duration) {
    loop {
        let began = Instant::now();
        let mut families = Vec::new();
        let result = inner.collect(&mut families);
        let took = began.elapsed();
        let mut state = shared.lock();
        state.last = Some(Last {
            families: Arc::new(families),
            error: result.err().map(|e| format!("{e:#}")),
            began,
            took,
        });
        shared.changed.notify_all();
        let next = (began + interval).max(Instant::now() + interval / 10);
        loop {
            if state.stop {
                return;
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            state = shared
                .changed
                .wait_timeout(state, next - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Collector for Background {
    fn name(&self) -> &'static str {
        self.name
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
        let reading = self.read(out);
        out.extend(reading.shared.iter().flat_map(|f| f.iter().cloned()));
        reading.result
    }

    /// The last read, shared: a scrape does not copy its series.
    fn read(&self, _out: &mut Vec<MetricFamily>) -> Reading {
        let deadline = Instant::now() + FIRST_READ_WAIT;
        let mut state = self.shared.lock();
        while state.last.is_none() {
            let now = Instant::now();
            if now >= deadline {
                return Reading {
                    result: Err(anyhow!("no read finished in {FIRST_READ_WAIT:?}")),
                    took: now.duration_since(deadline - FIRST_READ_WAIT),
                    age: None,
                    shared: None,
                };
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let last = state.last.as_ref().expect("a read");
        let (families, took, age) = (Arc::clone(&last.families), last.took, last.began.elapsed());
        let result = match &last.error {
            None => Ok(()),
            Some(e) => Err(anyhow!("{e}")),
        };
        drop(state);
        Reading {
            result,
            took,
            age: Some(age),
            shared: Some(families),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Counts its reads and exports the count; fails on odd reads when asked.
    struct Counting {
        reads: Arc<AtomicU64>,
        fail_odd: bool,
    }

    impl Collector for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }

        fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
            let n = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
            let mut f = MetricFamily::of(&metric_names::agent::START_TIME_SECONDS);
            f.scalar(&[], n as f64);
            out.push(f);
            anyhow::ensure!(!(self.fail_odd && n % 2 == 1), "read {n} failed");
            Ok(())
        }
    }

    fn shown(out: &[MetricFamily]) -> f64 {
        match out[0].series[0].value {
            crate::model::Value::Scalar(v) => v,
            _ => panic!("a scalar"),
        }
    }

    #[test]
    fn a_scrape_shows_the_last_read_and_a_later_scrape_a_later_one() {
        let reads = Arc::new(AtomicU64::new(0));
        let inner = Counting {
            reads: Arc::clone(&reads),
            fail_odd: false,
        };
        let c = Background::spawn(Box::new(inner), Duration::from_millis(20));
        let first = c.read(&mut Vec::new());
        assert!(first.result.is_ok());
        assert!(first.age.is_some());
        let v1 = shown(first.shared.as_ref().expect("shared"));
        assert!(v1 >= 1.0);
        // The reads go on without scrapes; a scrape taken after one more shows it.
        let before = reads.load(Ordering::SeqCst);
        while reads.load(Ordering::SeqCst) < before + 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let later = c.read(&mut Vec::new());
        assert!(shown(later.shared.as_ref().expect("shared")) > v1);
        assert!(later.age.is_some());
        let mut copied = Vec::new();
        c.collect(&mut copied).unwrap();
        assert!(
            shown(&copied) >= shown(later.shared.as_ref().unwrap()),
            "collect copies"
        );
        drop(c);
        // Dropped: the thread stops reading.
        std::thread::sleep(Duration::from_millis(60));
        let stopped = reads.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(reads.load(Ordering::SeqCst), stopped);
    }

    #[test]
    fn a_failed_read_is_a_failed_collection_with_what_it_read() {
        let reads = Arc::new(AtomicU64::new(0));
        let inner = Counting {
            reads,
            fail_odd: true,
        };
        // Long enough that the first read is the one shown.
        let c = Background::spawn(Box::new(inner), Duration::from_secs(60));
        let r = c.read(&mut Vec::new());
        let e = r.result.expect_err("the first read fails");
        assert!(format!("{e:#}").contains("read 1 failed"), "{e:#}");
        assert_eq!(shown(r.shared.as_ref().expect("what it read")), 1.0);
    }
}
