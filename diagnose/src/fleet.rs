//! Fleet mode: the agents' signals read back from Prometheus with range queries, one host per
//! `instance`, in the same analysis model as a run record. Counters become their increase
//! over each step (0 before the first sample of one the agent creates at its first event),
//! gauges their average, histograms their `_sum`/`_count` increase for
//! means and their buckets for percentiles. Without loadgen there is no application
//! latency: each host's latency is its block layer's (queue plus service time), see
//! `docs/analysis.md` and `docs/run-record.md` for what that leaves out.

use std::collections::BTreeMap;

use analysis::{BlockOp, Host, Latency, Run, Series};
use metric_names::labels::{DEVICE, OP};

use crate::signals::{self, FAMILIES, Field, Fold, Key, MetricType, SignalFamily, Values};
use promclient::query::{self, MatrixSeries, QueryError, Range};
use promclient::{Client, Url};

/// Prometheus refuses range queries with more points than this.
const MAX_POINTS: f64 = 11_000.0;
/// The most answer bytes read over all the queries of one analysis (millions of points):
/// the answers are all held until the analysis input is built, in a few times their size.
pub const MAX_ANSWERS: usize = 256 << 20;

/// A fleet query: where, which window, which hosts.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub url: Url,
    /// With the TLS settings and credentials of `--prometheus-*`.
    pub client: Client,
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    pub step: f64,
    /// Label matchers added to every selector (`instance=~"stor.*"`), without braces.
    pub matchers: String,
    /// All the queries of one evaluation together.
    pub timeout: std::time::Duration,
}

/// The evaluation grid: interval `i` covers `(start + i·step, start + (i+1)·step]` and is
/// evaluated at its end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    pub start: f64,
    pub step: f64,
    pub n: usize,
}

impl Grid {
    fn index(&self, t: f64) -> Option<usize> {
        let k = ((t - self.start) / self.step).round() - 1.0;
        (k >= 0.0 && (k as usize) < self.n).then_some(k as usize)
    }
    fn query_start(&self) -> f64 {
        self.start + self.step
    }
    fn query_end(&self) -> f64 {
        self.start + self.step * self.n as f64
    }
}

impl Fleet {
    /// Checks the window; the error is a usage error.
    pub fn grid(&self) -> Result<Grid, String> {
        if !(self.step.is_finite() && self.step >= 0.001) {
            return Err(format!("--step must be at least 1ms, not {}s", self.step));
        }
        if self.end.partial_cmp(&self.start) != Some(std::cmp::Ordering::Greater) {
            return Err("--end must be after --start".into());
        }
        let n = ((self.end - self.start) / self.step + 1e-9).floor();
        if n < 1.0 {
            return Err(format!(
                "the window from --start to --end is shorter than one --step ({}s)",
                self.step
            ));
        }
        if n > MAX_POINTS {
            return Err(format!(
                "{n} steps between --start and --end; Prometheus answers at most {MAX_POINTS}: use a larger --step"
            ));
        }
        Ok(Grid {
            start: self.start,
            step: self.step,
            n: n as usize,
        })
    }

    fn window(&self) -> String {
        format!("{}ms", (self.step * 1000.0).round() as u64)
    }

    fn selector(&self, metric: &str) -> String {
        format!("{metric}{{{}}}", self.matchers)
    }
}

/// Turns `{instance=~"a.*"}` or `instance=~"a.*"` into the matchers inside the braces.
pub fn matchers(selector: &str) -> Result<String, String> {
    let s = selector.trim();
    let inner = match (s.strip_prefix('{'), s.ends_with('}')) {
        (Some(rest), true) => &rest[..rest.len() - 1],
        (None, false) => s,
        _ => return Err(format!("--selector `{selector}`: unbalanced braces")),
    };
    if inner.contains(['{', '}']) {
        return Err(format!(
            "--selector `{selector}`: give label matchers only, e.g. '{{instance=~\"stor.*\"}}'"
        ));
    }
    Ok(inner.trim().to_string())
}

/// What a query result fills.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Family(Field),
    /// A percentile of a block-layer histogram, per instance and op.
    Quantile {
        histogram: &'static str,
        q: f64,
    },
}

