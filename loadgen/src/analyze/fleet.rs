//! Fleet mode: the agents' signals read back from Prometheus with range queries, one host per
//! `instance`, in the same analysis model as a run record. Counters become their increase
//! over each step, gauges their average, histograms their `_sum`/`_count` increase for
//! means and their buckets for percentiles. Without loadgen there is no application
//! latency: each host's latency is its block layer's (queue plus service time), see
//! `docs/analysis.md` and `docs/run-record.md` for what that leaves out.

use std::collections::BTreeMap;
use std::time::Duration;

use analysis::{Host, Latency, Run, Series};

use crate::agent_signals::{self, FAMILIES, Family, Field, Fold, Key, Kind, Values};
use crate::http::{self, Url};

/// Prometheus refuses range queries with more points than this.
const MAX_POINTS: f64 = 11_000.0;

/// A fleet query: where, which window, which hosts.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub url: Url,
    /// Unix seconds.
    pub start: f64,
    pub end: f64,
    pub step: f64,
    /// Label matchers added to every selector (`instance=~"stor.*"`), without braces.
    pub matchers: String,
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
    for histogram in [
        agent_signals::QUEUE_HISTOGRAM,
        agent_signals::SERVICE_HISTOGRAM,
    ] {
        for q in [0.5, 0.99] {
            out.push((
                Target::Quantile { histogram, q },
                format!(
                    "histogram_quantile({q}, sum by (instance, op, le) (increase({}[{w}])))",
                    f.selector(&format!("{histogram}_bucket"))
                ),
            ));
        }
    }
    out
}

fn family_query(f: &Fleet, fam: &Family, w: &str) -> String {
    let by = std::iter::once("instance")
        .chain(fam.labels.iter().copied())
        .collect::<Vec<_>>()
        .join(", ");
    let sel = f.selector(fam.metric);
    match fam.kind {
        Kind::Counter { .. } => format!("sum by ({by}) (increase({sel}[{w}]))"),
        Kind::Gauge => {
            let fold = match fam.fold {
                Fold::Sum => "sum",
                Fold::Min => "min",
                Fold::Max => "max",
            };
            format!("{fold} by ({by}) (avg_over_time({sel}[{w}]))")
        }
    }
}

/// One series of a matrix answer: its labels and (time, value) points.
pub type MatrixSeries = (BTreeMap<String, String>, Vec<(f64, f64)>);

/// Reads a `query_range` answer.
pub fn parse_matrix(body: &str) -> Result<Vec<MatrixSeries>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    if v["status"] != "success" {
        return Err(format!(
            "{}: {}",
            v["errorType"].as_str().unwrap_or("error"),
            v["error"].as_str().unwrap_or("no message")
        ));
    }
    if v["data"]["resultType"] != "matrix" {
        return Err(format!(
            "expected a matrix, got {}",
            v["data"]["resultType"]
        ));
    }
    let result = v["data"]["result"]
        .as_array()
        .ok_or("the answer has no result list")?;
    let mut out = Vec::with_capacity(result.len());
    for r in result {
        let labels: BTreeMap<String, String> = r["metric"]
            .as_object()
            .ok_or("a result without labels")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let mut points = Vec::new();
        for p in r["values"].as_array().ok_or("a result without values")? {
            let t = p[0].as_f64().ok_or("a point without a time")?;
            let s = p[1].as_str().ok_or("a point without a value")?;
            let x = match s {
                "NaN" => f64::NAN,
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                _ => s.parse().map_err(|_| format!("bad value {s:?}"))?,
            };
            points.push((t, x));
        }
        out.push((labels, points));
    }
    Ok(out)
}

/// A failed query: bad input (Prometheus refused the query) or the server's trouble.
#[derive(Debug)]
pub enum QueryError {
    Refused(String),
    Failed(String),
}

