//! The application's own latency in fleet mode (`--app-latency`): a storage system's or
//! service's request latency read from Prometheus and joined to the agents' hosts, so that a
//! host is judged by what its users wait for instead of its block layer.
//!
//! Any latency metric serves (a histogram, a summary or a `_sum`/`_count` pair) with the
//! label that names the host it was measured on; its value is matched to an agent's
//! `instance`, one of the instance's addresses or its host name. Ceph is a preset: each
//! OSD's op latency from the mgr (`ceph_osd_op_w_latency`, `ceph_osd_op_r_latency`), keyed
//! by `ceph_daemon` and joined to its host and addresses by `ceph_osd_metadata`
//! (`hostname`, `public_addr`, `cluster_addr`) and to its device by `ceph_disk_occupation`
//! (`devices`). A host with several OSDs is judged by all of their ops together.

use std::collections::BTreeMap;
use std::net::IpAddr;

use analysis::{Direction, Host, Latency, Run, Series};
use metric_names::ceph;

use crate::fleet::{self, Answers, Fleet, Grid};
use promclient::query::QueryError;

/// How a latency metric is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `_bucket{le}`, `_sum`, `_count`: mean and percentiles.
    Histogram,
    /// `{quantile}`, `_sum`, `_count`: mean and the exporter's own 0.5 and 0.99 quantiles
    /// (the largest over the series of a host: quantiles do not add up).
    Summary,
    /// `_sum`, `_count` only: the mean stands in for the percentiles.
    SumCount,
}

/// One latency metric in seconds, and the direction its requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metric {
    pub name: String,
    pub kind: Kind,
    pub direction: Direction,
}

/// An info series (always 1) whose labels join a key (`ceph_daemon`) to more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Join {
    pub metric: &'static str,
    pub key: &'static str,
    pub labels: &'static [&'static str],
}

/// What `--app-latency` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppLatency {
    /// At most one per direction.
    pub metrics: Vec<Metric>,
    /// The label of the latency series that names where it was measured: a host, or the key
    /// of `hosts`.
    pub by: String,
    /// Joins `by` to the host's name and addresses (Ceph: OSD → `ceph_osd_metadata`).
    pub hosts: Option<Join>,
    /// Joins `by` to the kernel names of its devices (Ceph: `ceph_disk_occupation`).
    pub devices: Option<Join>,
    /// The latency's network part is the paths among the joined sources' hosts alone, so
    /// a judged host's other peers are left out. Ceph's op latency runs at the primary OSD
    /// from the request's receipt to its reply: it holds the round trips to the replicas
    /// on the other OSD hosts, not the path to the client or the mon.
    pub members_only: bool,
}

const OSD_METADATA: Join = Join {
    metric: ceph::OSD_METADATA.name,
    key: ceph::DAEMON,
    labels: &["hostname", "public_addr", "cluster_addr"],
};

const DISK_OCCUPATION: Join = Join {
    metric: ceph::DISK_OCCUPATION.name,
    key: ceph::DAEMON,
    labels: &["devices"],
};

/// The `--app-latency` syntax, for errors and help.
pub const SYNTAX: &str =
    "ceph, or KIND:METRIC:HOST_LABEL[:read|write] with KIND histogram, summary or sumcount";

impl AppLatency {
    /// Ceph's mgr: each OSD's client op latency, joined to its host and device.
    pub fn ceph() -> AppLatency {
        let m = |c: ceph::CephMetric, direction| Metric {
            name: c.name.to_string(),
            kind: Kind::SumCount,
            direction,
        };
        AppLatency {
            metrics: vec![
                m(ceph::OSD_OP_W_LATENCY, Direction::Write),
                m(ceph::OSD_OP_R_LATENCY, Direction::Read),
            ],
            by: ceph::DAEMON.to_string(),
            hosts: Some(OSD_METADATA),
            devices: Some(DISK_OCCUPATION),
            members_only: true,
        }
    }

