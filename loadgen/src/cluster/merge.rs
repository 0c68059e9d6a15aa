//! Every host's results as one run. Histograms are merged bin by bin (a cluster's p99 is
//! the p99 of all its IOs, never an average of the hosts' p99s); the report is fio's
//! client/server JSON layout (`client_stats`: each host's jobs with its `hostname`, then
//! "All clients") or a text table with a row per host and the total; the record holds each
//! host's own results and the analysis input of every host on one timeline.

use super::clock::Estimate;
use crate::options::Plan;
use crate::results::report::fio_json::{self, job, point};
use crate::results::report::ordered::{J, Obj};
use crate::results::report::{entries, rates, text};
use crate::results::stats::{DirStats, PointResult, RunResult};
use record::{ClientEntry, PointRecord, Record};

/// What became of one host.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub name: String,
    pub address: String,
    pub hostname: String,
    pub clock: Estimate,
    /// Its run record, when its job wrote one.
    pub record: Option<Record>,
    pub exit: Option<i32>,
    /// Stopped by the controller (another host failed).
    pub stopped: bool,
    /// Why the host failed, named for the operator.
    pub error: Option<String>,
}

impl Outcome {
    pub fn result(&self) -> Option<&RunResult> {
        self.record.as_ref().map(|r| &r.result)
    }
    /// The start of each point's measured part, on the controller's clock.
    fn starts(&self) -> Vec<f64> {
        self.record
            .iter()
            .flat_map(|r| &r.points)
            .map(|p| self.clock.to_controller_seconds(p.start_unix_seconds))
            .collect()
    }
}

/// The run is incomplete when a host failed or was stopped.
pub fn incomplete(outcomes: &[Outcome]) -> bool {
    outcomes
        .iter()
        .any(|o| o.error.is_some() || o.stopped || o.record.is_none())
}

/// "All clients": per sweep point, every host's jobs side by side (named `host:file`) and
/// their IOs merged bin by bin.
pub fn all_clients(outcomes: &[Outcome], plan: &Plan) -> RunResult {
    let results: Vec<(&str, &RunResult)> = outcomes
        .iter()
        .filter_map(|o| o.result().map(|r| (o.name.as_str(), r)))
        .collect();
    let n = results
        .iter()
        .map(|(_, r)| r.points.len())
        .max()
        .unwrap_or(0);
    let points = (0..n)
        .map(|i| {
            let mut merged = [DirStats::default(), DirStats::default()];
            let mut jobs = Vec::new();
            let mut runtime_ns = 0;
            for (name, r) in &results {
                let Some(p) = r.points.get(i) else { continue };
                for (m, pm) in merged.iter_mut().zip(&p.merged) {
                    m.merge(pm);
                }
                runtime_ns = runtime_ns.max(p.runtime_ns);
                jobs.extend(p.jobs.iter().map(|j| {
                    let mut j = j.clone();
                    j.filename = format!("{name}:{}", j.filename);
                    j
                }));
            }
            PointResult {
                index: i,
                jobs,
                merged,
                runtime_ns,
                timeline: Vec::new(),
                cpu: Default::default(),
            }
        })
        .collect();
    RunResult {
        version: env!("CARGO_PKG_VERSION").into(),
        started_unix_ms: results
            .iter()
            .map(|(_, r)| r.started_unix_ms)
            .min()
            .unwrap_or(0),
        options: crate::results::given::options(plan),
        safety_probe_reads: results.iter().map(|(_, r)| r.safety_probe_reads).sum(),
        points,
        disk_util: results
            .iter()
            .flat_map(|(name, r)| {
                r.disk_util.iter().map(move |d| {
                    let mut d = d.clone();
                    d.name = format!("{name}:{}", d.name);
                    d
                })
            })
            .collect(),
    }
}

/// The spread of the hosts' measured starts, per point, in seconds (controller's clock).
pub fn start_skew(outcomes: &[Outcome]) -> Vec<f64> {
    let starts: Vec<Vec<f64>> = outcomes.iter().map(Outcome::starts).collect();
    let n = starts.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            let v: Vec<f64> = starts.iter().filter_map(|s| s.get(i).copied()).collect();
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if v.is_empty() { 0.0 } else { hi - lo }
        })
        .collect()
}