fn query_range(f: &Fleet, g: &Grid, promql: &str) -> Result<Vec<MatrixSeries>, QueryError> {
    let path = format!(
        "/api/v1/query_range?query={}&start={:.3}&end={:.3}&step={:.3}",
        http::encode(promql),
        g.query_start(),
        g.query_end(),
        g.step
    );
    let r = http::get(&f.url, &path, Duration::from_secs(60))
        .map_err(|e| QueryError::Failed(format!("Prometheus at {}: {e}", f.url.display())))?;
    let parsed = parse_matrix(&r.body);
    match (r.status, parsed) {
        (200, Ok(m)) => Ok(m),
        (400 | 422, Err(e)) => Err(QueryError::Refused(format!(
            "Prometheus refused `{promql}`: {e}"
        ))),
        (code, Err(e)) => Err(QueryError::Failed(format!(
            "Prometheus at {} answered {code}: {e}",
            f.url.display()
        ))),
        (code, Ok(_)) => Err(QueryError::Failed(format!(
            "Prometheus at {} answered {code}",
            f.url.display()
        ))),
    }
}

/// The answers of every query, by target.
pub type Answers = Vec<(Target, Vec<MatrixSeries>)>;

/// Runs every query against Prometheus.
pub fn fetch(f: &Fleet) -> Result<(Grid, Answers), QueryError> {
    let g = f.grid().map_err(QueryError::Refused)?;
    let mut out = Vec::new();
    for (target, promql) in queries(f) {
        out.push((target, query_range(f, &g, &promql)?));
    }
    Ok((g, out))
}

fn series_of(points: &[(f64, f64)], g: &Grid) -> Series {
    let mut s: Series = vec![None; g.n];
    for &(t, v) in points {
        if let Some(i) = g.index(t) {
            s[i] = v.is_finite().then_some(v);
        }
    }
    s
}

