//! `loadgen analyze`: names the root cause of a latency rise from a run record
//! (`loadgen run --record`) or, in fleet mode, from the agents' metrics in Prometheus; prints
//! the verdict and its evidence as text or JSON and can write an HTML report.

pub mod fleet;
pub mod html;
pub mod time;
mod watch;

use std::io::Write;
use std::path::PathBuf;

use analysis::{Report, Run};
use serde::Serialize;

use crate::error::Failure;
use crate::record::Record;
use promclient::Url;
use promclient::query::QueryError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(std::time::Duration::from_secs_f64(v)),
        _ => Err(format!("{s:?}: give more than 0 and at most 86400 seconds")),
    }
}

/// Arguments of `loadgen analyze`.
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// A run record written by `loadgen run --record FILE`.
    pub record: Option<PathBuf>,
    /// How to print the verdict.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write a self-contained HTML report with charts to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Fleet mode: read the agents' metrics from this Prometheus server instead of a record.
    #[arg(long, value_name = "URL", conflicts_with = "record")]
    pub prometheus: Option<String>,
    /// Fleet mode: start of the window (Unix seconds, RFC 3339, `now` or `now-15m`).
    #[arg(long, value_name = "TIME")]
    pub start: Option<String>,
    /// Fleet mode: end of the window (as --start).
    #[arg(long, value_name = "TIME")]
    pub end: Option<String>,
    /// Fleet mode: length of one interval (default 15s); use at least twice the scrape
    /// interval.
    #[arg(long, value_name = "DURATION")]
    pub step: Option<String>,
    /// Fleet mode: evaluate the window again every --step, `now` read afresh (give relative
    /// times: --start now-15m --end now), and print each verdict as one line (with --format
    /// json, one JSON object per line) until interrupted; a failed query is a line too.
    #[arg(long, requires = "prometheus")]
    pub watch: bool,
    /// Fleet mode: label matchers for every query, e.g. '{instance=~"stor.*"}'.
    #[arg(long, value_name = "MATCHERS")]
    pub selector: Option<String>,
    /// Fleet mode: seconds all of one evaluation's queries may take together (each also at
    /// most 60).
    #[arg(long, value_name = "SECONDS", default_value = "120", requires = "prometheus",
          value_parser = parse_seconds)]
    pub timeout: std::time::Duration,
    /// Fleet mode: CA certificates (PEM) that verify an https Prometheus, instead of the
    /// Mozilla roots.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// Fleet mode: client certificate (PEM) for a Prometheus that requires mutual TLS.
    #[arg(long, value_name = "FILE", requires = "prometheus_key_file")]
    pub prometheus_cert_file: Option<PathBuf>,
    /// Fleet mode: private key (PEM) of --prometheus-cert-file.
    #[arg(long, value_name = "FILE", requires = "prometheus_cert_file")]
    pub prometheus_key_file: Option<PathBuf>,
    /// Fleet mode: accept any certificate from an https Prometheus (tests only: anyone
    /// between can read and change the answers).
    #[arg(long, requires = "prometheus")]
    pub prometheus_insecure_skip_verify: bool,
    /// Fleet mode: send the token in FILE as `Authorization: Bearer` (unless the URL holds
    /// user:password@).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_bearer_token_file: Option<PathBuf>,
}

impl AnalyzeArgs {
    fn prometheus_client(&self) -> promclient::ClientFiles {
        promclient::ClientFiles {
            ca_file: self.prometheus_ca_file.clone(),
            cert_file: self.prometheus_cert_file.clone(),
            key_file: self.prometheus_key_file.clone(),
            insecure_skip_verify: self.prometheus_insecure_skip_verify,
            bearer_token_file: self.prometheus_bearer_token_file.clone(),
        }
    }
}

/// What was analysed, for the JSON output.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Source {
    Record {
        path: String,
    },
    Prometheus {
        url: String,
        start: f64,
        end: f64,
        step_seconds: f64,
        selector: String,
    },
}

/// A sweep point's verdict.
#[derive(Serialize)]
struct PointVerdict {
    index: usize,
    label: String,
    verdict: analysis::Verdict,
}

