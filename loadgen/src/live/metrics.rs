//! `--metrics-address`: the run's live metrics in Prometheus text format on `/metrics`,
//! updated every interval. Latency is a cumulative histogram of the open-loop latency (from
//! each IO's intended start) with fixed buckets, so that Prometheus can merge hosts with
//! `histogram_quantile`; the last interval's quantiles are a summary.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::proto::{self, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

use crate::engine::JobLive;
use crate::results::histogram::{Histogram, Summary as LatencySummary};
use crate::results::live_verdict::LiveVerdict;
use crate::results::timeline::{DirInterval, TimelineRow};

/// Bucket bounds of `stornet_loadgen_latency_seconds`.
const BUCKETS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Scrapers answered at once; more requests are closed unanswered.
const MAX_ANSWERING: usize = 32;
/// Connections that have not sent their request yet (a thread each, blocked on a read):
/// idle connections take these, never a scraper's place; at the cap a new connection closes
/// the oldest of them.
const MAX_WAITING: usize = 256;
/// Time a client has to send its request, and to take each part of the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The connections being served, oldest first, and whether each has sent its request.
#[derive(Default)]
struct Clients {
    next: u64,
    open: BTreeMap<u64, (TcpStream, bool)>,
}

impl Clients {
    /// A place for `s` among the connections waiting for their request; at the cap the
    /// oldest of them is closed to make room.
    fn admit(me: &Mutex<Clients>, s: &TcpStream) -> Option<u64> {
        let mut c = me.lock().unwrap_or_else(|e| e.into_inner());
        if c.open.values().filter(|(_, asked)| !asked).count() >= MAX_WAITING {
            let idle = c
                .open
                .iter()
                .find(|(_, (_, asked))| !asked)
                .map(|(id, _)| *id)?;
            if let Some((victim, _)) = c.open.remove(&idle) {
                let _ = victim.shutdown(Shutdown::Both);
            }
        }
        let handle = s.try_clone().ok()?;
        let id = c.next;
        c.next += 1;
        c.open.insert(id, (handle, false));
        Some(id)
    }

    /// Whether connection `id`, its request read, may be answered now (at most
    /// [`MAX_ANSWERING`] at once).
    fn answering(me: &Mutex<Clients>, id: u64) -> bool {
        let mut c = me.lock().unwrap_or_else(|e| e.into_inner());
        if c.open.values().filter(|(_, asked)| *asked).count() >= MAX_ANSWERING {
            return false;
        }
        match c.open.get_mut(&id) {
            Some(e) => {
                e.1 = true;
                true
            }
            None => false,
        }
    }

    fn leave(me: &Mutex<Clients>, id: u64) {
        me.lock()
            .unwrap_or_else(|e| e.into_inner())
            .open
            .remove(&id);
    }
}

#[derive(Default)]
struct State {
    /// IOs and bytes of finished points, and of the running one.
    done_ios: [u64; 2],
    done_bytes: [u64; 2],
    cur_ios: [u64; 2],
    cur_bytes: [u64; 2],
    lat: [Histogram; 2],
    last: Option<TimelineRow>,
    /// The running (or last) point's live verdict.
    verdict: Option<LiveVerdict>,
    point: usize,
    running: bool,
}

pub struct LiveMetrics {
    state: Mutex<State>,
}

impl LiveMetrics {
    /// Binds `addr` and serves `/metrics` from background threads for the rest of the run:
    /// one per connection (see [`MAX_WAITING`] and [`MAX_ANSWERING`]), so a slow client
    /// delays only itself.
    pub fn serve(addr: SocketAddr) -> std::io::Result<Arc<LiveMetrics>> {
        let listener = TcpListener::bind(addr)?;
        let m = Arc::new(LiveMetrics {
            state: Mutex::new(State::default()),
        });
        let served = Arc::clone(&m);
        std::thread::Builder::new()
            .name("lg-metrics".into())
            .spawn(move || {
                let clients = Arc::new(Mutex::new(Clients::default()));
                for stream in listener.incoming().flatten() {
                    let Some(id) = Clients::admit(&clients, &stream) else {
                        continue;
                    };
                    let (m, clients) = (Arc::clone(&served), Arc::clone(&clients));
                    let gone = Arc::clone(&clients);
                    let spawned = std::thread::Builder::new()
                        .name("lg-metrics-conn".into())
                        .stack_size(128 << 10)
                        .spawn(move || {
                            let _ = m.answer(stream, || Clients::answering(&clients, id));
                            Clients::leave(&clients, id);
                        });
                    if spawned.is_err() {
                        Clients::leave(&gone, id);
                    }
                }
            })?;
        Ok(m)
    }

