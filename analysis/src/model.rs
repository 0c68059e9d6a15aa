//! The analysis input: aligned per-interval series for one or more hosts.
//!
//! A loadgen run record and Prometheus range queries both fill this model. Every series is
//! either empty (not measured at all) or holds exactly one entry per interval; `None` (JSON
//! `null`) marks an interval without data. Missing data is never zero. Values that are not
//! finite or are negative (a counter reset, 0/0 in a rate) are read as missing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::histogram::BucketHistogram;

/// One value per interval; `None` where the interval has no data.
pub type Series = Vec<Option<f64>>;

/// A run: a shared timeline and the hosts measured on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Length of every interval, in seconds.
    pub interval_seconds: f64,
    /// Start of each interval in seconds (Unix time or since the run started), increasing.
    pub starts: Vec<f64>,
    pub hosts: Vec<Host>,
}

/// Everything measured on one host. A host with `read` or `write` latency is analysed; the
/// others contribute the signals on the path to it (a replica peer, a switch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Host name or Prometheus instance.
    pub name: String,
    /// The host's IP addresses, so that a replica peer address can be matched to its host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// A network element between the hosts (a switch or bridge): its interfaces and qdiscs
    /// count as on the path to every peer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub switch: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Latency>,
    /// Block devices the measured IO goes to (kernel names). Empty: the busiest device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_devices: Vec<String>,
    /// Block-layer series per device (kernel name).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Device>,
    /// TCP series per peer IP address.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peers: BTreeMap<String, Peer>,
    /// Packets dropped per interval, per kernel drop reason (`qdisc_drop`, `pkt_too_big`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skb_drops: BTreeMap<String, Series>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<Qdisc>,
    /// Interface series per interface name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interfaces: BTreeMap<String, Interface>,
    /// Seconds of each interval during which some task waited for a CPU (the kernel's
    /// pressure stall information, `cpu` `some`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_stalled_seconds: Series,
    /// Seconds of each interval the storage daemon's cgroup was held off the CPU by its
    /// quota (its `cpu.stat` throttled time, summed over CPUs): present where the agent
    /// follows that cgroup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_throttled_seconds: Series,
}

/// Storage latency seen by the application in one direction, with its breakdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Completed IOs per second.
    #[serde(default)]
    pub iops: Series,
    #[serde(default)]
    pub p50_seconds: Series,
    /// Used for the raised intervals; recomputed from `histograms` where missing.
    #[serde(default)]
    pub p99_seconds: Series,
    /// Mean latency per IO; the denominator of the breakdown.
    #[serde(default)]
    pub mean_seconds: Series,
    /// Latency histogram of each interval (mergeable; empty when not recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<Option<BucketHistogram>>,
    /// Mean time per IO spent on the local device, from submission to completion as the
    /// application sees it (includes time above the block layer such as cgroup throttling).
    #[serde(default)]
    pub local_device_seconds: Series,
    /// Mean round trip per IO to each replica, per peer IP address.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replicas: BTreeMap<String, Series>,
    /// Share of the application's IO slots in use (IOs in flight over the most it keeps in
    /// flight, its queue depth), 0..=1, per interval; empty when unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots_in_use: Series,
}

/// Block-layer series of one device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Per op: `read`, `write`, `flush`, `discard`, `other`.
    #[serde(default)]
    pub ops: BTreeMap<String, BlockOp>,
    /// Requests in flight (gauge).
    #[serde(default)]
    pub inflight: Series,
    /// The device's request queue limit (gauge).
    #[serde(default)]
    pub queue_limit: Series,
    /// The devices this one sends its IO to (a dm or md device's, a partition's disk), by
    /// kernel name, from `stornet_block_device_info`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<String>,
    /// The IP address of the remote that serves this device over the network (NVMe over
    /// TCP, iSCSI), from `stornet_block_device_info`'s `peer`: its time is then partly the
    /// path to that peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// Block-layer series of one device and op.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockOp {
    /// Requests completed in the interval.
    #[serde(default)]
    pub ios: Series,
    /// Mean time per request between entering the block layer and being issued to the
    /// driver (histogram sum / count of the interval).
    #[serde(default)]
    pub queue_seconds: Series,
    /// Mean time per request between issue and completion.
    #[serde(default)]
    pub service_seconds: Series,
    /// Requests completed with an error in the interval.
    #[serde(default)]
    pub errors: Series,
}

