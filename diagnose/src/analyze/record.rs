//! The record reader: a run record (`loadgen run --record`) judged point by point, its
//! first line saying what it holds, its notes what it lacks, and in a sweep the most telling
//! point's verdict with the others'; the HTML report has a section per point, the sweep's
//! IOPS and p99, and a cluster run's hosts side by side.

use std::path::Path;

use analysis::Report;
use record::Record;

use super::output::{Output, PointVerdict, Source, print, write_html};
use crate::cli::AnalyzeArgs;
use crate::error::Failure;
use crate::html;

/// `stornet analyze RECORD`: every point of the record judged, the most telling one's
/// verdict printed with the others summarised.
pub(super) fn analyze(a: &AnalyzeArgs, path: &Path) -> Result<u8, Failure> {
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
        .map(|p| super::analyze(&p.run, &format!("{} point {}", path.display(), p.index)))
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
fn record_summary(rec: &Record, chosen: usize, path: &Path) -> String {
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
                (s.ios > 0).then(|| (s.rates(p.runtime_ns).0, pct(50.0), pct(99.0)))
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