    /// Reads the values of `--app-latency` (the option may be given once per direction).
    pub fn parse(values: &[String]) -> Result<Option<AppLatency>, String> {
        let mut out: Option<AppLatency> = None;
        for v in values {
            if v.trim() == "ceph" {
                if values.len() > 1 {
                    return Err("--app-latency ceph stands alone".into());
                }
                return Ok(Some(AppLatency::ceph()));
            }
            let parts: Vec<&str> = v.split(':').map(str::trim).collect();
            let bad = |why: &str| format!("--app-latency {v:?}: {why}; give {SYNTAX}");
            if !(3..=4).contains(&parts.len()) {
                return Err(bad("not three or four fields"));
            }
            let kind = match parts[0] {
                "histogram" => Kind::Histogram,
                "summary" => Kind::Summary,
                "sumcount" => Kind::SumCount,
                k => return Err(bad(&format!("unknown kind {k:?}"))),
            };
            for (what, name) in [("metric", parts[1]), ("label", parts[2])] {
                if !is_name(name) {
                    return Err(bad(&format!("{name:?} is not a Prometheus {what} name")));
                }
            }
            let direction = match parts.get(3).copied().unwrap_or("write") {
                "read" => Direction::Read,
                "write" => Direction::Write,
                d => return Err(bad(&format!("direction {d:?} is neither read nor write"))),
            };
            let app = out.get_or_insert_with(|| AppLatency {
                metrics: Vec::new(),
                by: parts[2].to_string(),
                hosts: None,
                devices: None,
                members_only: false,
            });
            if app.by != parts[2] {
                return Err(bad("every --app-latency names the same host label"));
            }
            if app.metrics.iter().any(|m| m.direction == direction) {
                return Err(bad(&format!("a second {direction} latency")));
            }
            app.metrics.push(Metric {
                name: parts[1].to_string(),
                kind,
                direction,
            });
        }
        Ok(out)
    }
}

/// A Prometheus metric or label name (`[a-zA-Z_][a-zA-Z0-9_]*`; metric names may have `:`,
/// which the syntax reserves).
fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// What a query's answer fills.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Sum(Direction),
    Count(Direction),
    Quantile(Direction, f64),
    Hosts,
    Devices,
}

/// Every query for the application's latency, with the PromQL. The fleet's `--selector`
/// is for the agents' series and not added here: the application's exporter labels its
/// own.
pub fn queries(app: &AppLatency, step: f64) -> Vec<(Target, String)> {
    let w = format!("{}ms", (step * 1000.0).round() as u64);
    let by = &app.by;
    let mut out = Vec::new();
    for m in &app.metrics {
        let d = m.direction;
        for (t, suffix) in [(Target::Sum(d), "_sum"), (Target::Count(d), "_count")] {
            out.push((
                t,
                format!("sum by ({by}) (increase({}{suffix}[{w}]))", m.name),
            ));
        }
        for q in [0.5, 0.99] {
            let promql = match m.kind {
                Kind::Histogram => format!(
                    "histogram_quantile({q}, sum by ({by}, le) (increase({}_bucket[{w}])))",
                    m.name
                ),
                Kind::Summary => format!(
                    "max by ({by}) (max_over_time({}{{quantile=\"{q}\"}}[{w}]))",
                    m.name
                ),
                Kind::SumCount => continue,
            };
            out.push((Target::Quantile(d, q), promql));
        }
    }
    for (t, j) in [(Target::Hosts, &app.hosts), (Target::Devices, &app.devices)] {
        if let Some(j) = j {
            let labels = std::iter::once(j.key)
                .chain(j.labels.iter().copied())
                .collect::<Vec<_>>()
                .join(", ");
            out.push((
                t,
                format!("max by ({labels}) (max_over_time({}[{w}]))", j.metric),
            ));
        }
    }
    out
}