/// TCP series toward one peer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    /// Retransmitted segments in the interval.
    #[serde(default)]
    pub retransmits: Series,
    /// Smoothed round-trip time (gauge).
    #[serde(default)]
    pub srtt_seconds: Series,
    /// Path MTU the kernel uses toward the peer (gauge).
    #[serde(default)]
    pub path_mtu_bytes: Series,
    /// Sender MSS toward the peer (gauge); used when the path MTU is not known.
    #[serde(default)]
    pub mss_bytes: Series,
    /// Bytes written to the peer's sockets and not sent yet (gauge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notsent_bytes: Series,
    /// Bytes written to the peer's sockets and not acknowledged yet, in flight or not sent
    /// (gauge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_queue_bytes: Series,
    /// The latest delivery rate of the peer's sockets with data unacknowledged, summed, in
    /// bytes per second (gauge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivery_rate_bytes_per_second: Series,
    /// Seconds of the interval the peer's sockets had data to send, summed over sockets
    /// (including the time limited by the receive window or the send buffer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_seconds: Series,
    /// Seconds of the interval the peer's receive window held data back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rwnd_limited_seconds: Series,
    /// Seconds of the interval the writer waited for room in the send buffer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sndbuf_limited_seconds: Series,
    /// Segments the peer acknowledged, retransmitted ones included, in the interval: what
    /// the retransmits are a share of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered_segments: Series,
    /// The local interface the route to the peer leaves by, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

/// One qdisc on one interface.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Qdisc {
    pub interface: String,
    /// The qdisc kind and handle as the agent labels it (`tbf`, `fq_codel 0:`).
    pub qdisc: String,
    /// Packets dropped in the interval.
    #[serde(default)]
    pub drops: Series,
    /// Bytes queued (gauge).
    #[serde(default)]
    pub backlog_bytes: Series,
    /// Times the qdisc held a packet back for its rate limit, in the interval.
    #[serde(default)]
    pub overlimits: Series,
    /// Bytes the qdisc let out in the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_bytes: Series,
    /// The rate a shaping qdisc lets out, bytes per second (gauge); empty for a qdisc that
    /// does not shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_bytes_per_second: Series,
}

/// Counters of one network interface, per interval, and its MTU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interface {
    /// MTU in bytes (gauge).
    #[serde(default)]
    pub mtu_bytes: Series,
    /// Packets received and sent; an interface that moved no packets is off the path.
    #[serde(default)]
    pub rx_packets: Series,
    #[serde(default)]
    pub tx_packets: Series,
    #[serde(default)]
    pub rx_drops: Series,
    #[serde(default)]
    pub tx_drops: Series,
    #[serde(default)]
    pub rx_errors: Series,
    #[serde(default)]
    pub tx_errors: Series,
    /// Bytes received and sent in the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_bytes: Series,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tx_bytes: Series,
    /// Link speed the driver reports, bytes per second (gauge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speed_bytes_per_second: Series,
    /// Pause frames received (the link partner stopped this interface) and sent (this
    /// interface stopped its partner) in the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_pause_frames: Series,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tx_pause_frames: Series,
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Read,
    Write,
}

impl Direction {
    pub const ALL: [Direction; 2] = [Direction::Read, Direction::Write];

    /// The block-layer `op` label of this direction.
    pub fn op(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.op())
    }
}

