//! fio's steady state: once a second, the IOPS and bandwidth of each job (of each reporting
//! group with group_reporting) over the second just past go into a window of `ss_dur`
//! samples; once the window is full, the criterion is judged after every sample, and when it
//! falls below its limit the job (the group) stops, as fio's `steadystate_check`. Sampling
//! starts `ss_ramp` after the job's ramp ends.

use std::collections::VecDeque;

use record::steadystate::{Settings, SteadyState};

use super::JobLive;

const SECOND: u64 = 1_000_000_000;

/// The steady state of one job, or of the jobs of one reporting group.
struct Unit {
    settings: Settings,
    members: Vec<usize>,
    /// When the next sample is due; the previous sample's time and counts (None: the
    /// baseline is not taken yet).
    due: u64,
    prev: Option<(u64, u64, u64)>,
    window: VecDeque<(u64, u64)>,
    found: SteadyState,
}

pub struct Monitor {
    units: Vec<Unit>,
}

impl Monitor {
    /// `jobs`: each job thread's settings (None: no steady state) and the key it is judged
    /// under (threads with one key are judged together); `measure_start`: when the ramp ends.
    pub fn new(jobs: &[(Option<Settings>, usize)], measure_start: u64) -> Monitor {
        let mut units: Vec<(usize, Unit)> = Vec::new();
        for (i, (s, key)) in jobs.iter().enumerate() {
            let Some(s) = s else { continue };
            if let Some((_, u)) = units.iter_mut().find(|(k, _)| k == key) {
                u.members.push(i);
                continue;
            }
            units.push((
                *key,
                Unit {
                    settings: *s,
                    members: vec![i],
                    due: measure_start + s.ramp_ns,
                    prev: None,
                    window: VecDeque::new(),
                    found: SteadyState {
                        criterion: s.criterion,
                        dur_s: s.dur_s,
                        ..Default::default()
                    },
                },
            ));
        }
        Monitor {
            units: units.into_iter().map(|(_, u)| u).collect(),
        }
    }

    /// When the next sample of any unit is due (None: nothing to watch).
    pub fn next_due(&self) -> Option<u64> {
        self.units
            .iter()
            .filter(|u| !u.found.attained)
            .map(|u| u.due)
            .min()
    }

    /// Takes the samples due at `now` from the jobs' live counters (`finished`: jobs that
    /// have ended are not sampled); the jobs whose steady state was just attained.
    pub fn poll(&mut self, now: u64, live: &[JobLive], finished: &[bool]) -> Vec<usize> {
        let mut stop = Vec::new();
        for u in &mut self.units {
            if u.found.attained || now < u.due || u.members.iter().all(|&m| finished[m]) {
                continue;
            }
            let (ios, bytes) = u.members.iter().fold((0, 0), |(i, b), &m| {
                (
                    i + live[m].ios(0) + live[m].ios(1),
                    b + live[m].bytes(0) + live[m].bytes(1),
                )
            });
            u.due = now + SECOND;
            let Some((t, pi, pb)) = u.prev.replace((now, ios, bytes)) else {
                continue;
            };
            // Per second over the time that really passed, as fio's.
            let ms = ((now - t) / 1_000_000).max(1);
            let per_s = |n: u64| n.saturating_mul(1000) / ms;
            u.window.push_back((
                per_s(ios.saturating_sub(pi)),
                per_s(bytes.saturating_sub(pb)),
            ));
            if u.window.len() > u.settings.dur_s as usize {
                u.window.pop_front();
            }
            if u.window.len() == u.settings.dur_s as usize && judge(u) {
                u.found.attained = true;
                stop.extend(&u.members);
            }
        }
        stop
    }

    /// What each of `n` jobs' steady state found (a group's, for each of its jobs).
    pub fn results(&self, n: usize) -> Vec<Option<SteadyState>> {
        let mut out = vec![None; n];
        for u in &self.units {
            let mut found = u.found.clone();
            found.iops = u.window.iter().map(|s| s.0).collect();
            found.bw = u.window.iter().map(|s| s.1).collect();
            for &m in &u.members {
                out[m] = Some(found.clone());
            }
        }
        out
    }
}

