//! From scrapes at interval boundaries to per-interval values: counters become the
//! increase within each interval, gauges their value at its end. A missing scrape, a
//! counter that went down (reset) or an agent restart make the interval missing, never
//! zero.

use diagnose::signals::{Field, Key, MetricType, Reading, Values, family_of};

/// Accumulates readings taken at consecutive boundaries; boundary `k` closes interval
/// `k - 1`.
#[derive(Clone, Default)]
pub struct Deltas {
    /// The reading at the last boundary (`None` inside: that scrape failed); `None` before
    /// the first boundary.
    prev: Option<Option<Reading>>,
    /// Per closed interval: both boundaries were read and the agent did not restart.
    ok: Vec<bool>,
    series: Values,
}

impl Deltas {
    pub fn new() -> Deltas {
        Deltas::default()
    }

    /// Intervals closed so far.
    pub fn intervals(&self) -> usize {
        self.ok.len()
    }

    /// Adds the reading of the next boundary (`None`: no sample there).
    pub fn push(&mut self, cur: Option<Reading>) {
        let Some(prev) = self.prev.replace(cur.clone()) else {
            return;
        };
        let i = self.ok.len();
        let (Some(p), Some(c)) = (prev, cur) else {
            self.ok.push(false);
            for s in self.series.values_mut() {
                s.push(None);
            }
            return;
        };
        let start = Key::new(Field::AgentStart, &[]);
        let restarted = matches!((p.get(&start), c.get(&start)), (Some(a), Some(b)) if a != b);
        let before_ok = self.ok.clone();
        self.ok.push(!restarted);
        let keys: Vec<Key> = p
            .keys()
            .chain(c.keys())
            .chain(self.series.keys())
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for key in keys {
            let fam = family_of(key.field);
            let value = match fam.kind {
                MetricType::Gauge => c.get(&key).copied(),
                MetricType::Counter { .. } if restarted => None,
                MetricType::Counter { born_at_zero } => {
                    let before = p.get(&key).copied().or(born_at_zero.then_some(0.0));
                    match (before, c.get(&key).copied()) {
                        (Some(b), Some(a)) if a >= b => Some(a - b),
                        _ => None,
                    }
                }
            };
            let s = self.series.entry(key).or_insert_with(|| match fam.kind {
                // A series the agent creates at its first event was 0 before it appeared.
                MetricType::Counter { born_at_zero: true } => {
                    before_ok.iter().map(|&ok| ok.then_some(0.0)).collect()
                }
                _ => vec![None; i],
            });
            s.push(value);
        }
    }

