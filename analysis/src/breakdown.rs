//! Where a direction's latency goes: the local device (above the block layer, queue,
//! service) and each replica's round trip, as mean seconds per IO in each interval.

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Host, Series};
use crate::series::{at, mean_over, measured, sum_over};
use crate::thresholds::Thresholds;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    /// The local IO as the application sees it (or queue + service when that is unknown).
    LocalDevice,
    /// Local device time not spent in the block layer: throttling, tag waits, submission.
    AboveBlock,
    /// Block-layer queue time.
    Queue,
    /// Device service time.
    Service,
    /// Round trip to one replica.
    Replica,
}

/// One part's series.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub kind: PartKind,
    /// Devices (comma separated) or the replica's address.
    pub key: String,
    pub series: Series,
}

/// The parts of one direction on one host.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parts {
    /// Mean latency per IO, when recorded.
    pub total: Option<Series>,
    pub parts: Vec<Part>,
    /// The devices the local IO was matched to.
    pub devices: Vec<String>,
    /// The application split its latency into local device time and replica round trips,
    /// so a peer without a part here has no share in the latency.
    pub complete: bool,
    /// Mean time per IO before submission in intervals where every IO slot of the
    /// application was busy (open-loop backlog); none where the slots were not all busy.
    pub slot_wait: Option<Series>,
}

/// A part's place in the latency: its rise (raised intervals against the others) or its
/// mean (whole run), and that as a share of the latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartShare {
    pub part: PartKind,
    pub key: String,
    /// Mean per IO outside the raised intervals (absent when judging the whole run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_seconds: Option<f64>,
    /// Mean per IO in the raised intervals, or over the whole run.
    pub seconds: f64,
    /// Share of the latency rise (or of the latency), 0..=1.
    pub share: f64,
}

impl Parts {
    /// [`Parts::build_with`] with the default thresholds.
    pub fn build(host: &Host, d: Direction, n: usize) -> Parts {
        Parts::build_with(host, d, n, &Thresholds::default())
    }

    pub fn build_with(host: &Host, d: Direction, n: usize, t: &Thresholds) -> Parts {
        let Some(lat) = host.latency(d) else {
            return Parts::default();
        };
        let devices = local_devices(host, d);
        let ops: Vec<_> = devices
            .iter()
            .filter_map(|name| host.devices.get(name)?.ops.get(d.op()))
            .collect();
        let weighted = |pick: fn(&crate::model::BlockOp) -> &Series| -> Option<Series> {
            let s: Series = (0..n)
                .map(|i| {
                    let mut acc = (0.0, 0.0);
                    for op in &ops {
                        if let Some(v) = at(pick(op), i) {
                            let w = at(&op.ios, i).unwrap_or(1.0);
                            acc = (acc.0 + v * w, acc.1 + w);
                        }
                    }
                    (acc.1 > 0.0).then(|| acc.0 / acc.1)
                })
                .collect();
            measured(&s).then_some(s)
        };
        let queue = weighted(|o| &o.queue_seconds);
        let service = weighted(|o| &o.service_seconds);
        let local = measured(&lat.local_device_seconds).then(|| lat.local_device_seconds.clone());
        // A bio-based device (dm, md) has no queue time of its own: its service time is all
        // of its block-layer time.
        let block = match (&queue, &service) {
            (Some(q), Some(s)) => Some(zip(q, s, n, |q, s| Some(q + s))),
            (None, Some(s)) => Some(s.clone()),
            _ => None,
        };
        let key = devices.join(",");
        let mut parts = Vec::new();
        if let Some(dev) = local.clone().or(block.clone()) {
            parts.push(Part {
                kind: PartKind::LocalDevice,
                key: key.clone(),
                series: dev,
            });
        }
        if let (Some(l), Some(b)) = (&local, &block) {
            let above = zip(l, b, n, |l, b| Some((l - b).max(0.0)));
            parts.push(Part {
                kind: PartKind::AboveBlock,
                key: key.clone(),
                series: above,
            });
        }
        for (kind, s) in [(PartKind::Queue, queue), (PartKind::Service, service)] {
            if let Some(series) = s {
                parts.push(Part {
                    kind,
                    key: key.clone(),
                    series,
                });
            }
        }
        for (peer, s) in &lat.replicas {
            if measured(s) {
                parts.push(Part {
                    kind: PartKind::Replica,
                    key: peer.clone(),
                    series: s.clone(),
                });
            }
        }
        let mut p = Parts {
            total: measured(&lat.mean_seconds).then(|| lat.mean_seconds.clone()),
            parts,
            devices,
            complete: local.is_some(),
            slot_wait: None,
        };
        p.charge_slot_wait(lat, n, t);
        p
    }