/// Judges a full window as fio does; true when the criterion is below its limit.
fn judge(u: &mut Unit) -> bool {
    let c = u.settings.criterion;
    let ys: Vec<f64> = u
        .window
        .iter()
        .map(|&(i, b)| if c.iops { i } else { b } as f64)
        .collect();
    let n = ys.len() as f64;
    let mean = ys.iter().sum::<f64>() / n;
    let value = if c.slope {
        // Least squares over x = 0, 1, … (samples a second apart, oldest first).
        let sum_x = n * (n - 1.0) / 2.0;
        let sum_x2 = (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
        let sum_xy: f64 = ys.iter().enumerate().map(|(x, y)| x as f64 * y).sum();
        let sum_y = mean * n;
        let slope = (sum_xy - sum_x * sum_y / n) / (sum_x2 - sum_x * sum_x / n);
        u.found.slope = slope;
        slope
    } else {
        let dev = ys.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max);
        u.found.max_deviation = dev;
        dev
    };
    u.found.value = if c.pct { 100.0 * value / mean } else { value };
    u.found.value.abs() < c.limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use record::steadystate::Criterion;

    fn live(n: usize) -> Vec<JobLive> {
        (0..n).map(|_| JobLive::default()).collect()
    }

    fn settings(iops: bool, slope: bool, limit: f64, pct: bool, dur_s: u32) -> Settings {
        Settings {
            criterion: Criterion {
                iops,
                slope,
                limit,
                pct,
            },
            dur_s,
            ramp_ns: 0,
        }
    }

    /// Feeds one job IOPS per second from `rates`; the second at which it stopped.
    fn run(s: Settings, rates: &[u64]) -> (Option<usize>, SteadyState) {
        let l = live(1);
        let mut m = Monitor::new(&[(Some(s), 0)], 0);
        let mut ios = 0;
        assert!(m.poll(0, &l, &[false]).is_empty());
        for (k, r) in rates.iter().enumerate() {
            ios += r;
            l[0].publish(1, ios, ios * 4096);
            if !m.poll((k as u64 + 1) * SECOND, &l, &[false]).is_empty() {
                return (Some(k + 1), m.results(1)[0].clone().unwrap());
            }
        }
        (None, m.results(1)[0].clone().unwrap())
    }

    #[test]
    fn deviation_within_the_limit_over_a_full_window_stops() {
        // iops:10%: the window of 3 must hold values within 10% of its mean.
        let (at, f) = run(
            settings(true, false, 10.0, true, 3),
            &[10, 100, 100, 104, 96],
        );
        assert_eq!(at, Some(4));
        assert!(f.attained);
        assert_eq!(f.iops, [100, 100, 104]);
        assert_eq!(f.bw, [409_600, 409_600, 425_984]);
        assert!((f.max_deviation - 8.0 / 3.0).abs() < 1e-9, "{f:?}");
        let (at, f) = run(settings(true, false, 1.0, false, 3), &[100, 110, 120, 130]);
        assert_eq!(at, None);
        assert!(!f.attained);
        assert_eq!(f.value, 10.0);
    }

    #[test]
    fn a_slope_below_the_limit_stops_a_rising_one_does_not() {
        let s = settings(false, true, 1.0, true, 4);
        let (at, f) = run(s, &[100, 200, 300, 400, 500]);
        assert_eq!(at, None);
        // The slope of 100, 200, …: 100 IOPS a second, of 4 KiB.
        assert_eq!(f.slope, 409_600.0);
        let (at, f) = run(s, &[100, 200, 300, 300, 300, 300, 300]);
        assert_eq!(at, Some(6));
        assert_eq!(f.slope, 0.0);
        assert_eq!(f.bw.len(), 4);
    }

    #[test]
    fn a_group_is_judged_on_its_jobs_together_and_stops_together() {
        let l = live(3);
        let s = settings(true, false, 5.0, true, 2);
        // Jobs 0 and 2 form one group; job 1 has no steady state.
        let mut m = Monitor::new(&[(Some(s), 7), (None, 1), (Some(s), 7)], 0);
        m.poll(0, &l, &[false; 3]);
        for k in 1..=2u64 {
            l[0].publish(0, 50 * k, 0);
            l[2].publish(0, 150 * k, 0);
            l[1].publish(0, 999 * k * k, 0);
            let stop = m.poll(k * SECOND, &l, &[false; 3]);
            assert_eq!(stop, if k == 2 { vec![0, 2] } else { vec![] });
        }
        let r = m.results(3);
        assert_eq!(r[0].as_ref().unwrap().iops, [200, 200]);
        assert_eq!(r[0], r[2]);
        assert!(r[1].is_none());
    }

    #[test]
    fn sampling_starts_after_ss_ramp() {
        let l = live(1);
        let mut s = settings(true, false, 5.0, true, 2);
        s.ramp_ns = 3 * SECOND;
        let mut m = Monitor::new(&[(Some(s), 0)], SECOND);
        assert_eq!(m.next_due(), Some(4 * SECOND));
        l[0].publish(0, 1000, 0);
        assert!(m.poll(2 * SECOND, &l, &[false]).is_empty());
        m.poll(4 * SECOND, &l, &[false]);
        assert_eq!(m.next_due(), Some(5 * SECOND));
        l[0].publish(0, 1100, 0);
        m.poll(5 * SECOND, &l, &[false]);
        assert_eq!(m.results(1)[0].as_ref().unwrap().iops, [100]);
    }
}