impl Host {
    pub fn latency(&self, d: Direction) -> Option<&Latency> {
        match d {
            Direction::Read => self.read.as_ref(),
            Direction::Write => self.write.as_ref(),
        }
    }
}

/// A structural problem in the input: the analysis cannot line the series up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("interval length must be a positive number of seconds, got {0}")]
    IntervalLength(f64),
    #[error("interval starts must be finite and increasing (interval {0})")]
    Starts(usize),
    #[error("{series} has {got} entries but the run has {want} intervals")]
    Length {
        series: String,
        got: usize,
        want: usize,
    },
    #[error("{0}: a histogram needs one count per bound plus one above the last bound")]
    Histogram(String),
    #[error("host name {0:?} appears twice")]
    DuplicateHost(String),
}

impl Run {
    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The host that owns an address, if any host lists it.
    pub fn host_with_address(&self, address: &str) -> Option<&Host> {
        self.hosts
            .iter()
            .find(|h| h.addresses.iter().any(|a| a == address))
    }

    /// The run's first `k` intervals: what was known when its `k`-th interval closed.
    pub fn first(&self, k: usize) -> Run {
        let mut r = self.clone();
        r.starts.truncate(k);
        for h in &mut r.hosts {
            for l in [&mut h.read, &mut h.write].into_iter().flatten() {
                l.histograms.truncate(k);
            }
            for s in h.series_mut() {
                s.truncate(k);
            }
        }
        r
    }

    /// Checks that every series lines up with the timeline.
    pub fn validate(&self) -> Result<(), ModelError> {
        if !(self.interval_seconds.is_finite() && self.interval_seconds > 0.0) {
            return Err(ModelError::IntervalLength(self.interval_seconds));
        }
        for (i, w) in self.starts.windows(2).enumerate() {
            if !(w[0].is_finite() && w[1].is_finite() && w[1] > w[0]) {
                return Err(ModelError::Starts(i + 1));
            }
        }
        if self.starts.first().is_some_and(|s| !s.is_finite()) {
            return Err(ModelError::Starts(0));
        }
        let n = self.len();
        let mut names = std::collections::BTreeSet::new();
        for h in &self.hosts {
            if !names.insert(h.name.as_str()) {
                return Err(ModelError::DuplicateHost(h.name.clone()));
            }
            h.validate(n)?;
        }
        Ok(())
    }
}

fn check(series: &Series, n: usize, name: impl FnOnce() -> String) -> Result<(), ModelError> {
    if series.is_empty() || series.len() == n {
        Ok(())
    } else {
        Err(ModelError::Length {
            series: name(),
            got: series.len(),
            want: n,
        })
    }
}

impl Host {
    /// Every series of the host (`validate` checks each of them by name).
    fn series_mut(&mut self) -> Vec<&mut Series> {
        let mut out: Vec<&mut Series> = Vec::new();
        for l in [&mut self.read, &mut self.write].into_iter().flatten() {
            out.extend([
                &mut l.iops,
                &mut l.p50_seconds,
                &mut l.p99_seconds,
                &mut l.mean_seconds,
                &mut l.local_device_seconds,
                &mut l.slots_in_use,
            ]);
            out.extend(l.replicas.values_mut());
        }
        for d in self.devices.values_mut() {
            out.extend([&mut d.inflight, &mut d.queue_limit]);
            for o in d.ops.values_mut() {
                out.extend([
                    &mut o.ios,
                    &mut o.queue_seconds,
                    &mut o.service_seconds,
                    &mut o.errors,
                ]);
            }
        }
        for p in self.peers.values_mut() {
            out.extend([
                &mut p.retransmits,
                &mut p.srtt_seconds,
                &mut p.path_mtu_bytes,
                &mut p.mss_bytes,
                &mut p.notsent_bytes,
                &mut p.send_queue_bytes,
                &mut p.delivery_rate_bytes_per_second,
                &mut p.busy_seconds,
                &mut p.rwnd_limited_seconds,
                &mut p.sndbuf_limited_seconds,
                &mut p.delivered_segments,
            ]);
        }
        out.extend(self.skb_drops.values_mut());
        out.push(&mut self.cpu_stalled_seconds);
        out.push(&mut self.cpu_throttled_seconds);
        for q in &mut self.qdiscs {
            out.extend([
                &mut q.drops,
                &mut q.backlog_bytes,
                &mut q.overlimits,
                &mut q.sent_bytes,
                &mut q.rate_bytes_per_second,
            ]);
        }
        for i in self.interfaces.values_mut() {
            out.extend([
                &mut i.mtu_bytes,
                &mut i.rx_packets,
                &mut i.tx_packets,
                &mut i.rx_drops,
                &mut i.tx_drops,
                &mut i.rx_errors,
                &mut i.tx_errors,
                &mut i.rx_bytes,
                &mut i.tx_bytes,
                &mut i.speed_bytes_per_second,
                &mut i.rx_pause_frames,
                &mut i.tx_pause_frames,
            ]);
        }
        out
    }