#[derive(Serialize)]
struct Output<'a> {
    source: Source,
    /// The chosen point's report (the only one without a sweep).
    #[serde(flatten)]
    report: &'a Report,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    points: Vec<PointVerdict>,
}

/// Runs `loadgen analyze`; Ok is the exit status.
pub fn run(a: &AnalyzeArgs) -> Result<u8, Failure> {
    match (&a.record, &a.prometheus) {
        (Some(path), None) => {
            let fleet_only = [
                ("--start", a.start.is_some()),
                ("--end", a.end.is_some()),
                ("--step", a.step.is_some()),
                ("--selector", a.selector.is_some()),
                ("--watch", a.watch),
            ];
            if let Some((flag, _)) = fleet_only.iter().find(|f| f.1) {
                return Err(Failure::Usage(format!(
                    "{flag} belongs to fleet mode (--prometheus URL), not to a run record"
                )));
            }
            from_record(a, path)
        }
        (None, Some(url)) => from_prometheus(a, url),
        _ => Err(Failure::Usage(
            "give a run record (loadgen analyze run.json) or --prometheus URL with --start and --end".into(),
        )),
    }
}

fn analyze(run: &Run, what: &str) -> Result<Report, Failure> {
    analysis::analyze(run).map_err(|e| Failure::Usage(format!("{what}: {e}")))
}

fn from_record(a: &AnalyzeArgs, path: &std::path::Path) -> Result<u8, Failure> {
    let rec = Record::read(path).map_err(Failure::Usage)?;
    if rec.points.is_empty() {
        return Err(Failure::Usage(format!(
            "{}: the record holds no measured point",
            path.display()
        )));
    }
    let reports: Vec<Report> = rec
        .points
        .iter()
        .map(|p| analyze(&p.run, &format!("{} point {}", path.display(), p.index)))
        .collect::<Result<_, _>>()?;
    let (chosen, top) = top_report(&rec, &reports);
    let summary = record_summary(&rec, chosen, path);
    let notes = record_notes(&rec);
    let sweep = rec.points.len() > 1;
    let out = Output {
        source: Source::Record {
            path: path.display().to_string(),
        },
        report: &top,
        points: if sweep {
            rec.points
                .iter()
                .zip(&reports)
                .map(|(p, r)| PointVerdict {
                    index: p.index,
                    label: p.label(),
                    verdict: r.verdict.clone(),
                })
                .collect()
        } else {
            Vec::new()
        },
    };
    if let Some(html_path) = &a.html {
        let page = record_page(&rec, &reports, &top, &summary, &notes);
        write_html(html_path, &html::render(&page))?;
    }
    print(a.format, &out, || {
        record_text(&rec, &reports, &top, &summary, &notes)
    })
}

/// The point whose report the record's verdict is, and that report; in a sweep, its evidence
/// says which point it is and what the others found.
fn top_report(rec: &Record, reports: &[Report]) -> (usize, Report) {
    let chosen = (0..reports.len())
        .max_by(|&i, &j| {
            let finding = |r: &Report| (r.verdict.cause, r.verdict.confidence);
            // The most telling point; between equals, the first.
            analysis::verdict::telling(finding(&reports[i]), finding(&reports[j])).then(j.cmp(&i))
        })
        .unwrap_or(0);
    let mut top = reports[chosen].clone();
    if rec.points.len() > 1 {
        let p = &rec.points[chosen];
        top.verdict.evidence.insert(
            0,
            format!(
                "sweep point {} of {} ({})",
                chosen + 1,
                rec.points.len(),
                p.label()
            ),
        );
        for (i, (p, r)) in rec.points.iter().zip(reports).enumerate() {
            if i != chosen {
                top.verdict.evidence.push(format!(
                    "point {} ({}): {} (confidence {:.2})",
                    i + 1,
                    p.label(),
                    r.verdict.cause,
                    r.verdict.confidence
                ));
            }
        }
    }
    (chosen, top)
}