    /// Reads one request (all of its headers within [`CLIENT_TIMEOUT`]) and answers it if
    /// `read`, called once the request is in, allows.
    fn answer(&self, mut s: TcpStream, read: impl FnOnce() -> bool) -> std::io::Result<()> {
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            s.set_read_timeout(Some(left))?;
            let n = s.read(&mut buf)?;
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        if !read() {
            return Ok(());
        }
        let line = String::from_utf8_lossy(&req);
        let path = line.split_whitespace().nth(1).unwrap_or("");
        let (status, ctype, body) = if path == "/metrics" {
            ("200 OK", "text/plain; version=0.0.4", self.render())
        } else {
            ("404 Not Found", "text/plain", "see /metrics\n".to_string())
        };
        // One write: `write!` on the socket would send each formatted piece as a segment of
        // its own, and with Nagle's algorithm a later piece waits for an ACK.
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.set_nodelay(true)?;
        s.write_all(answer.as_bytes())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn begin_point(&self, index: usize) {
        let mut s = self.lock();
        s.point = index;
        s.running = true;
        s.verdict = None;
        s.cur_ios = [0, 0];
        s.cur_bytes = [0, 0];
    }

    pub fn tick(&self, live: &[JobLive]) {
        let mut s = self.lock();
        for d in 0..2 {
            s.cur_ios[d] = live.iter().map(|l| l.ios(d)).sum();
            s.cur_bytes[d] = live.iter().map(|l| l.bytes(d)).sum();
        }
    }

    pub fn row(&self, row: &TimelineRow, dirs: &[DirInterval; 2]) {
        let mut s = self.lock();
        for (d, di) in dirs.iter().enumerate() {
            s.lat[d].merge(&di.total);
        }
        s.last = Some(row.clone());
    }

    pub fn verdict(&self, v: &LiveVerdict) {
        self.lock().verdict = Some(v.clone());
    }

    pub fn end_point(&self) {
        let mut s = self.lock();
        for d in 0..2 {
            s.done_ios[d] += s.cur_ios[d];
            s.done_bytes[d] += s.cur_bytes[d];
        }
        s.cur_ios = [0, 0];
        s.cur_bytes = [0, 0];
        s.running = false;
    }

    /// The Prometheus text format of the run so far (rendered by the prometheus crate).
    pub fn render(&self) -> String {
        let s = self.lock();
        let ops = ["read", "write"];
        let per_op = |make: fn(&[(&str, &str)], f64) -> Metric, v: [f64; 2]| -> Vec<Metric> {
            ops.iter()
                .zip(v)
                .map(|(op, v)| make(&[("op", op)], v))
                .collect()
        };
        let mut out = vec![
            family(
                "stornet_loadgen_ios_total",
                "IOs completed by loadgen (ramp included).",
                MetricType::COUNTER,
                per_op(
                    counter,
                    [0, 1].map(|d| (s.done_ios[d] + s.cur_ios[d]) as f64),
                ),
            ),
            family(
                "stornet_loadgen_bytes_total",
                "Bytes transferred by loadgen (ramp included).",
                MetricType::COUNTER,
                per_op(
                    counter,
                    [0, 1].map(|d| (s.done_bytes[d] + s.cur_bytes[d]) as f64),
                ),
            ),
            family(
                "stornet_loadgen_latency_seconds",
                "Latency of measured IOs from their intended start to completion.",
                MetricType::HISTOGRAM,
                ops.iter()
                    .zip(&s.lat)
                    .map(|(op, h)| histogram(op, h))
                    .collect(),
            ),
        ];
        if let Some(r) = &s.last {
            out.push(family(
                "stornet_loadgen_interval_latency_seconds",
                "Latency from intended start: quantiles over the last interval, count and sum over all measured IOs.",
                MetricType::SUMMARY,
                ops.iter()
                    .zip([&r.read, &r.write])
                    .zip(&s.lat)
                    .map(|((op, d), h)| summary(op, &d.lat_ns, h))
                    .collect(),
            ));
            out.push(family(
                "stornet_loadgen_interval_iops",
                "IOs per second over the last interval.",
                MetricType::GAUGE,
                per_op(gauge, [r.read.iops, r.write.iops]),
            ));
            out.push(family(
                "stornet_loadgen_queue_depth",
                "Average IOs in flight over the last interval.",
                MetricType::GAUGE,
                vec![gauge(&[], r.queue_depth)],
            ));
            out.push(family(
                "stornet_loadgen_process_cpu_ratio",
                "CPU of the loadgen process over the last interval, in CPUs.",
                MetricType::GAUGE,
                vec![gauge(&[], r.cpu_process_pct / 100.0)],
            ));
        }
        if let Some(v) = &s.verdict {
            out.push(family(
                "stornet_loadgen_verdict",
                "The verdict on the running point's intervals so far (with --agent): one series, labelled with the cause and where it acts; the value is its confidence (0 to 1).",
                MetricType::GAUGE,
                vec![gauge(
                    &[
                        ("cause", v.cause.name()),
                        ("location", v.location.as_deref().unwrap_or("")),
                    ],
                    v.confidence,
                )],
            ));
        }
        out.push(family(
            "stornet_loadgen_point",
            "Index of the sweep point running (or last run).",
            MetricType::GAUGE,
            vec![gauge(&[], s.point as f64)],
        ));
        out.push(family(
            "stornet_loadgen_running",
            "1 while a point is running.",
            MetricType::GAUGE,
            vec![gauge(&[], f64::from(u8::from(s.running)))],
        ));
        let mut buf = Vec::new();
        // Encoding into memory fails only on families the code above cannot build (a
        // metric without a value of its family's type).
        if let Err(e) = TextEncoder::new().encode(&out, &mut buf) {
            return format!("# loadgen could not render its metrics: {e}\n");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut f = MetricFamily::default();
    f.set_name(name.to_string());
    f.set_help(help.to_string());
    f.set_field_type(kind);
    f.set_metric(metrics);
    f
}

fn labelled(labels: &[(&str, &str)]) -> Metric {
    let mut m = Metric::default();
    m.set_label(
        labels
            .iter()
            .map(|(k, v)| {
                let mut l = proto::LabelPair::default();
                l.set_name(k.to_string());
                l.set_value(v.to_string());
                l
            })
            .collect(),
    );
    m
}

fn gauge(labels: &[(&str, &str)], v: f64) -> Metric {
    let mut m = labelled(labels);
    let mut g = proto::Gauge::default();
    g.set_value(v);
    m.set_gauge(g);
    m
}

fn counter(labels: &[(&str, &str)], v: f64) -> Metric {
    let mut m = labelled(labels);
    let mut c = proto::Counter::default();
    c.set_value(v);
    m.set_counter(c);
    m
}

/// The cumulative latency histogram of one direction, in fixed buckets so that hosts merge.
fn histogram(op: &str, h: &Histogram) -> Metric {
    let mut ph = proto::Histogram::default();
    ph.set_sample_count(h.count());
    ph.set_sample_sum(h.mean() * h.count() as f64 / 1e9);
    ph.set_bucket(
        BUCKETS_S
            .iter()
            .map(|&le| {
                let mut b = proto::Bucket::default();
                b.set_upper_bound(le);
                b.set_cumulative_count(h.count_at_most((le * 1e9) as u64));
                b
            })
            .collect(),
    );
    let mut m = labelled(&[("op", op)]);
    m.set_histogram(ph);
    m
}

/// The last interval's quantiles (as Prometheus clients' summaries, over a recent window)
/// with the count and sum of every measured IO.
fn summary(op: &str, lat: &LatencySummary, all: &Histogram) -> Metric {
    let mut ps = proto::Summary::default();
    ps.set_sample_count(all.count());
    ps.set_sample_sum(all.mean() * all.count() as f64 / 1e9);
    ps.set_quantile(
        [
            (0.5, lat.p50),
            (0.9, lat.p90),
            (0.99, lat.p99),
            (0.999, lat.p99_9),
            (1.0, lat.max),
        ]
        .iter()
        .map(|&(q, ns)| {
            let mut pq = proto::Quantile::default();
            pq.set_quantile(q);
            pq.set_value(ns as f64 / 1e9);
            pq
        })
        .collect(),
    );
    let mut m = labelled(&[("op", op)]);
    m.set_summary(ps);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::timeline::DirRow;

    #[test]
    fn interval_latency_is_a_summary_with_quantiles() {
        let m = LiveMetrics {
            state: Mutex::new(State::default()),
        };
        let mut reads = DirInterval::default();
        for us in [100, 200, 300, 4000] {
            reads.total.record(us * 1000);
        }
        let read = DirRow {
            lat_ns: reads.total.summary(),
            iops: 4.0,
            ..DirRow::default()
        };
        let row = TimelineRow {
            read: read.clone(),
            ..TimelineRow::default()
        };
        m.row(&row, &[reads, DirInterval::default()]);
        let text = m.render();
        let samples = promclient::text::parse(&text).unwrap();
        let value = |name: &str, labels: &[(&str, &str)]| {
            samples
                .iter()
                .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v)))
                .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
                .value
        };
        let name = "stornet_loadgen_interval_latency_seconds";
        assert!(text.contains(&format!("# TYPE {name} summary\n")), "{text}");
        assert!(!text.contains("percentile"), "{text}");
        for (q, ns) in [
            ("0.5", read.lat_ns.p50),
            ("0.99", read.lat_ns.p99),
            ("1", read.lat_ns.max),
        ] {
            assert_eq!(
                value(name, &[("op", "read"), ("quantile", q)]),
                ns as f64 / 1e9,
                "quantile {q}"
            );
        }
        // The summary counts what the cumulative histogram counts.
        assert_eq!(value(&format!("{name}_count"), &[("op", "read")]), 4.0);
        assert_eq!(
            value("stornet_loadgen_latency_seconds_count", &[("op", "read")]),
            4.0
        );
        assert_eq!(
            value(
                "stornet_loadgen_latency_seconds_bucket",
                &[("op", "read"), ("le", "0.0025")]
            ),
            3.0
        );
        assert!(text.contains("# TYPE stornet_loadgen_ios_total counter\n"));
        assert_eq!(value("stornet_loadgen_running", &[]), 0.0);
    }