fn hosts_json(outcomes: &[Outcome]) -> serde_json::Value {
    outcomes
        .iter()
        .map(|o| {
            serde_json::json!({
                "name": o.name,
                "address": o.address,
                "hostname": o.hostname,
                "clock_offset_ms": o.clock.offset_ns as f64 / 1e6,
                "rtt_ms": o.clock.rtt_ns as f64 / 1e6,
                "exit": o.exit,
                "stopped": o.stopped,
                "error": o.error,
            })
        })
        .collect()
}

/// fio's client/server JSON: `client_stats` holds each host's job entries with `hostname`
/// and `port`, then per sweep point an "All clients" entry of every host's IOs.
pub fn fio_json(outcomes: &[Outcome], all: &RunResult, plus: bool) -> Obj {
    let mut stats: Vec<J> = Vec::new();
    for o in outcomes {
        let Some(r) = o.result() else { continue };
        let port = o
            .address
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u64>().ok())
            .unwrap_or(0);
        for p in &r.points {
            for (j, members) in entries(p, r.options.group_reporting) {
                let mut e = job(r, p, &j, &members, plus);
                e.put("hostname", o.name.as_str());
                e.put("port", port);
                stats.push(e.into());
            }
        }
    }
    for p in &all.points {
        if let Some((mut j, members)) = entries(p, true).into_iter().next() {
            j.name = "All clients".into();
            let mut e = job(all, p, &j, &members, plus);
            e.put("hostname", "All clients");
            stats.push(e.into());
        }
    }
    let mut o = Obj::new()
        .with("fio version", format!("loadgen-{}", all.version))
        .with("timestamp", all.started_unix_ms / 1000)
        .with("timestamp_ms", all.started_unix_ms)
        .with("time", fio_json::ctime(all.started_unix_ms / 1000));
    if !all.options.global.is_empty() {
        let mut g = Obj::new();
        for (k, v) in &all.options.global {
            g.put(k.as_str(), v.as_str());
        }
        o.put("global options", g);
    }
    o.put("client_stats", stats);
    o.put(
        "loadgen",
        J::V(serde_json::json!({
            "version": all.version,
            "incomplete": incomplete(outcomes),
            "start_skew_ms": start_skew(outcomes).iter().map(|s| s * 1e3).collect::<Vec<_>>(),
            "hosts": hosts_json(outcomes),
            "points": all.points.iter().map(point).collect::<Vec<_>>(),
        })),
    );
    o
}

/// One row of the text table: a host's (or every host's) IOs at one point.
fn row(name: &str, merged: &[DirStats; 2], runtime_ns: u64, note: &str) -> String {
    let mut cols = format!("{name:<14}");
    for d in merged {
        let (iops, bw) = rates(d, runtime_ns);
        if d.ios == 0 {
            cols.push_str(&format!(" {:>10} {:>10} {:>9} {:>9}", "-", "-", "-", "-"));
        } else {
            cols.push_str(&format!(
                " {:>10} {:>10} {:>9} {:>9}",
                text::count(iops),
                text::bw(bw),
                text::ns(d.lat.percentile(50.0)),
                text::ns(d.lat.percentile(99.0)),
            ));
        }
    }
    format!("{cols}  {note}\n")
}