/// The first line of the report: what the record holds.
fn record_summary(rec: &Record, chosen: usize, path: &std::path::Path) -> String {
    let hosts: Vec<&str> = rec.points[chosen]
        .run
        .hosts
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    let first = &rec.points[0].run;
    format!(
        "run record {}: {} point{}, {} intervals of {}, hosts {}; loadgen ran on {}",
        path.display(),
        rec.points.len(),
        if rec.points.len() > 1 { "s" } else { "" },
        rec.points.iter().map(|p| p.run.len()).sum::<usize>(),
        analysis::units::secs(first.interval_seconds),
        hosts.join(", "),
        rec.host
    )
}

/// What the record lacks: agents' missing samples, or no agent at all.
fn record_notes(rec: &Record) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, agent) in rec.agents.iter().enumerate() {
        let missing: usize = rec
            .points
            .iter()
            .filter_map(|p| p.sampling.get(i))
            .map(|s| s.missing)
            .sum();
        if missing > 0 {
            notes.push(format!(
                "agent {} ({}): {missing} samples missing; their intervals have no data",
                agent.name, agent.url
            ));
        }
    }
    let signals = rec.points.iter().flat_map(|p| &p.run.hosts).any(|h| {
        !(h.devices.is_empty()
            && h.peers.is_empty()
            && h.skb_drops.is_empty()
            && h.qdiscs.is_empty()
            && h.interfaces.is_empty())
    });
    if !signals {
        notes.push(
            "no agent was sampled (loadgen run --agent): only loadgen's own latency and its split are known".into(),
        );
    }
    notes
}

/// The text report: summary, notes, and the verdict; in a sweep, every point's report.
fn record_text(
    rec: &Record,
    reports: &[Report],
    top: &Report,
    summary: &str,
    notes: &[String],
) -> String {
    let mut t = format!("{summary}\n");
    for n in notes {
        t.push_str(&format!("note: {n}\n"));
    }
    t.push('\n');
    if rec.points.len() > 1 {
        t.push_str(&verdict_text(top));
        for (i, (p, r)) in rec.points.iter().zip(reports).enumerate() {
            t.push_str(&format!(
                "\n== point {} of {}: {} ==\n{}",
                i + 1,
                rec.points.len(),
                p.label(),
                r.to_text()
            ));
        }
    } else {
        t.push_str(&top.to_text());
    }
    t
}

/// The HTML report of a record: a section per point, and the sweep's IOPS and p99.
fn record_page<'a>(
    rec: &'a Record,
    reports: &'a [Report],
    top: &'a Report,
    summary: &str,
    notes: &[String],
) -> html::Page<'a> {
    let sections = rec
        .points
        .iter()
        .zip(reports)
        .map(|(p, r)| html::Section {
            title: format!(
                "Point {} of {}: {}",
                p.index + 1,
                rec.points.len(),
                p.label()
            ),
            run: &p.run,
            report: r,
            result: rec.result.points.iter().find(|x| x.index == p.index),
        })
        .collect();
    let sweep = rec
        .result
        .points
        .iter()
        .zip(&rec.points)
        .map(|(r, p)| {
            let dir = |d: usize| {
                let s = &r.merged[d];
                let secs = r.runtime_ns as f64 / 1e9;
                (s.ios > 0).then(|| {
                    (
                        s.ios as f64 / secs.max(1e-9),
                        s.total.percentile(99.0) as f64 / 1e9,
                    )
                })
            };
            let (rd, wr) = (dir(0), dir(1));
            html::SweepPoint {
                label: p.label(),
                iops: [rd.map(|x| x.0), wr.map(|x| x.0)],
                p99_seconds: [rd.map(|x| x.1), wr.map(|x| x.1)],
            }
        })
        .collect();
    html::Page {
        title: format!("stornet: {}", top.verdict.cause),
        source: summary.to_string(),
        notes: notes.to_vec(),
        verdict: &top.verdict,
        sweep,
        hosts: host_rows(rec, top),
        sections,
    }
}