/// Every query fleet mode makes, with the PromQL.
pub fn queries(f: &Fleet) -> Vec<(Target, String)> {
    let w = f.window();
    let mut out: Vec<(Target, String)> = FAMILIES
        .iter()
        .filter(|fam| fam.field != Field::AgentStart)
        .map(|fam| (Target::Family(fam.field), family_query(f, fam, &w)))
        .collect();
    for histogram in [signals::QUEUE_HISTOGRAM, signals::SERVICE_HISTOGRAM] {
        for q in [0.5, 0.99] {
            out.push((
                Target::Quantile { histogram, q },
                format!(
                    "histogram_quantile({q}, sum by (instance, device, op, le) (increase({}[{w}])))",
                    f.selector(&format!("{histogram}_bucket"))
                ),
            ));
        }
    }
    out
}

fn family_query(f: &Fleet, fam: &SignalFamily, w: &str) -> String {
    let by = std::iter::once("instance")
        .chain(fam.labels.iter().copied())
        .collect::<Vec<_>>()
        .join(", ");
    let sel = f.selector(&fam.series());
    match fam.kind {
        MetricType::Counter { .. } => format!("sum by ({by}) (increase({sel}[{w}]))"),
        MetricType::Gauge => {
            let fold = match fam.fold {
                Fold::Sum => "sum",
                Fold::Min => "min",
                Fold::Max => "max",
            };
            format!("{fold} by ({by}) (avg_over_time({sel}[{w}]))")
        }
    }
}

/// One range query over the fleet's grid.
pub(crate) fn query_range(
    f: &Fleet,
    g: &Grid,
    promql: &str,
    budget: &mut usize,
    timeout: std::time::Duration,
) -> Result<Vec<MatrixSeries>, QueryError> {
    let range = Range {
        start: g.query_start(),
        end: g.query_end(),
        step: g.step,
    };
    query::query_range(&f.client, &f.url, promql, range, budget, timeout)
}

/// The most one query may take.
pub(crate) const QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The answers of every query, by target.
pub type Answers<T = Target> = Vec<(T, Vec<MatrixSeries>)>;

/// Runs every query against Prometheus.
pub fn fetch(f: &Fleet) -> Result<(Grid, Answers), QueryError> {
    let g = f.grid().map_err(QueryError::Refused)?;
    let mut out = Vec::new();
    let mut budget = MAX_ANSWERS;
    let until = std::time::Instant::now() + f.timeout;
    let all = queries(f);
    let n = all.len();
    let late = |i: usize| {
        QueryError::Failed(format!(
            "Prometheus at {} answered {i} of {n} queries within {} s (--timeout)",
            f.url.display(),
            f.timeout.as_secs_f64()
        ))
    };
    for (i, (target, promql)) in all.into_iter().enumerate() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(late(i));
        }
        match query_range(f, &g, &promql, &mut budget, left.min(QUERY_TIMEOUT)) {
            Ok(a) => out.push((target, a)),
            Err(QueryError::Failed(_)) if std::time::Instant::now() >= until => {
                return Err(late(i));
            }
            Err(e) => return Err(e),
        }
    }
    Ok((g, out))
}

pub(crate) fn series_of(points: &[(f64, f64)], g: &Grid) -> Series {
    let mut s: Series = vec![None; g.n];
    for &(t, v) in points {
        if let Some(i) = g.index(t) {
            s[i] = v.is_finite().then_some(v);
        }
    }
    s
}

/// Requests per interval, on average, a device needs before its latency is analysed: a
/// handful of requests makes no percentile.
const MIN_REQUESTS_PER_INTERVAL: f64 = 10.0;

/// Percentile series of one device and op: queue p50, queue p99, service p50, service p99.
type Quantiles = [Series; 4];