    #[test]
    fn the_live_verdict_is_one_series_replaced_as_it_changes() {
        let m = LiveMetrics {
            state: Mutex::new(State::default()),
        };
        m.begin_point(0);
        assert!(!m.render().contains("stornet_loadgen_verdict"));
        let series = |m: &LiveMetrics| -> Vec<(String, String, f64)> {
            promclient::text::parse(&m.render())
                .unwrap()
                .iter()
                .filter(|s| s.name == "stornet_loadgen_verdict")
                .map(|s| {
                    let l = |k| s.label(k).unwrap_or("-").to_string();
                    (l("cause"), l("location"), s.value)
                })
                .collect()
        };
        let mut v = LiveVerdict {
            intervals: 7,
            cause: analysis::Cause::InsufficientData,
            location: None,
            confidence: 0.0,
        };
        m.verdict(&v);
        assert_eq!(series(&m), [("insufficient_data".into(), "".into(), 0.0)]);
        v.cause = analysis::Cause::SlowDevice;
        v.location = Some("device loop0 on a".into());
        v.confidence = 0.81;
        m.verdict(&v);
        assert_eq!(
            series(&m),
            [("slow_device".into(), "device loop0 on a".into(), 0.81)]
        );
        // A new point starts without one.
        m.begin_point(1);
        assert!(series(&m).is_empty());
    }
}