/// Runs the application latency's queries over the fleet's grid.
pub fn fetch(f: &Fleet, g: &Grid, app: &AppLatency) -> Result<Answers<Target>, QueryError> {
    let mut budget = fleet::MAX_ANSWERS;
    let timeout = f.timeout.min(fleet::QUERY_TIMEOUT);
    queries(app, g.step)
        .into_iter()
        .map(|(t, promql)| Ok((t, fleet::query_range(f, g, &promql, &mut budget, timeout)?)))
        .collect()
}

/// One place the latency was measured (`osd.2`, or a host), as the join found it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Source {
    /// The value of the `by` label.
    pub key: String,
    /// The host name the join gave (Ceph's `hostname`), if any.
    pub hostname: Option<String>,
    /// The addresses the join gave (Ceph's public and cluster addresses).
    pub addresses: Vec<String>,
    /// Kernel names of its devices.
    pub devices: Vec<String>,
}

/// The join's outcome, for the notes and for naming places in the verdict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Joined {
    /// Agent host name (after the join) → the sources judged on it.
    pub on: BTreeMap<String, Vec<Source>>,
    /// Sources that match no agent host.
    pub unmatched: Vec<Source>,
}

/// Puts the application's latency on the hosts of `run` that its sources match, in place
/// of their block layer's. A host the join names (`hostname`) takes that name.
pub fn apply(run: &mut Run, g: &Grid, app: &AppLatency, answers: &Answers<Target>) -> Joined {
    let mut sums: BTreeMap<(String, Direction), [Series; 2]> = BTreeMap::new();
    let mut quantiles: BTreeMap<(String, Direction), [Series; 2]> = BTreeMap::new();
    let mut sources: BTreeMap<String, Source> = BTreeMap::new();
    for (target, result) in answers {
        for (labels, points) in result {
            let Some(key) = labels.get(&app.by).filter(|k| !k.is_empty()) else {
                continue;
            };
            let key = key.clone();
            let s = fleet::series_of(points, g);
            match target {
                Target::Sum(d) => sums.entry((key, *d)).or_default()[0] = s,
                Target::Count(d) => sums.entry((key, *d)).or_default()[1] = s,
                Target::Quantile(d, q) => {
                    quantiles.entry((key, *d)).or_default()[usize::from(*q > 0.5)] = s
                }
                Target::Hosts => {
                    let src = sources.entry(key.clone()).or_default();
                    src.hostname = labels.get("hostname").filter(|h| !h.is_empty()).cloned();
                    for l in ["public_addr", "cluster_addr"] {
                        if let Some(ip) = labels.get(l).and_then(|a| ip_in(a))
                            && !src.addresses.contains(&ip)
                        {
                            src.addresses.push(ip);
                        }
                    }
                }
                Target::Devices => {
                    let src = sources.entry(key.clone()).or_default();
                    for d in labels.get("devices").into_iter().flat_map(|d| d.split(',')) {
                        let d = d.trim().trim_start_matches("/dev/").to_string();
                        if !d.is_empty() && !src.devices.contains(&d) {
                            src.devices.push(d);
                        }
                    }
                }
            }
        }
    }
    for (key, _) in sums.keys() {
        sources.entry(key.clone()).or_default();
    }
    for (k, s) in sources.iter_mut() {
        s.key = k.clone();
    }
    let members: Vec<String> = sources
        .values()
        .flat_map(|s| s.addresses.iter().cloned())
        .collect();
    let mut joined = Joined::default();
    for src in sources.into_values() {
        if !sums.keys().any(|(k, _)| *k == src.key) {
            continue;
        }
        match run.hosts.iter().position(|h| matches(h, &src, app)) {
            Some(i) => {
                if let Some(name) = &src.hostname {
                    run.hosts[i].name = name.clone();
                }
                joined
                    .on
                    .entry(run.hosts[i].name.clone())
                    .or_default()
                    .push(src);
            }
            None => joined.unmatched.push(src),
        }
    }
    for h in &mut run.hosts {
        let Some(on) = joined.on.get(&h.name) else {
            continue;
        };
        for d in Direction::ALL {
            let keys: Vec<&str> = on.iter().map(|s| s.key.as_str()).collect();
            let lat = latency(&keys, d, &sums, &quantiles, g);
            match d {
                Direction::Read => h.read = lat,
                Direction::Write => h.write = lat,
            }
        }
        if app.members_only {
            h.peers.retain(|addr, _| members.contains(addr));
        }
        let devices: Vec<String> = on.iter().flat_map(|s| s.devices.clone()).collect();
        if !devices.is_empty() {
            h.local_devices = devices;
        }
    }
    joined
}