    /// The per-interval values as `n` intervals: intervals closed beyond the `n`-th (the
    /// last scrape came after more boundaries had passed) fold into the last one, counters
    /// adding up and gauges keeping their latest value; missing ones are padded.
    pub fn finish(mut self, n: usize) -> Values {
        for (key, s) in self.series.iter_mut() {
            if n > 0 && s.len() > n {
                let tail: Vec<Option<f64>> = s.drain(n - 1..).collect();
                let folded = match family_of(key.field).kind {
                    MetricType::Gauge => tail.last().copied().flatten(),
                    MetricType::Counter { .. } => tail.iter().copied().sum::<Option<f64>>(),
                };
                s.push(folded);
            }
            s.resize(n, None);
        }
        self.series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(pairs: &[(Key, f64)]) -> Option<Reading> {
        Some(pairs.iter().cloned().collect())
    }

    fn retrans() -> Key {
        Key::new(Field::TcpRetransmits, &["198.18.0.2"])
    }
    fn ifdrops() -> Key {
        Key::new(Field::InterfaceRxDrops, &["host", "eth0"])
    }
    fn inflight() -> Key {
        Key::new(Field::BlockInflight, &["loop3"])
    }
    fn start(t: f64) -> (Key, f64) {
        (Key::new(Field::AgentStart, &[]), t)
    }

    #[test]
    fn counters_become_increases_and_gauges_end_values() {
        let mut d = Deltas::new();
        d.push(reading(&[(retrans(), 10.0), (inflight(), 3.0)]));
        d.push(reading(&[(retrans(), 15.0), (inflight(), 7.0)]));
        d.push(reading(&[(retrans(), 15.0), (inflight(), 1.0)]));
        assert_eq!(d.intervals(), 2);
        let v = d.finish(2);
        assert_eq!(v[&retrans()], vec![Some(5.0), Some(0.0)]);
        assert_eq!(v[&inflight()], vec![Some(7.0), Some(1.0)]);
    }

    #[test]
    fn a_missing_scrape_leaves_both_of_its_intervals_missing() {
        let mut d = Deltas::new();
        d.push(reading(&[(retrans(), 1.0)]));
        d.push(reading(&[(retrans(), 2.0)]));
        d.push(None);
        d.push(reading(&[(retrans(), 9.0)]));
        d.push(reading(&[(retrans(), 10.0)]));
        let v = d.finish(4);
        assert_eq!(v[&retrans()], vec![Some(1.0), None, None, Some(1.0)]);
    }

    #[test]
    fn a_counter_reset_or_agent_restart_is_missing_not_negative() {
        let mut d = Deltas::new();
        d.push(reading(&[(ifdrops(), 100.0), start(1.0)]));
        d.push(reading(&[(ifdrops(), 40.0), start(1.0)]));
        d.push(reading(&[(ifdrops(), 45.0), start(1.0)]));
        // The agent restarted: its counters start again, gauges still count.
        d.push(reading(&[(ifdrops(), 50.0), (inflight(), 2.0), start(2.0)]));
        d.push(reading(&[(ifdrops(), 52.0), (inflight(), 2.0), start(2.0)]));
        let v = d.finish(4);
        assert_eq!(v[&ifdrops()], vec![None, Some(5.0), None, Some(2.0)]);
        assert_eq!(v[&inflight()], vec![None, None, Some(2.0), Some(2.0)]);
    }

    #[test]
    fn a_series_born_mid_run_counts_from_zero_only_when_the_agent_creates_it() {
        let mut d = Deltas::new();
        d.push(reading(&[start(1.0)]));
        d.push(reading(&[start(1.0)]));
        d.push(None);
        d.push(reading(&[start(1.0)]));
        // First retransmits and a first sight of an interface (kernel counter with history).
        d.push(reading(&[
            (retrans(), 4.0),
            (ifdrops(), 1000.0),
            start(1.0),
        ]));
        d.push(reading(&[
            (retrans(), 6.0),
            (ifdrops(), 1003.0),
            start(1.0),
        ]));
        let v = d.finish(5);
        assert_eq!(
            v[&retrans()],
            vec![Some(0.0), None, None, Some(4.0), Some(2.0)]
        );
        assert_eq!(v[&ifdrops()], vec![None, None, None, None, Some(3.0)]);
    }

    #[test]
    fn a_vanished_series_is_missing_and_finish_cuts_or_pads() {
        let mut d = Deltas::new();
        d.push(reading(&[(retrans(), 1.0), (inflight(), 1.0)]));
        d.push(reading(&[(retrans(), 2.0)]));
        d.push(reading(&[(retrans(), 3.0)]));
        let v = d.finish(3);
        assert_eq!(v[&retrans()], vec![Some(1.0), Some(1.0), None]);
        assert_eq!(v[&inflight()], vec![None, None, None]);
    }

    #[test]
    fn intervals_past_the_end_fold_into_the_last_one() {
        let mut d = Deltas::new();
        for (r, q) in [(0.0, 1.0), (5.0, 2.0), (7.0, 3.0), (10.0, 4.0)] {
            d.push(reading(&[(retrans(), r), (inflight(), q)]));
        }
        let v = d.finish(2);
        // IOs completing after the last boundary still belong to the last interval.
        assert_eq!(v[&retrans()], vec![Some(5.0), Some(5.0)]);
        assert_eq!(v[&inflight()], vec![Some(2.0), Some(4.0)]);
    }
}