/// A cluster run's hosts: each one's own results over the run and the verdict on it.
fn host_rows(rec: &Record, top: &Report) -> Vec<html::HostRow> {
    rec.clients
        .iter()
        .map(|c| {
            // Per direction over the run: IOPS, p50 and p99 (seconds).
            let dirs = [0, 1].map(|d| {
                let p = c.result.as_ref()?.points.last()?;
                let s = &p.merged[d];
                let pct = |q: f64| s.lat.percentile(q) as f64 / 1e9;
                (s.ios > 0).then(|| {
                    (
                        crate::results::report::rates(s, p.runtime_ns).0,
                        pct(50.0),
                        pct(99.0),
                    )
                })
            });
            let verdict = top.hosts.iter().find(|h| h.host == c.name).map_or_else(
                || "-".to_string(),
                |h| match &h.verdict.location {
                    Some(l) => format!("{} at {l}", h.verdict.cause),
                    None => h.verdict.cause.to_string(),
                },
            );
            html::HostRow {
                name: c.name.clone(),
                machine: c.hostname.clone(),
                clock_offset_ms: c.clock_offset_seconds * 1e3,
                rtt_ms: c.rtt_seconds * 1e3,
                iops: dirs.map(|x| x.map(|x| x.0)),
                p50_seconds: dirs.map(|x| x.map(|x| x.1)),
                p99_seconds: dirs.map(|x| x.map(|x| x.2)),
                verdict,
                status: match (&c.error, c.stopped) {
                    (Some(e), _) => format!("failed: {e}"),
                    (None, true) => "stopped".into(),
                    _ => String::new(),
                },
            }
        })
        .collect()
}

/// The overall verdict alone, as `Report::to_text` prints it.
fn verdict_text(r: &Report) -> String {
    let only = Report {
        verdict: r.verdict.clone(),
        hosts: Vec::new(),
    };
    only.to_text()
}

/// What every fleet query of one `loadgen analyze --prometheus` shares.
struct FleetQuery {
    url: Url,
    client: promclient::Client,
    step: f64,
    matchers: String,
    timeout: std::time::Duration,
}

fn fleet_query(a: &AnalyzeArgs, url: &str) -> Result<FleetQuery, Failure> {
    let usage = |e: String| Failure::Usage(e);
    let url = Url::parse(url).map_err(|e| usage(format!("--prometheus: {e}")))?;
    let step = crate::options::values::parse_time_ns(a.step.as_deref().unwrap_or("15s"))
        .map_err(|e| usage(format!("--step: {e}")))? as f64
        / 1e9;
    let matchers = fleet::matchers(a.selector.as_deref().unwrap_or("")).map_err(usage)?;
    let client = a.prometheus_client().load("--prometheus").map_err(usage)?;
    Ok(FleetQuery {
        url,
        client: promclient::Client::new(&client),
        step,
        matchers,
        timeout: a.timeout,
    })
}

/// --start and --end, with `now` as given.
fn window(a: &AnalyzeArgs, now: f64) -> Result<(f64, f64), Failure> {
    let usage = |e: String| Failure::Usage(e);
    let start = a
        .start
        .as_deref()
        .ok_or_else(|| usage("fleet mode needs --start".into()))
        .and_then(|s| time::parse(s, now).map_err(|e| usage(format!("--start: {e}"))))?;
    let end = a
        .end
        .as_deref()
        .ok_or_else(|| usage("fleet mode needs --end".into()))
        .and_then(|s| time::parse(s, now).map_err(|e| usage(format!("--end: {e}"))))?;
    Ok((start, end))
}