/// Builds the analysis input from the answers: one host per instance.
pub fn build(g: &Grid, answers: &Answers) -> Run {
    let mut values: BTreeMap<String, Values> = BTreeMap::new();
    // (instance, device, op) → percentiles
    let mut quantiles: BTreeMap<(String, String, String), Quantiles> = BTreeMap::new();
    for (target, result) in answers {
        for (labels, points) in result {
            let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
            let s = series_of(points, g);
            match target {
                Target::Family(field) => {
                    let fam = signals::family_of(*field);
                    let key = Key {
                        field: *field,
                        labels: fam.labels.iter().map(|l| label(l)).collect(),
                    };
                    values.entry(label("instance")).or_default().insert(key, s);
                }
                Target::Quantile { histogram, q } => {
                    let slot = usize::from(*histogram == signals::SERVICE_HISTOGRAM) * 2
                        + usize::from(*q > 0.5);
                    quantiles
                        .entry((label("instance"), label(DEVICE), label(OP)))
                        .or_default()[slot] = s;
                }
            }
        }
    }
    for v in values.values_mut() {
        born_at_zero(v, g.n);
    }
    let hosts = values
        .iter()
        .map(|(instance, v)| {
            let mut h = signals::host(instance, address(instance), v, g.n);
            signals::drop_own_peers(&mut h);
            let mut devices = Vec::new();
            for op in ["read", "write"] {
                let Some(dev) = busiest(&h, op, g) else {
                    continue;
                };
                let q = quantiles.get(&(instance.clone(), dev.clone(), op.to_string()));
                let lat = block_latency(&h.devices[&dev].ops[op], g, q);
                if lat.is_some() && !devices.contains(&dev) {
                    devices.push(dev);
                }
                if op == "read" {
                    h.read = lat;
                } else {
                    h.write = lat;
                }
            }
            h.local_devices = devices;
            h
        })
        .collect();
    Run {
        interval_seconds: g.step,
        starts: (0..g.n).map(|i| g.start + i as f64 * g.step).collect(),
        hosts,
    }
}

/// The agent creates a series of an eBPF counter at its first event (a peer's first
/// retransmit), and Prometheus has no sample of it before then: where the instance answered
/// for anything else, such a counter's increase is 0, not unknown. Left unknown, a peer's
/// retransmits that begin with a fault have no quiet intervals to correlate against.
fn born_at_zero(v: &mut Values, n: usize) {
    let scraped: Vec<bool> = (0..n)
        .map(|i| v.values().any(|s| s.get(i).is_some_and(Option::is_some)))
        .collect();
    for (key, s) in v.iter_mut() {
        if signals::family_of(key.field).kind != (MetricType::Counter { born_at_zero: true }) {
            continue;
        }
        for (x, &up) in s.iter_mut().zip(&scraped) {
            if x.is_none() && up {
                *x = Some(0.0);
            }
        }
    }
}

/// The device that completed the most requests of an op, if it completed enough to analyse.
fn busiest(h: &Host, op: &str, g: &Grid) -> Option<String> {
    h.devices
        .iter()
        .filter(|(name, _)| *name != "other")
        .filter_map(|(name, d)| {
            let total: f64 = d.ops.get(op)?.ios.iter().flatten().sum();
            Some((total, name))
        })
        .filter(|(total, _)| *total >= MIN_REQUESTS_PER_INTERVAL * g.n as f64)
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(a.1)))
        .map(|(_, name)| name.clone())
}

/// The address of an instance named `IP:PORT` (or a bare IP).
fn address(instance: &str) -> Vec<String> {
    let ip = instance
        .parse::<std::net::SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| instance.parse::<std::net::IpAddr>());
    match ip {
        Ok(ip) if !ip.is_loopback() => vec![ip.to_string()],
        _ => Vec::new(),
    }
}

