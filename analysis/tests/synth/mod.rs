//! Synthetic runs: a client h1 (198.18.0.1) writing to its device loop3 and replicating
//! every write to h2 (198.18.0.2) through a switch, with one fault injected in chosen
//! intervals and optional noise in signals that are not causal.

use analysis::{
    BlockOp, BucketHistogram, Device, Host, Interface, Latency, Peer, Qdisc, Run, Series,
};

/// Deterministic xorshift noise.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `v` times a factor uniform in [1 - rel, 1 + rel].
    pub fn around(&mut self, v: f64, rel: f64) -> f64 {
        v * (1.0 + rel * (2.0 * self.unit() - 1.0))
    }

    /// Uniform in [lo, hi).
    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Whole number in [0, hi].
    pub fn upto(&mut self, hi: u64) -> f64 {
        (self.unit() * (hi + 1) as f64).floor()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    None,
    /// Shallow switch/qdisc buffer on the path to the replica.
    Congestion,
    /// Device queue full: in-flight at the limit, queue time up.
    Saturation,
    /// Device service time up.
    SlowDevice,
    /// cgroup IO throttling: IO held above the block layer.
    Throttle,
    /// Device queue full and IO waiting for a free request above the block layer.
    TagWait,
    /// h1's interface set to 9000 while the switch stays at 1500.
    Mtu,
    /// The replica's device is slow.
    SlowReplicaDevice,
}

pub struct Lab {
    pub n: usize,
    pub seed: u64,
    pub fault: Fault,
    /// Intervals where the fault is active.
    pub from: usize,
    pub to: usize,
    /// Block signals fluctuate without affecting latency.
    pub noisy_device: bool,
    /// A few retransmits and drops in random intervals.
    pub noisy_network: bool,
    /// Loadgen's split into local device time and replica round trip.
    pub breakdown: bool,
    /// The agents' series.
    pub agent: bool,
    /// Also record reads (local only).
    pub reads: bool,
    /// Record per-interval histograms instead of p99 values.
    pub histograms: bool,
    /// Relative noise on latency.
    pub latency_noise: f64,
    /// The file is on a network file system (CephFS through FUSE): no block device on h1,
    /// its local IO's time is the round trip to its server h2, and h1 also talks to a
    /// healthy 198.18.0.3.
    pub network_fs: bool,
}

impl Lab {
    pub fn new(fault: Fault) -> Lab {
        Lab {
            n: 40,
            seed: 7,
            fault,
            from: 15,
            to: 27,
            noisy_device: false,
            noisy_network: false,
            breakdown: true,
            agent: true,
            reads: false,
            histograms: false,
            latency_noise: 0.15,
            network_fs: false,
        }
    }

    /// The fault active in every interval: a run slow from its first second.
    pub fn throughout(mut self) -> Lab {
        self.from = 0;
        self.to = self.n;
        self
    }

    pub fn noisy(mut self) -> Lab {
        self.noisy_device = true;
        self.noisy_network = true;
        self
    }

    fn active(&self, i: usize) -> bool {
        self.fault != Fault::None && (self.from..self.to).contains(&i)
    }

    pub fn build(&self) -> Run {
        let n = self.n;
        let mut rng = Rng::new(self.seed);
        let mut s = Samples::new(n);
        for i in 0..n {
            self.interval(i, &mut rng, &mut s);
        }
        self.assemble(s)
    }