/// Whether `src` was measured on agent host `h`: by an address the join gave, else by the
/// `by` label's value as the instance, its address or its host name.
fn matches(h: &Host, src: &Source, app: &AppLatency) -> bool {
    if app.hosts.is_some() {
        return src.addresses.iter().any(|a| h.addresses.contains(a))
            || src
                .hostname
                .as_deref()
                .is_some_and(|n| host_part(&h.name) == n);
    }
    let v = src.key.as_str();
    h.name == v
        || host_part(&h.name) == host_part(v)
        || ip_in(v).is_some_and(|ip| h.addresses.contains(&ip))
}

/// `h1` of `h1:9100`, `[::1]` of `[::1]:9100`, the name itself without a port.
fn host_part(instance: &str) -> &str {
    match instance.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.ends_with(':') => host,
        _ => instance,
    }
}

/// The first IP address in a label value: `198.18.40.11`, `198.18.40.11:6800`, or Ceph's
/// address vectors (`[v2:198.18.40.11:6800/1234,v1:198.18.40.11:6801/1234]`).
fn ip_in(value: &str) -> Option<String> {
    value
        .split(['[', ']', ',', '/'])
        .filter_map(|part| {
            let part = part.trim();
            let part = part
                .strip_prefix("v2:")
                .or_else(|| part.strip_prefix("v1:"))
                .unwrap_or(part);
            part.parse::<IpAddr>()
                .ok()
                .or_else(|| part.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
        })
        .find(|ip| !ip.is_unspecified())
        .map(|ip| ip.to_string())
}

/// The latency of the sources `keys` in direction `d`: the mean of all their requests,
/// their rate, and the percentiles where the metric has them (the largest of the sources;
/// else the mean).
fn latency(
    keys: &[&str],
    d: Direction,
    sums: &BTreeMap<(String, Direction), [Series; 2]>,
    quantiles: &BTreeMap<(String, Direction), [Series; 2]>,
    g: &Grid,
) -> Option<Latency> {
    let mut sum = vec![None; g.n];
    let mut count = vec![None; g.n];
    for k in keys {
        let Some([s, c]) = sums.get(&(k.to_string(), d)) else {
            continue;
        };
        for i in 0..g.n {
            let (sv, cv) = (at(s, i), at(c, i));
            if let (Some(sv), Some(cv)) = (sv, cv) {
                sum[i] = Some(sum[i].unwrap_or(0.0) + sv);
                count[i] = Some(count[i].unwrap_or(0.0) + cv);
            }
        }
    }
    let total: f64 = count.iter().flatten().sum();
    if total < MIN_REQUESTS_PER_INTERVAL * g.n as f64 {
        return None;
    }
    let mean: Series = (0..g.n)
        .map(|i| match (sum[i], count[i]) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        })
        .collect();
    let quantile = |slot: usize| -> Series {
        let found: Vec<&Series> = keys
            .iter()
            .filter_map(|k| quantiles.get(&(k.to_string(), d)).map(|q| &q[slot]))
            .collect();
        if found.is_empty() {
            return mean.clone();
        }
        (0..g.n)
            .map(|i| found.iter().filter_map(|s| at(s, i)).reduce(f64::max))
            .collect()
    };
    Some(Latency {
        iops: count.iter().map(|c| c.map(|c| c / g.step)).collect(),
        p50_seconds: quantile(0),
        p99_seconds: quantile(1),
        mean_seconds: mean,
        ..Latency::default()
    })
}