    fn validate(&self, n: usize) -> Result<(), ModelError> {
        let h = &self.name;
        for d in Direction::ALL {
            if let Some(l) = self.latency(d) {
                l.validate(n, &format!("host {h} {d}"))?;
            }
        }
        for (dev, device) in &self.devices {
            check(&device.inflight, n, || {
                format!("host {h} device {dev} inflight")
            })?;
            check(&device.queue_limit, n, || {
                format!("host {h} device {dev} queue_limit")
            })?;
            for (op, o) in &device.ops {
                let p = || format!("host {h} device {dev} {op}");
                check(&o.ios, n, || format!("{} ios", p()))?;
                check(&o.queue_seconds, n, || format!("{} queue_seconds", p()))?;
                check(&o.service_seconds, n, || format!("{} service_seconds", p()))?;
                check(&o.errors, n, || format!("{} errors", p()))?;
            }
        }
        for (addr, p) in &self.peers {
            let q = || format!("host {h} peer {addr}");
            check(&p.retransmits, n, || format!("{} retransmits", q()))?;
            check(&p.srtt_seconds, n, || format!("{} srtt_seconds", q()))?;
            check(&p.path_mtu_bytes, n, || format!("{} path_mtu_bytes", q()))?;
            check(&p.mss_bytes, n, || format!("{} mss_bytes", q()))?;
            for (field, s) in [
                ("notsent_bytes", &p.notsent_bytes),
                ("send_queue_bytes", &p.send_queue_bytes),
                (
                    "delivery_rate_bytes_per_second",
                    &p.delivery_rate_bytes_per_second,
                ),
                ("busy_seconds", &p.busy_seconds),
                ("rwnd_limited_seconds", &p.rwnd_limited_seconds),
                ("sndbuf_limited_seconds", &p.sndbuf_limited_seconds),
                ("delivered_segments", &p.delivered_segments),
            ] {
                check(s, n, || format!("{} {field}", q()))?;
            }
        }
        for (reason, s) in &self.skb_drops {
            check(s, n, || format!("host {h} skb_drops {reason}"))?;
        }
        check(&self.cpu_stalled_seconds, n, || {
            format!("host {h} cpu_stalled_seconds")
        })?;
        check(&self.cpu_throttled_seconds, n, || {
            format!("host {h} cpu_throttled_seconds")
        })?;
        for q in &self.qdiscs {
            let p = || format!("host {h} qdisc {} on {}", q.qdisc, q.interface);
            check(&q.drops, n, || format!("{} drops", p()))?;
            check(&q.backlog_bytes, n, || format!("{} backlog_bytes", p()))?;
            check(&q.overlimits, n, || format!("{} overlimits", p()))?;
            check(&q.sent_bytes, n, || format!("{} sent_bytes", p()))?;
            check(&q.rate_bytes_per_second, n, || {
                format!("{} rate_bytes_per_second", p())
            })?;
        }
        for (name, i) in &self.interfaces {
            let p = || format!("host {h} interface {name}");
            for (field, s) in [
                ("mtu_bytes", &i.mtu_bytes),
                ("rx_packets", &i.rx_packets),
                ("tx_packets", &i.tx_packets),
                ("rx_drops", &i.rx_drops),
                ("tx_drops", &i.tx_drops),
                ("rx_errors", &i.rx_errors),
                ("tx_errors", &i.tx_errors),
                ("rx_bytes", &i.rx_bytes),
                ("tx_bytes", &i.tx_bytes),
                ("speed_bytes_per_second", &i.speed_bytes_per_second),
                ("rx_pause_frames", &i.rx_pause_frames),
                ("tx_pause_frames", &i.tx_pause_frames),
            ] {
                check(s, n, || format!("{} {field}", p()))?;
            }
        }
        Ok(())
    }
}

