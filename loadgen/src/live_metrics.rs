//! `--metrics-address`: the run's live metrics in Prometheus text format on `/metrics`,
//! updated every interval. Latency is a cumulative histogram of the open-loop latency (from
//! each IO's intended start) with fixed buckets, so that Prometheus can merge hosts with
//! `histogram_quantile`; the last interval's percentiles are gauges.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::JobLive;
use crate::histogram::Histogram;
use crate::timeline::{DirInterval, TimelineRow};

/// Bucket bounds of `stornet_loadgen_latency_seconds`.
const BUCKETS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Scrapers served at once; more connections are closed unanswered.
const MAX_CLIENTS: usize = 32;
/// Time a client has to send its request, and to take each part of the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    /// IOs and bytes of finished points, and of the running one.
    done_ios: [u64; 2],
    done_bytes: [u64; 2],
    cur_ios: [u64; 2],
    cur_bytes: [u64; 2],
    lat: [Histogram; 2],
    last: Option<TimelineRow>,
    point: usize,
    running: bool,
}

pub struct LiveMetrics {
    state: Mutex<State>,
}

impl LiveMetrics {
    /// Binds `addr` and serves `/metrics` from background threads for the rest of the run:
    /// one per connection, at most [`MAX_CLIENTS`] at once, so a slow client delays only
    /// itself.
    pub fn serve(addr: SocketAddr) -> std::io::Result<Arc<LiveMetrics>> {
        let listener = TcpListener::bind(addr)?;
        let m = Arc::new(LiveMetrics {
            state: Mutex::new(State::default()),
        });
        let served = Arc::clone(&m);
        std::thread::Builder::new()
            .name("lg-metrics".into())
            .spawn(move || {
                let clients = Arc::new(AtomicUsize::new(0));
                for stream in listener.incoming().flatten() {
                    if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                        clients.fetch_sub(1, Ordering::AcqRel);
                        continue;
                    }
                    let (m, count) = (Arc::clone(&served), Arc::clone(&clients));
                    let spawned = std::thread::Builder::new()
                        .name("lg-metrics-conn".into())
                        .stack_size(128 << 10)
                        .spawn(move || {
                            let _ = m.answer(stream);
                            count.fetch_sub(1, Ordering::AcqRel);
                        });
                    if spawned.is_err() {
                        clients.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })?;
        Ok(m)
    }

    /// Reads one request (all of its headers within [`CLIENT_TIMEOUT`]) and answers it.
    fn answer(&self, mut s: TcpStream) -> std::io::Result<()> {
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
        let line = String::from_utf8_lossy(&req);
        let path = line.split_whitespace().nth(1).unwrap_or("");
        let (status, ctype, body) = if path == "/metrics" {
            ("200 OK", "text/plain; version=0.0.4", self.render())
        } else {
            ("404 Not Found", "text/plain", "see /metrics\n".to_string())
        };
        write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn begin_point(&self, index: usize) {
        let mut s = self.lock();
        s.point = index;
        s.running = true;
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

    pub fn render(&self) -> String {
        let s = self.lock();
        let mut o = String::new();
        let ops = ["read", "write"];
        family_push(
            &mut o,
            "stornet_loadgen_ios_total",
            "counter",
            "IOs completed by loadgen (ramp included).",
        );
        for (d, op) in ops.iter().enumerate() {
            o.push_str(&format!(
                "stornet_loadgen_ios_total{{op=\"{op}\"}} {}\n",
                s.done_ios[d] + s.cur_ios[d]
            ));
        }
        family_push(
            &mut o,
            "stornet_loadgen_bytes_total",
            "counter",
            "Bytes transferred by loadgen (ramp included).",
        );
        for (d, op) in ops.iter().enumerate() {
            o.push_str(&format!(
                "stornet_loadgen_bytes_total{{op=\"{op}\"}} {}\n",
                s.done_bytes[d] + s.cur_bytes[d]
            ));
        }
        family_push(
            &mut o,
            "stornet_loadgen_latency_seconds",
            "histogram",
            "Latency of measured IOs from their intended start to completion.",
        );
        for (d, op) in ops.iter().enumerate() {
            let h = &s.lat[d];
            for le in BUCKETS_S {
                o.push_str(&format!(
                    "stornet_loadgen_latency_seconds_bucket{{op=\"{op}\",le=\"{le}\"}} {}\n",
                    h.count_at_most((le * 1e9) as u64)
                ));
            }
            o.push_str(&format!(
                "stornet_loadgen_latency_seconds_bucket{{op=\"{op}\",le=\"+Inf\"}} {}\n",
                h.count()
            ));
            o.push_str(&format!(
                "stornet_loadgen_latency_seconds_sum{{op=\"{op}\"}} {}\n",
                h.mean() * h.count() as f64 / 1e9
            ));
            o.push_str(&format!(
                "stornet_loadgen_latency_seconds_count{{op=\"{op}\"}} {}\n",
                h.count()
            ));
        }
        if let Some(r) = &s.last {
            family_push(
                &mut o,
                "stornet_loadgen_interval_latency_seconds",
                "gauge",
                "Latency percentiles from intended start over the last interval.",
            );
            for (op, d) in [("read", &r.read), ("write", &r.write)] {
                for (q, v) in [
                    ("50", d.lat_ns.p50),
                    ("90", d.lat_ns.p90),
                    ("99", d.lat_ns.p99),
                    ("99.9", d.lat_ns.p99_9),
                    ("100", d.lat_ns.max),
                ] {
                    o.push_str(&format!(
                        "stornet_loadgen_interval_latency_seconds{{op=\"{op}\",percentile=\"{q}\"}} {}\n",
                        v as f64 / 1e9
                    ));
                }
            }
            family_push(
                &mut o,
                "stornet_loadgen_interval_iops",
                "gauge",
                "IOs per second over the last interval.",
            );
            for (op, d) in [("read", &r.read), ("write", &r.write)] {
                o.push_str(&format!(
                    "stornet_loadgen_interval_iops{{op=\"{op}\"}} {}\n",
                    d.iops
                ));
            }
            family_push(
                &mut o,
                "stornet_loadgen_queue_depth",
                "gauge",
                "Average IOs in flight over the last interval.",
            );
            o.push_str(&format!("stornet_loadgen_queue_depth {}\n", r.queue_depth));
            family_push(
                &mut o,
                "stornet_loadgen_process_cpu_ratio",
                "gauge",
                "CPU of the loadgen process over the last interval, in CPUs.",
            );
            o.push_str(&format!(
                "stornet_loadgen_process_cpu_ratio {}\n",
                r.cpu_process_pct / 100.0
            ));
        }
        family_push(
            &mut o,
            "stornet_loadgen_point",
            "gauge",
            "Index of the sweep point running (or last run).",
        );
        o.push_str(&format!("stornet_loadgen_point {}\n", s.point));
        family_push(
            &mut o,
            "stornet_loadgen_running",
            "gauge",
            "1 while a point is running.",
        );
        o.push_str(&format!(
            "stornet_loadgen_running {}\n",
            u8::from(s.running)
        ));
        o
    }
}

fn family_push(o: &mut String, name: &str, kind: &str, help: &str) {
    o.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
}