    /// An IO that waits for a free slot (every slot busy, with a fixed IO rate) waits for
    /// the IOs in flight: that wait belongs to the parts that held them. In such intervals
    /// the latency the shares are taken of is the time from submission, the largest part,
    /// and the wait before it is kept apart for the evidence.
    fn charge_slot_wait(&mut self, lat: &crate::model::Latency, n: usize, t: &Thresholds) {
        let Some(total) = &self.total else { return };
        let mut wait: Series = vec![None; n];
        let mut adjusted = total.clone();
        for i in 0..n {
            let full = at(&lat.slots_in_use, i).is_some_and(|s| s >= t.slots_full);
            let top = self
                .top_level()
                .filter_map(|p| at(&p.series, i))
                .reduce(f64::max);
            if let (true, Some(all), Some(top)) = (full, at(total, i), top)
                && all > top
            {
                wait[i] = Some(all - top);
                adjusted[i] = Some(top);
            }
        }
        if measured(&wait) {
            self.total = Some(adjusted);
            self.slot_wait = Some(wait);
        }
    }

    pub fn get(&self, kind: PartKind) -> Option<&Part> {
        self.parts.iter().find(|p| p.kind == kind)
    }

    pub fn replicas(&self) -> impl Iterator<Item = &Part> {
        self.parts.iter().filter(|p| p.kind == PartKind::Replica)
    }

    /// Parts that run side by side and make up the latency: the local device, replicas.
    fn top_level(&self) -> impl Iterator<Item = &Part> {
        self.parts
            .iter()
            .filter(|p| matches!(p.kind, PartKind::LocalDevice | PartKind::Replica))
    }

    /// Shares of the rise in `raised` against `others`.
    pub fn rise_shares(&self, raised: &[usize], others: &[usize]) -> Vec<PartShare> {
        let rise = |s: &Series| Some(mean_over(s, raised)? - mean_over(s, others)?);
        let total_rise = self.total.as_ref().and_then(rise).unwrap_or(0.0);
        let denom = self
            .top_level()
            .filter_map(|p| rise(&p.series))
            .fold(total_rise, f64::max);
        if denom <= 0.0 {
            return Vec::new();
        }
        self.parts
            .iter()
            .filter_map(|p| {
                let (during, before) =
                    (mean_over(&p.series, raised)?, mean_over(&p.series, others)?);
                Some(PartShare {
                    part: p.kind,
                    key: p.key.clone(),
                    baseline_seconds: Some(before),
                    seconds: during,
                    share: ((during - before) / denom).clamp(0.0, 1.0),
                })
            })
            .collect()
    }

    /// Shares of the mean latency over `intervals`.
    pub fn mean_shares(&self, intervals: &[usize]) -> Vec<PartShare> {
        let total = self.total.as_ref().and_then(|s| mean_over(s, intervals));
        let denom = self
            .top_level()
            .filter_map(|p| mean_over(&p.series, intervals))
            .fold(total.unwrap_or(0.0), f64::max);
        if denom <= 0.0 {
            return Vec::new();
        }
        self.parts
            .iter()
            .filter_map(|p| {
                let m = mean_over(&p.series, intervals)?;
                Some(PartShare {
                    part: p.kind,
                    key: p.key.clone(),
                    baseline_seconds: None,
                    seconds: m,
                    share: (m / denom).clamp(0.0, 1.0),
                })
            })
            .collect()
    }
}