    fn interval(&self, i: usize, rng: &mut Rng, s: &mut Samples) {
        let on = self.active(i);
        let f = self.fault;
        let dev_noise = if self.noisy_device {
            rng.between(0.5, 3.0)
        } else {
            rng.around(1.0, 0.1)
        };
        let mut service = 0.000_1 * dev_noise;
        let mut queue = if self.noisy_device {
            rng.between(0.000_005, 0.000_2)
        } else {
            0.000_02
        };
        let mut above = 0.000_01;
        let mut inflight = if self.noisy_device {
            rng.between(4.0, 80.0).round()
        } else {
            8.0
        };
        if on && f == Fault::Saturation {
            queue = rng.around(0.040, 0.2);
            service = rng.around(0.000_3, 0.2);
            inflight = 128.0;
        }
        if on && f == Fault::SlowDevice {
            service = rng.around(0.030, 0.2);
        }
        if on && f == Fault::Throttle {
            above = rng.around(0.030, 0.2);
        }
        if on && f == Fault::TagWait {
            above = rng.around(0.030, 0.2);
            inflight = 128.0;
        }
        let local = above + queue + service;
        let mut rtt = rng.around(0.000_4, 0.1);
        let mut srtt = rng.around(0.000_3, 0.1);
        let mut retrans = if self.noisy_network { rng.upto(3) } else { 0.0 };
        let mut qdrops = if self.noisy_network { rng.upto(2) } else { 0.0 };
        let mut backlog = if self.noisy_network {
            rng.upto(3000)
        } else {
            0.0
        };
        let mut sw_drops = if self.noisy_network { rng.upto(1) } else { 0.0 };
        let mut peer_service = rng.around(0.000_1, 0.1);
        if on && f == Fault::Congestion {
            rtt += rng.around(0.150, 0.3);
            srtt = rng.around(0.050, 0.3);
            retrans = rng.around(300.0, 0.3).round();
            qdrops = rng.around(500.0, 0.3).round();
            backlog = rng.around(15000.0, 0.3);
        }
        let mtu_on = f == Fault::Mtu && on;
        if mtu_on {
            rtt += rng.around(0.200, 0.3);
            retrans = rng.around(400.0, 0.3).round();
            sw_drops = rng.around(2000.0, 0.3).round();
        }
        if on && f == Fault::SlowReplicaDevice {
            peer_service = rng.around(0.040, 0.2);
            rtt += peer_service;
        }
        let mean = local.max(rtt) + 0.000_02;
        let p99 = mean * 2.5 * rng.around(1.0, self.latency_noise);
        let iops = (16.0 / mean).min(20_000.0);
        s.push(Sample {
            mean,
            p99,
            iops,
            local,
            rtt,
            queue,
            service,
            inflight,
            srtt,
            retrans,
            qdrops,
            backlog,
            sw_drops,
            peer_service,
            h1_mtu: if f == Fault::Mtu && i >= self.from {
                9000.0
            } else {
                1500.0
            },
            read_p99: 0.000_3 * rng.around(1.0, self.latency_noise)
                + if on && matches!(f, Fault::Saturation | Fault::SlowDevice) {
                    0.03
                } else {
                    0.0
                },
        });
    }