/// Builds the analysis input from the answers: one host per instance.
pub fn build(g: &Grid, answers: &Answers) -> Run {
    let mut values: BTreeMap<String, Values> = BTreeMap::new();
    // (instance, op) → [queue p50, queue p99, service p50, service p99]
    let mut quantiles: BTreeMap<(String, String), [Series; 4]> = BTreeMap::new();
    for (target, result) in answers {
        for (labels, points) in result {
            let instance = labels.get("instance").cloned().unwrap_or_default();
            let s = series_of(points, g);
            match target {
                Target::Family(field) => {
                    let fam = agent_signals::family_of(*field);
                    let key = Key {
                        field: *field,
                        labels: fam
                            .labels
                            .iter()
                            .map(|l| labels.get(*l).cloned().unwrap_or_default())
                            .collect(),
                    };
                    values.entry(instance).or_default().insert(key, s);
                }
                Target::Quantile { histogram, q } => {
                    let op = labels.get("op").cloned().unwrap_or_default();
                    let slot = usize::from(*histogram == agent_signals::SERVICE_HISTOGRAM) * 2
                        + usize::from(*q > 0.5);
                    quantiles.entry((instance, op)).or_default()[slot] = s;
                }
            }
        }
    }
    let hosts = values
        .iter()
        .map(|(instance, v)| {
            let mut h = agent_signals::host(instance, address(instance), v, g.n);
            for (op, slot) in [("read", 0), ("write", 1)] {
                let q = quantiles.get(&(instance.clone(), op.to_string()));
                let lat = block_latency(&h, op, g, q);
                if slot == 0 {
                    h.read = lat;
                } else {
                    h.write = lat;
                }
            }
            h.local_devices = h
                .devices
                .iter()
                .filter(|(name, d)| {
                    *name != "other"
                        && d.ops
                            .values()
                            .any(|o| o.ios.iter().flatten().any(|x| *x > 0.0))
                })
                .map(|(name, _)| name.clone())
                .collect();
            h
        })
        .collect();
    Run {
        interval_seconds: g.step,
        starts: (0..g.n).map(|i| g.start + i as f64 * g.step).collect(),
        hosts,
    }
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

/// A host's block-layer latency for one op, across its devices: IOPS from the requests,
/// the mean as queue plus service time weighted by requests, the percentiles as the sum of
/// the queue and service percentiles (an upper bound: the two are not added per request).
fn block_latency(h: &Host, op: &str, g: &Grid, q: Option<&[Series; 4]>) -> Option<Latency> {
    let ops: Vec<_> = h.devices.values().filter_map(|d| d.ops.get(op)).collect();
    let at = |s: &Series, i: usize| s.get(i).copied().flatten();
    let ios: Series = (0..g.n)
        .map(|i| {
            let v: Vec<f64> = ops.iter().filter_map(|o| at(&o.ios, i)).collect();
            (!v.is_empty()).then(|| v.iter().sum())
        })
        .collect();
    let q = q?;
    if !ios.iter().flatten().any(|x| *x > 0.0) {
        return None;
    }
    let mean: Series = (0..g.n)
        .map(|i| {
            let (mut acc, mut w) = (0.0, 0.0);
            for o in &ops {
                let (Some(n), Some(s)) = (at(&o.ios, i), at(&o.service_seconds, i)) else {
                    continue;
                };
                acc += n * (s + at(&o.queue_seconds, i).unwrap_or(0.0));
                w += n;
            }
            (w > 0.0).then(|| acc / w)
        })
        .collect();
    let add = |a: &Series, b: &Series| -> Series {
        (0..g.n)
            .map(|i| match (at(a, i), at(b, i)) {
                (Some(x), Some(y)) => Some(x + y),
                (None, Some(y)) if a.is_empty() || a.iter().all(Option::is_none) => Some(y),
                _ => None,
            })
            .collect()
    };
    let p99 = add(&q[1], &q[3]);
    if !p99.iter().any(Option::is_some) {
        return None;
    }
    Some(Latency {
        iops: ios.iter().map(|v| v.map(|x| x / g.step)).collect(),
        p50_seconds: add(&q[0], &q[2]),
        p99_seconds: p99,
        mean_seconds: mean,
        ..Latency::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        Fleet {
            url: Url::parse("http://127.0.0.1:9090").unwrap(),
            start: 1000.0,
            end: 1020.0,
            step: 5.0,
            matchers: matchers("{instance=~\"stor.*\"}").unwrap(),
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
            == "histogram_quantile(0.99, sum by (instance, op, le) (increase(stornet_block_service_seconds_bucket{instance=~\"stor.*\"}[5000ms])))"));
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

    /// A query_range answer as Prometheus 2.x gives it (captured from the lab, trimmed).
    const CAPTURED: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"instance":"198.18.7.1:9477","device":"loop3","op":"write"},
         "values":[[1005,"500"],[1010,"520"],[1020,"NaN"]]},
        {"metric":{"instance":"198.18.7.1:9477","device":"loop3","op":"read"},
         "values":[[1005,"0"],[1015,"0"]]}]}}"#;

    #[test]
    fn answers_are_read_onto_the_grid() {
        let g = fleet().grid().unwrap();
        let m = parse_matrix(CAPTURED).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].0["device"], "loop3");
        assert_eq!(
            series_of(&m[0].1, &g),
            vec![Some(500.0), Some(520.0), None, None]
        );
        let e = parse_matrix(
            r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
        )
        .unwrap_err();
        assert_eq!(e, "bad_data: parse error at char 3");
        assert!(parse_matrix("<html>").is_err());
        assert!(
            parse_matrix(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
                .is_err()
        );
    }

    fn answer(labels: &[(&str, &str)], values: &[f64]) -> MatrixSeries {
        (
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (1005.0 + 5.0 * i as f64, *v))
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
                vec![answer(&dev, &[500.0, 500.0, 0.0, 500.0])],
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
                vec![answer(
                    &[inst, ("peer", "198.18.7.2")],
                    &[0.0, 40.0, 2.0, 0.0],
                )],
            ),
            (
                Target::Quantile {
                    histogram: agent_signals::QUEUE_HISTOGRAM,
                    q: 0.99,
                },
                vec![answer(
                    &[inst, ("op", "write")],
                    &[0.004, 0.004, f64::NAN, 0.004],
                )],
            ),
            (
                Target::Quantile {
                    histogram: agent_signals::SERVICE_HISTOGRAM,
                    q: 0.99,
                },
                vec![answer(
                    &[inst, ("op", "write")],
                    &[0.001, 0.001, f64::NAN, 0.002],
                )],
            ),
        ];
        let run = build(&g, &answers);
        assert_eq!(run.starts, vec![1000.0, 1005.0, 1010.0, 1015.0]);
        run.validate().unwrap();
        let h = &run.hosts[0];
        assert_eq!(h.name, "198.18.7.1:9477");
        assert_eq!(h.addresses, vec!["198.18.7.1"]);
        assert_eq!(h.local_devices, vec!["loop3"]);
        assert!(h.read.is_none());
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
    }
}