/// The agents' signals between `start` and `end`, as the analysis' input.
fn fleet_run(
    a: &AnalyzeArgs,
    q: &FleetQuery,
    start: f64,
    end: f64,
) -> Result<(fleet::Fleet, fleet::Grid, Run), Failure> {
    let f = fleet::Fleet {
        url: q.url.clone(),
        client: q.client.clone(),
        start,
        end,
        step: q.step,
        matchers: q.matchers.clone(),
        timeout: q.timeout,
    };
    let (grid, answers) = fleet::fetch(&f).map_err(|e| match e {
        QueryError::Refused(m) => Failure::Usage(m),
        QueryError::TooLarge => Failure::Runtime(anyhow::anyhow!(
            "Prometheus at {}: its answers are larger than {} MiB in all; narrow --selector or use a larger --step",
            f.url.display(),
            fleet::MAX_ANSWERS >> 20
        )),
        QueryError::Failed(m) => Failure::Runtime(anyhow::anyhow!(m)),
    })?;
    let run = fleet::build(&grid, &answers);
    if run.hosts.is_empty() {
        return Err(Failure::Runtime(anyhow::anyhow!(
            "Prometheus at {} has no stornet-agent metrics{} between {} and {}",
            f.url.display(),
            a.selector
                .as_deref()
                .map_or(String::new(), |s| format!(" matching {s}")),
            time::format(start),
            time::format(end)
        )));
    }
    Ok((f, grid, run))
}

fn from_prometheus(a: &AnalyzeArgs, url: &str) -> Result<u8, Failure> {
    let q = fleet_query(a, url)?;
    if a.watch {
        return watch::run(a, &q);
    }
    let (start, end) = window(a, time::now())?;
    let step = q.step;
    let (f, grid, run) = fleet_run(a, &q, start, end)?;
    let report = analyze(&run, "the Prometheus data")?;
    let without: Vec<&str> = run
        .hosts
        .iter()
        .filter(|h| h.read.is_none() && h.write.is_none())
        .map(|h| h.name.as_str())
        .collect();
    let summary = format!(
        "Prometheus {}: {} host{} ({}), {} intervals of {} from {} to {}",
        f.url.display(),
        run.hosts.len(),
        if run.hosts.len() == 1 { "" } else { "s" },
        run.hosts
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        grid.n,
        analysis::units::secs(grid.step),
        time::format(start),
        time::format(start + grid.step * grid.n as f64),
    );
    let mut notes = vec![
        "fleet mode: a host's latency is its busiest device's block-layer time (queue plus service, percentiles summed as an upper bound); time above the block layer and replicas' round trips are not in it".to_string(),
    ];
    if !without.is_empty() {
        notes.push(format!(
            "not analysed, no block-layer latency histograms with IO in the window: {}",
            without.join(", ")
        ));
    }
    if let Some(html_path) = &a.html {
        let page = html::Page {
            title: format!("stornet fleet: {}", report.verdict.cause),
            source: summary.clone(),
            notes: notes.clone(),
            verdict: &report.verdict,
            sweep: Vec::new(),
            hosts: Vec::new(),
            sections: vec![html::Section {
                title: "fleet".into(),
                run: &run,
                report: &report,
                result: None,
            }],
        };
        write_html(html_path, &html::render(&page))?;
    }
    let out = Output {
        source: Source::Prometheus {
            url: f.url.display(),
            start,
            end,
            step_seconds: step,
            selector: a.selector.clone().unwrap_or_default(),
        },
        report: &report,
        points: Vec::new(),
    };
    print(a.format, &out, || {
        let mut t = format!("{summary}\n");
        for n in &notes {
            t.push_str(&format!("note: {n}\n"));
        }
        t.push('\n');
        t.push_str(&report.to_text());
        t
    })
}

fn write_html(path: &std::path::Path, html: &str) -> Result<(), Failure> {
    std::fs::write(path, html)
        .map_err(|e| Failure::Usage(format!("--html: cannot write {}: {e}", path.display())))?;
    crate::note!("loadgen: HTML report written to {}", path.display());
    Ok(())
}

fn print(format: Format, out: &Output, text: impl FnOnce() -> String) -> Result<u8, Failure> {
    let s = match format {
        // Names from a record or from Prometheus reach the terminal as plain text.
        Format::Text => crate::console::terminal(&text()),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(out)
                .map_err(|e| Failure::Runtime(anyhow::anyhow!("encoding the report: {e}")))?;
            s.push('\n');
            s
        }
    };
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())
        .and_then(|_| o.flush())
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("writing the report: {e}")))?;
    Ok(0)
}