/// The text report: per point, a row per host and "All clients" (from the merged
/// histograms), then each host's clock and status.
pub fn text_report(outcomes: &[Outcome], all: &RunResult) -> String {
    let mut out = String::new();
    let skew = start_skew(outcomes);
    for p in &all.points {
        out.push_str(&format!(
            "cluster run, {} hosts, point {} (started within {:.2} ms of each other)\n",
            outcomes.len(),
            p.index + 1,
            skew.get(p.index).copied().unwrap_or(0.0) * 1e3
        ));
        out.push_str(&format!(
            "{:<14} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9}\n",
            "host", "read IOPS", "read BW", "p50", "p99", "write IOPS", "write BW", "p50", "p99"
        ));
        for o in outcomes {
            match o.result().and_then(|r| r.points.get(p.index)) {
                Some(hp) => out.push_str(&row(&o.name, &hp.merged, hp.runtime_ns, status(o))),
                None => out.push_str(&format!("{:<14} {}\n", o.name, status(o))),
            }
        }
        out.push_str(&row("All clients", &p.merged, p.runtime_ns, ""));
        out.push('\n');
    }
    for o in outcomes {
        out.push_str(&format!(
            "{} ({}, {}): clock {:+.3} ms from the controller's, round trip {:.3} ms{}\n",
            o.name,
            o.address,
            if o.hostname.is_empty() {
                "?"
            } else {
                &o.hostname
            },
            o.clock.offset_ns as f64 / 1e6,
            o.clock.rtt_ns as f64 / 1e6,
            o.error
                .as_deref()
                .map(|e| format!("; failed: {e}"))
                .unwrap_or_default()
        ));
    }
    if incomplete(outcomes) {
        out.push_str(
            "the run is incomplete: the table holds what the hosts measured until it stopped\n",
        );
    }
    out
}

fn status(o: &Outcome) -> &'static str {
    match (&o.error, o.stopped) {
        (Some(_), _) => "failed",
        (None, true) => "stopped",
        _ => "",
    }
}

/// One record for the run: every host's analysis input on one timeline (the controller's
/// clock), "All clients" as its result, each host's own results beside.
pub fn record(outcomes: &[Outcome], all: &RunResult, controller: &str) -> Record {
    let recs: Vec<(&Outcome, &Record)> = outcomes
        .iter()
        .filter_map(|o| o.record.as_ref().map(|r| (o, r)))
        .collect();
    let npoints = recs.iter().map(|(_, r)| r.points.len()).min().unwrap_or(0);
    let points = (0..npoints)
        .map(|i| {
            let parts: Vec<(&Outcome, &PointRecord)> =
                recs.iter().map(|(o, r)| (*o, &r.points[i])).collect();
            let rows = parts.iter().map(|(_, p)| p.run.len()).min().unwrap_or(0);
            let (first_o, first) = parts[0];
            let start = first_o
                .clock
                .to_controller_seconds(first.start_unix_seconds);
            let interval = first.run.interval_seconds;
            let mut hosts = Vec::new();
            for (o, p) in &parts {
                let mut run = p.run.first(rows);
                // The host loadgen ran on carries the controller's name for it.
                if let Some(h) = run.hosts.first_mut() {
                    h.name = o.name.clone();
                }
                hosts.extend(run.hosts);
            }
            PointRecord {
                index: i,
                jobs: first.jobs.clone(),
                start_unix_seconds: start,
                sampling: parts.iter().flat_map(|(_, p)| p.sampling.clone()).collect(),
                run: analysis::Run {
                    interval_seconds: interval,
                    starts: (0..rows).map(|k| start + k as f64 * interval).collect(),
                    hosts,
                },
            }
        })
        .collect();
    Record {
        format: record::FORMAT.into(),
        version: record::VERSION,
        loadgen_version: env!("CARGO_PKG_VERSION").into(),
        host: controller.into(),
        agents: recs
            .iter()
            .flat_map(|(o, r)| {
                r.agents.iter().map(move |a| record::AgentEntry {
                    name: o.name.clone(),
                    url: a.url.clone(),
                })
            })
            .collect(),
        result: all.clone(),
        points,
        clients: outcomes
            .iter()
            .map(|o| ClientEntry {
                name: o.name.clone(),
                address: o.address.clone(),
                hostname: o.hostname.clone(),
                clock_offset_seconds: o.clock.offset_ns as f64 / 1e9,
                rtt_seconds: o.clock.rtt_ns as f64 / 1e9,
                starts_unix_seconds: o.starts(),
                exit: o.exit,
                stopped: o.stopped,
                error: o.error.clone(),
                result: o.result().cloned(),
            })
            .collect(),
        incomplete: incomplete(outcomes),
    }
}