    fn assemble(&self, s: Samples) -> Run {
        let n = self.n;
        let c = |v: f64| -> Series { vec![Some(v); n] };
        let mut write = Latency {
            iops: s.get(|x| x.iops),
            p50_seconds: s.get(|x| x.mean * 0.8),
            p99_seconds: s.get(|x| x.p99),
            mean_seconds: s.get(|x| x.mean),
            ..Latency::default()
        };
        if self.histograms {
            write.histograms = s
                .samples
                .iter()
                .map(|x| Some(histogram(x.mean, x.p99)))
                .collect();
            write.p99_seconds = Vec::new();
        }
        if self.breakdown {
            write.local_device_seconds = s.get(|x| x.local);
            write.replicas.insert("198.18.0.2".into(), s.get(|x| x.rtt));
        }
        let mut h1 = Host {
            name: "h1".into(),
            addresses: vec!["198.18.0.1".into()],
            write: Some(write),
            ..Host::default()
        };
        if self.reads {
            h1.read = Some(Latency {
                iops: c(5000.0),
                p99_seconds: s.get(|x| x.read_p99),
                mean_seconds: s.get(|x| x.read_p99 / 2.5),
                local_device_seconds: s.get(|x| x.read_p99 / 2.5),
                ..Latency::default()
            });
        }
        let mut h2 = Host {
            name: "h2".into(),
            addresses: vec!["198.18.0.2".into()],
            ..Host::default()
        };
        let mut sw = Host {
            name: "sw".into(),
            switch: true,
            ..Host::default()
        };
        if self.agent {
            h1.local_devices = vec!["loop3".into()];
            let mut dev = Device {
                inflight: s.get(|x| x.inflight),
                queue_limit: c(128.0),
                ..Device::default()
            };
            dev.ops.insert(
                "write".into(),
                BlockOp {
                    ios: s.get(|x| x.iops),
                    queue_seconds: s.get(|x| x.queue),
                    service_seconds: s.get(|x| x.service),
                    errors: c(0.0),
                },
            );
            dev.ops.insert(
                "read".into(),
                BlockOp {
                    ios: c(50.0),
                    queue_seconds: s.get(|x| x.queue),
                    service_seconds: s.get(|x| x.service),
                    errors: c(0.0),
                },
            );
            h1.devices.insert("loop3".into(), dev);
            h1.peers.insert(
                "198.18.0.2".into(),
                Peer {
                    retransmits: s.get(|x| x.retrans),
                    srtt_seconds: s.get(|x| x.srtt),
                    ..Peer::default()
                },
            );
            h1.skb_drops
                .insert("qdisc_drop".into(), s.get(|x| x.qdrops));
            h1.skb_drops
                .insert("not_specified".into(), s.get(|x| x.retrans / 10.0));
            h1.qdiscs.push(Qdisc {
                interface: "v1".into(),
                qdisc: "tbf".into(),
                drops: s.get(|x| x.qdrops),
                backlog_bytes: s.get(|x| x.backlog),
                overlimits: s.get(|x| x.qdrops * 3.0),
                ..Qdisc::default()
            });
            h1.interfaces
                .insert("v1".into(), iface(s.get(|x| x.h1_mtu), c(0.0)));
            h1.interfaces.insert("lo".into(), iface(c(65536.0), c(0.0)));
            let mut peer_dev = Device {
                inflight: c(4.0),
                queue_limit: c(128.0),
                ..Device::default()
            };
            peer_dev.ops.insert(
                "write".into(),
                BlockOp {
                    ios: s.get(|x| x.iops),
                    queue_seconds: c(0.000_02),
                    service_seconds: s.get(|x| x.peer_service),
                    errors: c(0.0),
                },
            );
            h2.devices.insert("loop4".into(), peer_dev);
            h2.interfaces
                .insert("v2".into(), iface(s.get(|x| x.h1_mtu), c(0.0)));
            sw.interfaces
                .insert("sa".into(), iface(c(1500.0), s.get(|x| x.sw_drops)));
            sw.interfaces.insert("sb".into(), iface(c(1500.0), c(0.0)));
        }
        if self.network_fs {
            if let Some(w) = h1.write.as_mut() {
                w.replicas.clear();
                w.local_device_seconds = s.get(|x| x.rtt);
            }
            h1.local_devices.clear();
            h1.devices.clear();
            // Routed through v1 (the shallow qdisc) and v3 (nothing wrong) respectively.
            if let Some(p) = h1.peers.get_mut("198.18.0.2") {
                p.interface = Some("v1".into());
            }
            h1.peers.insert(
                "198.18.0.3".into(),
                Peer {
                    retransmits: c(0.0),
                    srtt_seconds: c(0.000_3),
                    interface: Some("v3".into()),
                    ..Peer::default()
                },
            );
            h1.interfaces.insert("v3".into(), iface(c(1500.0), c(0.0)));
        }
        Run {
            interval_seconds: 1.0,
            starts: (0..n).map(|i| 1_700_000_000.0 + i as f64).collect(),
            hosts: vec![h1, h2, sw],
        }
    }
}

fn iface(mtu: Series, rx_drops: Series) -> Interface {
    let n = mtu.len();
    Interface {
        mtu_bytes: mtu,
        rx_packets: vec![Some(10_000.0); n],
        tx_packets: vec![Some(10_000.0); n],
        rx_drops,
        tx_drops: vec![Some(0.0); n],
        rx_errors: vec![Some(0.0); n],
        tx_errors: vec![Some(0.0); n],
        ..Interface::default()
    }
}

/// A histogram of 1,000 IOs: 98.5% around the mean, the rest near the p99.
fn histogram(mean: f64, p99: f64) -> BucketHistogram {
    let bounds: Vec<f64> = (0..40).map(|k| 1e-5 * 1.4f64.powi(k)).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    let bucket = |v: f64| bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
    counts[bucket(mean)] += 985;
    counts[bucket(p99)] += 15;
    BucketHistogram {
        bounds_seconds: bounds,
        counts,
    }
}

struct Sample {
    mean: f64,
    p99: f64,
    iops: f64,
    local: f64,
    rtt: f64,
    queue: f64,
    service: f64,
    inflight: f64,
    srtt: f64,
    retrans: f64,
    qdrops: f64,
    backlog: f64,
    sw_drops: f64,
    peer_service: f64,
    h1_mtu: f64,
    read_p99: f64,
}

struct Samples {
    samples: Vec<Sample>,
}

impl Samples {
    fn new(n: usize) -> Samples {
        Samples {
            samples: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, s: Sample) {
        self.samples.push(s);
    }

    fn get(&self, f: impl Fn(&Sample) -> f64) -> Series {
        self.samples.iter().map(|s| Some(f(s))).collect()
    }
}