/// A device's block-layer latency for one op: IOPS from its requests, the mean as queue
/// plus service time, the percentiles as the sum of the queue and service percentiles (an
/// upper bound: the two are not added request by request).
fn block_latency(o: &BlockOp, g: &Grid, q: Option<&Quantiles>) -> Option<Latency> {
    let q = q?;
    let at = |s: &Series, i: usize| s.get(i).copied().flatten();
    let add = |a: &Series, b: &Series| -> Series {
        let a_missing = a.iter().all(Option::is_none);
        (0..g.n)
            .map(|i| match (at(a, i), at(b, i)) {
                (Some(x), Some(y)) => Some(x + y),
                // Without queue times (no start stamps on this queue) the service time is all.
                (None, Some(y)) if a_missing => Some(y),
                _ => None,
            })
            .collect()
    };
    let p99 = add(&q[1], &q[3]);
    if !p99.iter().any(Option::is_some) {
        return None;
    }
    Some(Latency {
        iops: o.ios.iter().map(|v| v.map(|x| x / g.step)).collect(),
        p50_seconds: add(&q[0], &q[2]),
        p99_seconds: p99,
        mean_seconds: add(&o.queue_seconds, &o.service_seconds),
        ..Latency::default()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use promclient::query::parse_matrix;

    fn fleet() -> Fleet {
        Fleet {
            client: Client::default(),
            url: Url::parse("http://127.0.0.1:9090").unwrap(),
            start: 1000.0,
            end: 1020.0,
            step: 5.0,
            matchers: matchers("{instance=~\"stor.*\"}").unwrap(),
            timeout: std::time::Duration::from_secs(120),
        }
    }

    #[test]
    fn queries_carry_the_selector_window_and_grouping() {
        let q = queries(&fleet());
        let find = |field: Field| {
            q.iter()
                .find(|(t, _)| *t == Target::Family(field))
                .map(|(_, s)| s.as_str())
                .unwrap()
        };
        assert_eq!(
            find(Field::TcpRetransmits),
            "sum by (instance, peer) (increase(stornet_tcp_retransmits_total{instance=~\"stor.*\"}[5000ms]))"
        );
        assert_eq!(
            find(Field::BlockQueueLimit),
            "min by (instance, device) (avg_over_time(stornet_block_queue_limit{instance=~\"stor.*\"}[5000ms]))"
        );
        assert!(q.iter().any(|(_, s)| s
            == "histogram_quantile(0.99, sum by (instance, device, op, le) (increase(stornet_block_service_seconds_bucket{instance=~\"stor.*\"}[5000ms])))"));
        assert!(
            !q.iter()
                .any(|(t, _)| *t == Target::Family(Field::AgentStart))
        );
        assert_eq!(matchers("").unwrap(), "");
        assert_eq!(matchers(" job=\"a\" ").unwrap(), "job=\"a\"");
        assert!(matchers("{job=\"a\"").is_err());
        assert!(matchers("up{job=\"a\"}").is_err());
    }

    #[test]
    fn the_window_is_checked() {
        let mut f = fleet();
        assert_eq!(
            f.grid().unwrap(),
            Grid {
                start: 1000.0,
                step: 5.0,
                n: 4
            }
        );
        f.end = 1003.0;
        assert!(f.grid().unwrap_err().contains("shorter than one --step"));
        f.end = 900.0;
        assert!(f.grid().is_err());
        f.end = 1e9;
        f.step = 1.0;
        assert!(f.grid().unwrap_err().contains("at most"));
    }

    /// A query_range answer captured from Debian's Prometheus scraping the agent during a
    /// loadgen run (`sum by (instance, device, op) (increase(
    /// stornet_block_io_size_bytes_count{device="loop0"}[2000ms]))`, step 2 s).
    const CAPTURED: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"device":"loop0","instance":"127.0.0.1:19481","op":"read"},"values":[[1796013455,"540"],[1796013457,"508"],[1796013459,"504"],[1796013461,"462"]]},{"metric":{"device":"loop0","instance":"127.0.0.1:19481","op":"write"},"values":[[1796013455,"458"],[1796013457,"492"],[1796013459,"496"],[1796013461,"536"]]}]}}"#;
    /// Its answer to a query that does not parse.
    const CAPTURED_ERROR: &str = r#"{"status":"error","errorType":"bad_data","error":"1:18: parse error: unexpected \"(\" in grouping opts, expected \",\" or \")\""}"#;

    #[test]
    fn answers_are_read_onto_the_grid() {
        // The window the answer was asked for: from 1796013453 in steps of 2 s.
        let g = Grid {
            start: 1_796_013_451.0,
            step: 2.0,
            n: 5,
        };
        let m = parse_matrix(CAPTURED).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].0["device"], "loop0");
        assert_eq!(m[1].0["op"], "write");
        assert_eq!(
            series_of(&m[1].1, &g),
            vec![None, Some(458.0), Some(492.0), Some(496.0), Some(536.0)]
        );
        let run = build(&g, &vec![(Target::Family(Field::BlockRequests), m)]);
        let h = &run.hosts[0];
        assert_eq!(h.name, "127.0.0.1:19481");
        assert!(h.addresses.is_empty(), "loopback is no host address");
        assert_eq!(h.devices["loop0"].ops["read"].ios[1], Some(540.0));
        let e = parse_matrix(CAPTURED_ERROR).unwrap_err();
        assert!(e.starts_with("bad_data: 1:18: parse error"), "{e}");
        assert!(parse_matrix("<html>").is_err());
        assert!(
            parse_matrix(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
                .is_err()
        );
    }

    fn answer(labels: &[(&str, &str)], values: &[f64]) -> MatrixSeries {
        matrix(1005.0, 5.0, labels, values)
    }

    /// A range query's series: `values` every `step` seconds from `start`.
    pub(crate) fn matrix(
        start: f64,
        step: f64,
        labels: &[(&str, &str)],
        values: &[f64],
    ) -> MatrixSeries {
        (
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (start + step * i as f64, *v))
                .collect(),
        )
    }

    #[test]
    fn hosts_get_block_latency_and_signals() {
        let g = fleet().grid().unwrap();
        let inst = ("instance", "198.18.7.1:9477");
        let dev = [inst, ("device", "loop3"), ("op", "write")];
        let answers: Answers = vec![
            (
                Target::Family(Field::BlockRequests),
                vec![
                    answer(&dev, &[500.0, 500.0, 0.0, 500.0]),
                    // A system disk's few reads and writes: too few to analyse, and not
                    // the busiest for writes.
                    answer(
                        &[inst, ("device", "vda"), ("op", "read")],
                        &[3.0, 0.0, 9.0, 0.0],
                    ),
                    answer(&[inst, ("device", "vda"), ("op", "write")], &[90.0; 4]),
                ],
            ),
            (
                Target::Family(Field::BlockQueueSum),
                vec![answer(&dev, &[0.5, 0.5, 0.0, 0.5])],
            ),
            (
                Target::Family(Field::BlockQueueCount),
                vec![answer(&dev, &[500.0, 500.0, 0.0, 500.0])],
            ),
            (
                Target::Family(Field::BlockServiceSum),
                vec![answer(&dev, &[0.25, 0.25, 0.0, 0.25])],
            ),
            (
                Target::Family(Field::BlockServiceCount),
                vec![answer(&dev, &[500.0, 500.0, 0.0, 500.0])],
            ),
            (
                Target::Family(Field::TcpRetransmits),
                vec![
                    answer(&[inst, ("peer", "198.18.7.2")], &[0.0, 40.0, 2.0, 0.0]),
                    // A peer's first retransmit in the third interval: the agent made
                    // the series then.
                    matrix(1015.0, 5.0, &[inst, ("peer", "198.18.7.3")], &[7.0, 1.0]),
                ],
            ),
            (
                Target::Quantile {
                    histogram: signals::QUEUE_HISTOGRAM,
                    q: 0.99,
                },
                vec![answer(&dev, &[0.004, 0.004, f64::NAN, 0.004])],
            ),
            (
                Target::Quantile {
                    histogram: signals::SERVICE_HISTOGRAM,
                    q: 0.99,
                },
                vec![answer(&dev, &[0.001, 0.001, f64::NAN, 0.002])],
            ),
        ];
        let run = build(&g, &answers);
        assert_eq!(run.starts, vec![1000.0, 1005.0, 1010.0, 1015.0]);
        run.validate().unwrap();
        let h = &run.hosts[0];
        assert_eq!(h.name, "198.18.7.1:9477");
        assert_eq!(h.addresses, vec!["198.18.7.1"]);
        assert_eq!(h.local_devices, vec!["loop3"]);
        assert!(h.read.is_none(), "12 reads in 4 intervals are too few");
        let w = h.write.as_ref().unwrap();
        assert_eq!(
            w.iops,
            vec![Some(100.0), Some(100.0), Some(0.0), Some(100.0)]
        );
        assert_eq!(
            w.p99_seconds,
            vec![Some(0.005), Some(0.005), None, Some(0.006)]
        );
        assert_eq!(w.mean_seconds[0], Some(0.0015));
        assert_eq!(w.mean_seconds[2], None, "no requests: no mean");
        assert_eq!(h.peers["198.18.7.2"].retransmits[1], Some(40.0));
        assert_eq!(
            h.peers["198.18.7.3"].retransmits,
            vec![Some(0.0), Some(0.0), Some(7.0), Some(1.0)],
            "an eBPF counter is 0 before its series exists"
        );
    }

    #[test]
    fn a_counter_is_unknown_where_the_instance_answered_nothing() {
        let g = fleet().grid().unwrap();
        let inst = ("instance", "198.18.7.1:9477");
        let answers: Answers = vec![
            (
                Target::Family(Field::TcpRetransmits),
                vec![matrix(1015.0, 5.0, &[inst, ("peer", "198.18.7.3")], &[7.0])],
            ),
            (
                Target::Family(Field::TcpSrtt),
                vec![matrix(
                    1010.0,
                    5.0,
                    &[inst, ("peer", "198.18.7.3")],
                    &[0.001; 2],
                )],
            ),
        ];
        let run = build(&g, &answers);
        assert_eq!(
            run.hosts[0].peers["198.18.7.3"].retransmits,
            vec![None, Some(0.0), Some(7.0), None],
            "the agent was not scraped in the first and last intervals"
        );
    }
}