/// Requests per interval, on average, before a source's latency is analysed.
const MIN_REQUESTS_PER_INTERVAL: f64 = 10.0;

fn at(s: &Series, i: usize) -> Option<f64> {
    s.get(i)
        .copied()
        .flatten()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// `osd.0, osd.3` — the sources on a host, for prose.
pub fn names(sources: &[Source]) -> String {
    sources
        .iter()
        .map(|s| s.key.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The places of the report said with the application's names: "osd.1 on h2: writes wait
/// for the path to h1 (osd.0's host)" for a host whose verdict is a path to a peer, "osd.0
/// on h1: writes wait for device loop3" for a device.
pub fn places(report: &analysis::Report, run: &Run, joined: &Joined) -> Vec<String> {
    let mut out = Vec::new();
    for ha in &report.hosts {
        let Some(on) = joined.on.get(&ha.host) else {
            continue;
        };
        let v = &ha.verdict;
        if !v.cause.is_root_cause() {
            continue;
        }
        let dir = match v.direction {
            Some(Direction::Read) => "reads",
            _ => "writes",
        };
        let place = v.location.as_deref().unwrap_or_default();
        let place = match peer_in(place) {
            Some(ip) => {
                let host = run.hosts.iter().find(|h| h.addresses.contains(&ip));
                match host {
                    Some(h) => match joined.on.get(&h.name) {
                        Some(s) => format!("the path to {} ({}'s host)", h.name, names(s)),
                        None => format!("the path to {}", h.name),
                    },
                    None => format!("the path to {ip}"),
                }
            }
            None => place.to_string(),
        };
        // The numbers behind the place: the chosen candidate's findings.
        let findings: Vec<&str> = ha
            .directions
            .iter()
            .filter(|d| Some(d.direction) == v.direction)
            .flat_map(|d| &d.candidates)
            .find(|c| c.cause == v.cause && Some(&c.location) == v.location.as_ref())
            .map(|c| c.findings.iter().take(2).map(String::as_str).collect())
            .unwrap_or_default();
        let evidence = match findings.is_empty() {
            true => String::new(),
            false => format!(": {}", findings.join("; ")),
        };
        out.push(format!(
            "{} on {}: {dir} wait for {place} — {} ({:.2}){evidence}",
            names(on),
            ha.host,
            v.cause,
            v.confidence
        ));
    }
    out
}

/// The peer address of a location "path to peer 198.18.40.11" or "path to replica …".
fn peer_in(location: &str) -> Option<String> {
    let rest = location
        .strip_prefix("path to peer ")
        .or_else(|| location.strip_prefix("path to replica "))?;
    ip_in(rest.split([' ', ',']).next()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::Host;
    use promclient::query::MatrixSeries;

    fn grid() -> Grid {
        Grid {
            start: 1000.0,
            step: 10.0,
            n: 3,
        }
    }

    fn series(labels: &[(&str, &str)], values: &[f64]) -> MatrixSeries {
        crate::fleet::tests::matrix(1010.0, 10.0, labels, values)
    }

    fn agent(instance: &str, ip: &str) -> Host {
        Host {
            name: instance.into(),
            addresses: vec![ip.into()],
            ..Host::default()
        }
    }

    #[test]
    fn the_option_reads_the_preset_and_any_metric() {
        let p =
            |v: &[&str]| AppLatency::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&[]).unwrap(), None);
        assert_eq!(p(&["ceph"]).unwrap(), Some(AppLatency::ceph()));
        let a = p(&[
            "histogram:etcd_disk_wal_fsync_duration_seconds:instance",
            "summary:minio_s3_ttfb_seconds:instance:read",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.by, "instance");
        assert_eq!(a.metrics[0].direction, Direction::Write);
        assert_eq!(a.metrics[1].kind, Kind::Summary);
        for bad in [
            &["gauge:x:instance"][..],
            &["histogram:x"],
            &["histogram:x-y:instance"],
            &["histogram:x:instance:both"],
            &["sumcount:a:instance", "sumcount:b:host:read"],
            &["sumcount:a:instance", "sumcount:b:instance"],
            &["ceph", "sumcount:a:instance:read"],
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.starts_with("--app-latency"), "{e}");
        }
    }

    #[test]
    fn queries_group_by_the_host_label() {
        let a = AppLatency::parse(&["histogram:req_seconds:node".to_string()])
            .unwrap()
            .unwrap();
        let q = queries(&a, 5.0);
        assert_eq!(q[0].1, "sum by (node) (increase(req_seconds_sum[5000ms]))");
        assert!(q.iter().any(|(t, s)| *t == Target::Quantile(Direction::Write, 0.99)
            && s == "histogram_quantile(0.99, sum by (node, le) (increase(req_seconds_bucket[5000ms])))"));
        let c = queries(&AppLatency::ceph(), 10.0);
        assert!(c.iter().any(|(_, s)| s
            == "max by (ceph_daemon, hostname, public_addr, cluster_addr) (max_over_time(ceph_osd_metadata[10000ms]))"));
        assert!(
            c.iter().any(|(_, s)| s
                == "sum by (ceph_daemon) (increase(ceph_osd_op_w_latency_count[10000ms]))")
        );
    }

    #[test]
    fn ceph_osds_are_joined_to_their_hosts_by_address_and_judged_by_their_op_latency() {
        let g = grid();
        let mut run = Run {
            interval_seconds: 10.0,
            starts: vec![1000.0, 1010.0, 1020.0],
            hosts: vec![
                agent("198.18.40.11:9100", "198.18.40.11"),
                agent("198.18.40.12:9100", "198.18.40.12"),
            ],
        };
        run.hosts[0].local_devices = vec!["loop9".into()];
        for peer in ["198.18.40.12", "198.18.40.50"] {
            run.hosts[0].peers.insert(peer.into(), Default::default());
        }
        let w = Direction::Write;
        let answers: Answers<Target> = vec![
            (
                Target::Sum(w),
                vec![
                    series(&[("ceph_daemon", "osd.0")], &[2.0, 2.0, 60.0]),
                    series(&[("ceph_daemon", "osd.1")], &[1.0, 1.0, 1.0]),
                    series(&[("ceph_daemon", "osd.7")], &[1.0, 1.0, 1.0]),
                ],
            ),
            (
                Target::Count(w),
                vec![
                    series(&[("ceph_daemon", "osd.0")], &[100.0, 100.0, 100.0]),
                    series(&[("ceph_daemon", "osd.1")], &[100.0, 100.0, 100.0]),
                    series(&[("ceph_daemon", "osd.7")], &[100.0, 100.0, 100.0]),
                ],
            ),
            (
                Target::Hosts,
                vec![
                    series(
                        &[
                            ("ceph_daemon", "osd.0"),
                            ("hostname", "h1"),
                            ("public_addr", "198.18.40.11"),
                            ("cluster_addr", "198.18.40.11"),
                        ],
                        &[1.0, 1.0, 1.0],
                    ),
                    series(
                        &[
                            ("ceph_daemon", "osd.1"),
                            ("hostname", "h2"),
                            (
                                "public_addr",
                                "[v2:198.18.40.12:6800/77,v1:198.18.40.12:6801/77]",
                            ),
                        ],
                        &[1.0, 1.0, 1.0],
                    ),
                    series(
                        &[
                            ("ceph_daemon", "osd.7"),
                            ("hostname", "h8"),
                            ("public_addr", "198.18.40.99"),
                        ],
                        &[1.0, 1.0, 1.0],
                    ),
                ],
            ),
            (
                Target::Devices,
                vec![series(
                    &[("ceph_daemon", "osd.0"), ("devices", "loop3")],
                    &[1.0, 1.0, 1.0],
                )],
            ),
        ];
        let j = apply(&mut run, &g, &AppLatency::ceph(), &answers);
        assert_eq!(run.hosts[0].name, "h1");
        assert_eq!(run.hosts[1].name, "h2");
        let l = run.hosts[0].write.as_ref().unwrap();
        assert_eq!(l.mean_seconds, vec![Some(0.02), Some(0.02), Some(0.6)]);
        assert_eq!(
            l.p99_seconds, l.mean_seconds,
            "a mean stands in for percentiles"
        );
        assert_eq!(l.iops, vec![Some(10.0); 3]);
        assert!(run.hosts[0].read.is_none(), "no reads");
        assert_eq!(run.hosts[0].local_devices, vec!["loop3"]);
        assert_eq!(
            run.hosts[0].peers.keys().collect::<Vec<_>>(),
            ["198.18.40.12"],
            "the client's path is not in an OSD's op latency"
        );
        assert_eq!(names(&j.on["h2"]), "osd.1");
        assert_eq!(j.unmatched.len(), 1);
        assert_eq!(j.unmatched[0].key, "osd.7");
    }

    #[test]
    fn any_metric_joins_by_instance_host_name_or_address() {
        let g = grid();
        let mut run = Run {
            interval_seconds: 10.0,
            starts: vec![1000.0, 1010.0, 1020.0],
            hosts: vec![
                agent("node-a:9100", "10.0.0.1"),
                agent("10.0.0.2:9100", "10.0.0.2"),
            ],
        };
        let a = AppLatency::parse(&["histogram:req_seconds:instance".to_string()])
            .unwrap()
            .unwrap();
        let w = Direction::Write;
        let both = |v: [f64; 3]| {
            vec![
                series(&[("instance", "node-a:9000")], &v),
                series(&[("instance", "10.0.0.2:9000")], &v),
            ]
        };
        let answers: Answers<Target> = vec![
            (Target::Sum(w), both([1.0, 1.0, 1.0])),
            (Target::Count(w), both([50.0, 50.0, 50.0])),
            (Target::Quantile(w, 0.99), both([0.1, 0.1, 0.5])),
        ];
        let j = apply(&mut run, &g, &a, &answers);
        assert_eq!(j.on.len(), 2, "{j:?}");
        assert_eq!(run.hosts[0].name, "node-a:9100", "no join: the name stays");
        let l = run.hosts[1].write.as_ref().unwrap();
        assert_eq!(l.p99_seconds, vec![Some(0.1), Some(0.1), Some(0.5)]);
        assert_eq!(l.mean_seconds, vec![Some(0.02); 3]);
    }

    #[test]
    fn addresses_are_found_in_ceph_address_vectors() {
        assert_eq!(ip_in("198.18.40.11").as_deref(), Some("198.18.40.11"));
        assert_eq!(ip_in("10.0.0.2:9000").as_deref(), Some("10.0.0.2"));
        assert_eq!(
            ip_in("[v2:198.18.40.12:6800/77,v1:198.18.40.12:6801/77]").as_deref(),
            Some("198.18.40.12")
        );
        assert_eq!(ip_in("-"), None);
        assert_eq!(host_part("h1:9100"), "h1");
        assert_eq!(host_part("h1"), "h1");
        assert_eq!(
            peer_in("path to peer 198.18.40.11").as_deref(),
            Some("198.18.40.11")
        );
        assert_eq!(
            peer_in("path to peer 198.18.40.11, which serves device nvme1n1").as_deref(),
            Some("198.18.40.11")
        );
    }
}