impl Latency {
    fn validate(&self, n: usize, p: &str) -> Result<(), ModelError> {
        check(&self.iops, n, || format!("{p} iops"))?;
        check(&self.p50_seconds, n, || format!("{p} p50_seconds"))?;
        check(&self.p99_seconds, n, || format!("{p} p99_seconds"))?;
        check(&self.mean_seconds, n, || format!("{p} mean_seconds"))?;
        check(&self.local_device_seconds, n, || {
            format!("{p} local_device_seconds")
        })?;
        for (peer, s) in &self.replicas {
            check(s, n, || format!("{p} replica {peer}"))?;
        }
        check(&self.slots_in_use, n, || format!("{p} slots_in_use"))?;
        if !(self.histograms.is_empty() || self.histograms.len() == n) {
            return Err(ModelError::Length {
                series: format!("{p} histograms"),
                got: self.histograms.len(),
                want: n,
            });
        }
        for (i, hist) in self.histograms.iter().enumerate() {
            if let Some(hist) = hist
                && !hist.is_well_formed()
            {
                return Err(ModelError::Histogram(format!("{p} histogram {i}")));
            }
        }
        Ok(())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: usize) -> Run {
        Run {
            interval_seconds: 1.0,
            starts: (0..n).map(|i| i as f64).collect(),
            hosts: vec![Host {
                name: "h1".into(),
                ..Host::default()
            }],
        }
    }

    #[test]
    fn empty_series_are_absent_and_full_ones_line_up() {
        let mut r = run(3);
        r.hosts[0].write = Some(Latency {
            p99_seconds: vec![Some(0.001), None, Some(0.002)],
            ..Latency::default()
        });
        assert_eq!(r.validate(), Ok(()));
    }

    #[test]
    fn a_short_series_is_named_in_the_error() {
        let mut r = run(3);
        r.hosts[0]
            .skb_drops
            .insert("qdisc_drop".into(), vec![Some(1.0)]);
        let e = r.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "host h1 skb_drops qdisc_drop has 1 entries but the run has 3 intervals"
        );
    }

    #[test]
    fn bad_timeline_is_refused() {
        let mut r = run(3);
        r.interval_seconds = 0.0;
        assert!(matches!(r.validate(), Err(ModelError::IntervalLength(_))));
        let mut r = run(3);
        r.starts[2] = 0.5;
        assert_eq!(r.validate(), Err(ModelError::Starts(2)));
        let mut r = run(2);
        r.hosts.push(r.hosts[0].clone());
        assert!(matches!(r.validate(), Err(ModelError::DuplicateHost(_))));
    }

    #[test]
    fn json_with_only_some_fields_reads() {
        let r: Run = serde_json::from_str(
            r#"{"interval_seconds":1,"starts":[0,1],
                "hosts":[{"name":"h1","write":{"p99_seconds":[0.001,null]}}]}"#,
        )
        .unwrap();
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(r.hosts[0].write.as_ref().unwrap().p99_seconds[1], None);
    }
}