/// The devices the local IO goes to: those named by the host, else the one that completed
/// the most requests of this direction.
pub fn local_devices(host: &Host, d: Direction) -> Vec<String> {
    let named: Vec<String> = host
        .local_devices
        .iter()
        .filter(|n| {
            host.devices
                .get(*n)
                .is_some_and(|dev| dev.ops.contains_key(d.op()))
        })
        .cloned()
        .collect();
    if !named.is_empty() {
        return named;
    }
    let all: Vec<usize> = (0..host_len(host)).collect();
    host.devices
        .iter()
        .filter_map(|(name, dev)| {
            let op = dev.ops.get(d.op())?;
            Some((sum_over(&op.ios, &all).unwrap_or(0.0), name))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(a.1)))
        .map(|(_, n)| vec![n.clone()])
        .unwrap_or_default()
}

/// Longest series length on the host's devices (they are all the run's length or empty).
fn host_len(host: &Host) -> usize {
    host.devices
        .values()
        .flat_map(|d| d.ops.values().map(|o| o.ios.len()))
        .max()
        .unwrap_or(0)
}

fn zip(a: &Series, b: &Series, n: usize, f: impl Fn(f64, f64) -> Option<f64>) -> Series {
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (Some(x), Some(y)) => f(x, y),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BlockOp, Device, Latency};

    fn c(n: usize, v: f64) -> Series {
        vec![Some(v); n]
    }

    fn host() -> Host {
        let mut h = Host {
            name: "h1".into(),
            ..Host::default()
        };
        let mut lat = Latency {
            mean_seconds: c(10, 0.010),
            local_device_seconds: c(10, 0.008),
            ..Latency::default()
        };
        lat.replicas.insert("198.18.0.2".into(), c(10, 0.004));
        h.write = Some(lat);
        for (name, ios) in [("loop1", 100.0), ("loop2", 10.0)] {
            let mut dev = Device::default();
            dev.ops.insert(
                "write".into(),
                BlockOp {
                    ios: c(10, ios),
                    queue_seconds: c(10, 0.001),
                    service_seconds: c(10, 0.002),
                    ..BlockOp::default()
                },
            );
            h.devices.insert(name.into(), dev);
        }
        h
    }

    #[test]
    fn the_busiest_device_is_local_unless_named() {
        let mut h = host();
        assert_eq!(local_devices(&h, Direction::Write), vec!["loop1"]);
        h.local_devices = vec!["loop2".into(), "nope".into()];
        assert_eq!(local_devices(&h, Direction::Write), vec!["loop2"]);
        assert!(local_devices(&h, Direction::Read).is_empty());
    }

    #[test]
    fn above_block_is_local_minus_queue_and_service() {
        let p = Parts::build(&host(), Direction::Write, 10);
        let above = p.get(PartKind::AboveBlock).unwrap();
        assert!((at(&above.series, 3).unwrap() - 0.005).abs() < 1e-12);
        let shares = p.mean_shares(&(0..10).collect::<Vec<_>>());
        let local = shares
            .iter()
            .find(|s| s.part == PartKind::LocalDevice)
            .unwrap();
        assert!((local.share - 0.8).abs() < 1e-9);
    }

    #[test]
    fn rise_shares_follow_the_part_that_rose() {
        let mut h = host();
        let lat = h.write.as_mut().unwrap();
        for v in &mut lat.replicas.get_mut("198.18.0.2").unwrap()[5..] {
            *v = Some(0.104);
        }
        for v in &mut lat.mean_seconds[5..] {
            *v = Some(0.110);
        }
        let p = Parts::build(&h, Direction::Write, 10);
        let s = p.rise_shares(&[5, 6, 7, 8, 9], &[0, 1, 2, 3, 4]);
        let r = s.iter().find(|s| s.part == PartKind::Replica).unwrap();
        assert!((r.share - 1.0).abs() < 1e-9);
        let l = s.iter().find(|s| s.part == PartKind::LocalDevice).unwrap();
        assert_eq!(l.share, 0.0);
    }
}
