//! The HTML report: one self-contained file (inline CSS and SVG, nothing fetched) with the
//! verdict and its evidence, the latency timeline with the congestion signals on the same
//! time axis, where the latency goes (local device, block layer, each replica), latency
//! histograms, the scores behind the verdict, and for sweeps IOPS and latency per point.

pub mod svg;

use std::fmt::Write;

use analysis::breakdown::PartKind;
use analysis::units::{pct, secs};
use analysis::{Direction, DirectionResult, Host, Report, Run, Series, Verdict};

use record::histogram::Histogram;
use record::stats::PointResult;
use svg::{Chart, Line, Panel, Scale, Unit};

const READ: &str = "#1f77b4";
const READ_LIGHT: &str = "#9ecae1";
const WRITE: &str = "#d62728";
const WRITE_LIGHT: &str = "#f4a582";
/// Further series, in order.
const PALETTE: &[&str] = &[
    "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
];

/// One analysed timeline (a sweep point, or the fleet window).
pub struct Section<'a> {
    pub title: String,
    pub run: &'a Run,
    pub report: &'a Report,
    /// loadgen's results of the point, for its histograms (not in fleet mode).
    pub result: Option<&'a PointResult>,
}

/// IOPS and p99 per sweep point.
pub struct SweepPoint {
    pub label: String,
    /// `[read, write]`.
    pub iops: [Option<f64>; 2],
    pub p99_seconds: [Option<f64>; 2],
}

/// One host of a cluster run, for the side-by-side table.
pub struct HostRow {
    pub name: String,
    pub machine: String,
    pub clock_offset_ms: f64,
    pub rtt_ms: f64,
    /// `[read, write]`: IOPS, p50 and p99 in seconds, over the whole run.
    pub iops: [Option<f64>; 2],
    pub p50_seconds: [Option<f64>; 2],
    pub p99_seconds: [Option<f64>; 2],
    /// The analysis' verdict on the host ("none", "network_congestion at …").
    pub verdict: String,
    /// "failed: …" or "stopped", empty when it ran to the end.
    pub status: String,
}

pub struct Page<'a> {
    pub title: String,
    /// Where the data came from.
    pub source: String,
    /// Limits the reader should know about.
    pub notes: Vec<String>,
    pub verdict: &'a Verdict,
    pub sweep: Vec<SweepPoint>,
    /// A cluster run's hosts (empty otherwise).
    pub hosts: Vec<HostRow>,
    pub sections: Vec<Section<'a>>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1320px;color:#222;padding:0 16px}\
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}\
h3{font-size:15px;margin:18px 0 6px}.src{color:#666}.note{color:#8a6d3b;background:#fcf8e3;padding:6px 10px;border-radius:4px;margin:6px 0}\
.verdict{border-left:6px solid #888;background:#f7f7f7;padding:10px 14px;margin:10px 0}\
.verdict.root{border-color:#d62728;background:#fdf1f1}.verdict.none{border-color:#2ca02c;background:#f1f9f1}\
.cause{font-size:20px;font-weight:600}.conf{color:#555;margin-left:10px}.expl{color:#666;font-size:12px}\
table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}\
th{background:#f2f2f2}td.l,th.l{text-align:left}.bar{display:inline-block;height:10px;background:#d62728;vertical-align:middle}\
svg.chart text{font:11px system-ui,sans-serif;fill:#333}svg.chart .ptitle{font-weight:600;font-size:12px}\
svg.chart .frame{fill:#fff;stroke:#999}svg.chart .grid{stroke:#eee}svg.chart .axis{stroke:#999}\
svg.chart .ytick{text-anchor:end}svg.chart .xtick,svg.chart .xlabel,svg.chart .nodata{text-anchor:middle}\
svg.chart .nodata{fill:#999}svg.chart .shade{fill:#ffcc00;opacity:.22}";

/// The whole page.
pub fn render(p: &Page) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
        esc(&p.title)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><div class=\"src\">{}</div>",
        esc(&p.title),
        esc(&p.source)
    );
    for n in &p.notes {
        let _ = write!(o, "<div class=\"note\">{}</div>", esc(n));
    }
    verdict(&mut o, p.verdict);
    if !p.hosts.is_empty() {
        hosts_table(&mut o, &p.hosts);
    }
    if p.sweep.len() > 1 {
        let _ = write!(o, "<h2>Sweep: IOPS and p99 latency per point</h2>");
        o.push_str(&sweep_chart(&p.sweep).render());
    }
    for s in &p.sections {
        section(&mut o, s, p.sections.len() > 1);
    }
    o.push_str("</body></html>\n");
    o
}

/// A cluster run's hosts side by side.
fn hosts_table(o: &mut String, hosts: &[HostRow]) {
    let _ = write!(
        o,
        "<h2>Hosts side by side</h2><table><tr><th class=\"l\">host</th><th class=\"l\">machine</th>\
         <th>clock offset</th><th>round trip</th><th>read IOPS</th><th>read p50</th><th>read p99</th>\
         <th>write IOPS</th><th>write p50</th><th>write p99</th><th class=\"l\">verdict on the host</th><th class=\"l\">status</th></tr>"
    );
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
    for h in hosts {
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:+.3} ms</td><td>{:.3} ms</td>",
            esc(&h.name),
            esc(&h.machine),
            h.clock_offset_ms,
            h.rtt_ms
        );
        for d in 0..2 {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td>{}</td>",
                opt(h.iops[d], &|x| format!("{x:.0}")),
                opt(h.p50_seconds[d], &secs),
                opt(h.p99_seconds[d], &secs)
            );
        }
        let _ = write!(
            o,
            "<td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&h.verdict),
            esc(&h.status)
        );
    }
    o.push_str("</table>");
}

fn verdict(o: &mut String, v: &Verdict) {
    let class = if v.cause.is_root_cause() {
        "root"
    } else if v.cause == analysis::Cause::None {
        "none"
    } else {
        ""
    };
    let at = match (&v.host, v.direction, &v.location) {
        (_, _, Some(l)) => format!(" at {l}"),
        (Some(h), Some(d), None) => format!(" ({d}s on {h})"),
        _ => String::new(),
    };
    let _ = write!(
        o,
        "<div class=\"verdict {class}\"><span class=\"cause\">{}{}</span><span class=\"conf\">confidence {:.2}</span><ul>",
        esc(v.cause.name()),
        esc(&at),
        v.confidence
    );
    for e in &v.evidence {
        let _ = write!(o, "<li>{}</li>", esc(e));
    }
    let _ = write!(
        o,
        "</ul><div class=\"expl\">{}</div></div>",
        esc(&v.confidence_explained)
    );
}

fn section(o: &mut String, s: &Section, titled: bool) {
    if titled {
        let _ = write!(o, "<h2>{}</h2>", esc(&s.title));
        if let Some(h) = s
            .report
            .hosts
            .iter()
            .find(|h| Some(&h.host) == s.report.verdict.host.as_ref())
        {
            verdict(o, &h.verdict);
        }
    }
    let (focus_host, focus) = focus(s.report);
    let _ = write!(o, "<h2>Latency and congestion on one timeline</h2>");
    o.push_str(&timeline_chart(s.run, focus.map(|d| &d.raised_intervals)).render());
    let subject = focus_host.and_then(|h| s.run.host(h));
    if let (Some(h), Some(d)) = (subject, focus) {
        let _ = write!(
            o,
            "<h2>Where the {} latency goes on {}</h2>",
            d.direction,
            esc(&h.name)
        );
        o.push_str(&breakdown_chart(s.run, h, d.direction, &d.raised_intervals).render());
        shares(o, d);
    }
    if let Some(r) = s.result {
        let _ = write!(o, "<h2>Latency histograms</h2>");
        o.push_str(&histogram_chart(r).render());
    }
    for h in &s.report.hosts {
        for d in &h.directions {
            scores(o, &h.host, d);
        }
    }
}

/// The host and direction the verdict is about (or the first analysed one).
fn focus(r: &Report) -> (Option<&str>, Option<&DirectionResult>) {
    let host = r
        .verdict
        .host
        .as_deref()
        .and_then(|n| r.hosts.iter().find(|h| h.host == n))
        .or(r.hosts.first());
    let Some(host) = host else {
        return (None, None);
    };
    let d = host
        .directions
        .iter()
        .find(|d| Some(d.direction) == r.verdict.direction)
        .or(host.directions.first());
    (Some(host.host.as_str()), d)
}

/// Seconds since the first interval, at each interval's start.
fn xs(run: &Run) -> Vec<f64> {
    let t0 = run.starts.first().copied().unwrap_or(0.0);
    run.starts.iter().map(|t| t - t0).collect()
}

fn line(run: &Run, s: &Series) -> Vec<Option<(f64, f64)>> {
    xs(run)
        .into_iter()
        .enumerate()
        .map(|(i, x)| Some((x, s.get(i).copied().flatten()?)))
        .collect()
}

/// Element-wise sum; missing only where every input is.
fn sum<'a>(n: usize, inputs: impl IntoIterator<Item = &'a Series>) -> Series {
    analysis::series::sum_series(inputs, n)
}

fn timeline_chart(run: &Run, raised: Option<&Vec<usize>>) -> Chart {
    let n = run.len();
    let mut lat = Vec::new();
    let analysed: Vec<&Host> = run
        .hosts
        .iter()
        .filter(|h| h.read.is_some() || h.write.is_some())
        .collect();
    let mut colors = PALETTE.iter().copied().cycle();
    for h in &analysed {
        let prefix = if analysed.len() > 1 {
            format!("{} ", h.name)
        } else {
            String::new()
        };
        for (d, l) in [(Direction::Write, &h.write), (Direction::Read, &h.read)] {
            let Some(l) = l else { continue };
            let (c99, c50) = match (analysed.len(), d) {
                (1, Direction::Write) => (WRITE, WRITE_LIGHT),
                (1, Direction::Read) => (READ, READ_LIGHT),
                _ => {
                    let c = colors.next().unwrap_or("#333");
                    (c, c)
                }
            };
            lat.push(Line::new(
                format!("{prefix}p99 {d}"),
                c99,
                line(run, &l.p99_seconds),
            ));
            lat.push(
                Line::new(format!("{prefix}p50 {d}"), c50, line(run, &l.p50_seconds)).dashed(),
            );
        }
    }
    let mut net = Vec::new();
    let mut colors = PALETTE.iter().copied().cycle();
    for h in &run.hosts {
        let prefix = if run.hosts.len() > 1 {
            format!("{} ", h.name)
        } else {
            String::new()
        };
        let retrans = sum(n, h.peers.values().map(|p| &p.retransmits));
        let drops = sum(n, h.skb_drops.values());
        let qdrops = sum(n, h.qdiscs.iter().map(|q| &q.drops));
        let ifdrops = sum(
            n,
            h.interfaces
                .values()
                .flat_map(|i| [&i.rx_drops, &i.tx_drops, &i.rx_errors, &i.tx_errors]),
        );
        for (what, s) in [
            ("retransmits", retrans),
            ("packet drops", drops),
            ("qdisc drops", qdrops),
            ("interface drops and errors", ifdrops),
        ] {
            if s.iter().any(Option::is_some) {
                let nonzero = s.iter().flatten().any(|v| *v > 0.0);
                net.push((nonzero, format!("{prefix}{what}"), s));
            }
        }
    }
    // Counters that stayed at zero only clutter the legend, unless nothing else was counted.
    let any_nonzero = net.iter().any(|l| l.0);
    let net: Vec<Line> = net
        .into_iter()
        .filter(|l| l.0 || !any_nonzero)
        .map(|(_, label, s)| Line::new(label, colors.next().unwrap_or("#333"), line(run, &s)))
        .collect();
    timeline(
        run,
        raised.map_or(&[], Vec::as_slice),
        vec![
            Panel {
                title: "latency per interval (p99 solid, p50 dashed)".into(),
                height: 260.0,
                scale: Scale::Log,
                unit: Unit::Seconds,
                lines: lat,
            },
            Panel {
                title: "retransmits and drops per interval".into(),
                height: 180.0,
                scale: Scale::SymLog,
                unit: Unit::Count,
                lines: net,
            },
        ],
    )
}

fn breakdown_chart(run: &Run, h: &Host, d: Direction, raised: &[usize]) -> Chart {
    let n = run.len();
    let mut lines = Vec::new();
    let mut colors = PALETTE.iter().copied();
    if let Some(l) = h.latency(d) {
        lines.push(Line::new(
            format!("mean {d} latency"),
            if d == Direction::Write { WRITE } else { READ },
            line(run, &l.mean_seconds),
        ));
        if l.local_device_seconds.iter().any(Option::is_some) {
            lines.push(Line::new(
                "local device",
                colors.next().unwrap_or("#333"),
                line(run, &l.local_device_seconds),
            ));
        }
        for (peer, s) in &l.replicas {
            lines.push(Line::new(
                format!("replica {peer} round trip"),
                colors.next().unwrap_or("#333"),
                line(run, s),
            ));
        }
    }
    let parts = analysis::breakdown::Parts::build(h, d, n);
    for (kind, what) in [
        (PartKind::Queue, "block-layer queue"),
        (PartKind::Service, "device service"),
    ] {
        if let Some(p) = parts.get(kind) {
            lines.push(
                Line::new(
                    format!("{what} ({})", p.key),
                    colors.next().unwrap_or("#333"),
                    line(run, &p.series),
                )
                .dashed(),
            );
        }
    }
    timeline(
        run,
        raised,
        vec![Panel {
            title: "mean time per IO in each part".into(),
            height: 240.0,
            scale: Scale::Log,
            unit: Unit::Seconds,
            lines,
        }],
    )
}

/// A chart over the run's seconds, the `raised` intervals shaded.
fn timeline(run: &Run, raised: &[usize], panels: Vec<Panel>) -> Chart {
    let x = xs(run);
    Chart {
        width: 1260.0,
        x_label: "seconds since the start".into(),
        x_scale: Scale::Linear,
        x_unit: Unit::Plain,
        x_ticks: None,
        shade: raised
            .iter()
            .filter_map(|&i| Some((*x.get(i)?, x.get(i)? + run.interval_seconds)))
            .collect(),
        shade_label: "raised intervals".into(),
        panels,
    }
}

fn shares(o: &mut String, d: &DirectionResult) {
    if d.breakdown.is_empty() {
        return;
    }
    let what = if d.raised_intervals.is_empty() {
        "share of the latency"
    } else {
        "share of the rise"
    };
    let _ = write!(
        o,
        "<table><tr><th class=\"l\">part</th><th>{what}</th><th class=\"l\"></th><th>before</th><th>{}</th></tr>",
        if d.raised_intervals.is_empty() {
            "mean"
        } else {
            "raised"
        }
    );
    for p in &d.breakdown {
        let _ = write!(
            o,
            "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\"><span class=\"bar\" style=\"width:{:.0}px\"></span></td><td>{}</td><td>{}</td></tr>",
            esc(&analysis::prose::part_phrase(p.part, &p.key)),
            pct(p.share),
            p.share * 300.0,
            p.baseline_seconds.map_or("".into(), secs),
            secs(p.seconds)
        );
    }
    o.push_str("</table>");
}

/// Fractions of IOs per bucket of 1/8 octave, at each bucket's geometric middle.
fn density(h: &Histogram) -> Vec<Option<(f64, f64)>> {
    let bounds = crate::latency::bounds();
    let Some(a) = crate::latency::convert(h, &bounds) else {
        return Vec::new();
    };
    let total = a.total() as f64;
    let first = a.counts.iter().position(|c| *c > 0).unwrap_or(0);
    let last = a.counts.iter().rposition(|c| *c > 0).unwrap_or(0);
    (first.saturating_sub(1)..=(last + 1).min(bounds.len() - 1))
        .map(|i| {
            let hi = bounds[i];
            let lo = if i == 0 {
                hi / 2f64.powf(0.125)
            } else {
                bounds[i - 1]
            };
            Some(((lo * hi).sqrt(), a.counts[i] as f64 / total * 100.0))
        })
        .collect()
}

fn histogram_chart(r: &PointResult) -> Chart {
    let mut lines = Vec::new();
    let mut colors = PALETTE.iter().copied();
    for (i, (d, c)) in [(Direction::Read, READ), (Direction::Write, WRITE)]
        .iter()
        .enumerate()
    {
        let s = &r.merged[i];
        if s.ios == 0 {
            continue;
        }
        lines.push(Line::new(
            format!("{d}s ({} IOs)", analysis::units::count(s.ios as f64)),
            c,
            density(&s.total),
        ));
        if s.legs.len() > 1 {
            for leg in &s.legs {
                if leg.lat.count() > 0 {
                    lines.push(
                        Line::new(
                            format!("{d} leg {}", leg.name),
                            colors.next().unwrap_or("#333"),
                            density(&leg.lat),
                        )
                        .dashed(),
                    );
                }
            }
        }
    }
    Chart {
        width: 1260.0,
        x_label: "latency (from each IO's intended start; legs from submission)".into(),
        x_scale: Scale::Log,
        x_unit: Unit::Seconds,
        x_ticks: None,
        shade: Vec::new(),
        shade_label: String::new(),
        panels: vec![Panel {
            title: "% of IOs per latency bucket (9% wide)".into(),
            height: 220.0,
            scale: Scale::Linear,
            unit: Unit::Plain,
            lines,
        }],
    }
}

fn sweep_chart(points: &[SweepPoint]) -> Chart {
    let pts = |f: &dyn Fn(&SweepPoint) -> Option<f64>| -> Vec<Option<(f64, f64)>> {
        points
            .iter()
            .enumerate()
            .map(|(i, p)| Some((i as f64, f(p)?)))
            .collect()
    };
    Chart {
        width: 1260.0,
        x_label: "sweep point".into(),
        x_scale: Scale::Linear,
        x_unit: Unit::Plain,
        x_ticks: Some(
            points
                .iter()
                .enumerate()
                .map(|(i, p)| (i as f64, p.label.clone()))
                .collect(),
        ),
        shade: Vec::new(),
        shade_label: String::new(),
        panels: vec![
            Panel {
                title: "IOPS".into(),
                height: 180.0,
                scale: Scale::Linear,
                unit: Unit::Count,
                lines: vec![
                    Line::new("read IOPS", READ, pts(&|p| p.iops[0])),
                    Line::new("write IOPS", WRITE, pts(&|p| p.iops[1])),
                ],
            },
            Panel {
                title: "p99 latency".into(),
                height: 180.0,
                scale: Scale::Log,
                unit: Unit::Seconds,
                lines: vec![
                    Line::new("read p99", READ, pts(&|p| p.p99_seconds[0])),
                    Line::new("write p99", WRITE, pts(&|p| p.p99_seconds[1])),
                ],
            },
        ],
    }
}

fn scores(o: &mut String, host: &str, d: &DirectionResult) {
    let _ = write!(
        o,
        "<h3>{} {}s: {} ({:.2})</h3>",
        esc(host),
        d.direction,
        esc(d.cause.name()),
        d.confidence
    );
    if !d.candidates.is_empty() {
        o.push_str("<table><tr><th class=\"l\">candidate</th><th class=\"l\">where</th><th>score</th><th>share</th><th>association</th><th class=\"l\">requirement</th></tr>");
        for c in d.candidates.iter().take(8) {
            let _ = write!(
                o,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(c.cause.name()),
                esc(&c.location),
                c.score,
                c.share.map_or("-".into(), pct),
                c.association.map_or("-".into(), |a| format!("{a:.2}")),
                if c.requirement_met { "met" } else { "not met" }
            );
        }
        o.push_str("</table>");
    }
    let mut sig: Vec<_> = d.signals.iter().collect();
    sig.sort_by(|a, b| b.rho.unwrap_or(-2.0).total_cmp(&a.rho.unwrap_or(-2.0)));
    if !sig.is_empty() {
        o.push_str("<table><tr><th class=\"l\">signal</th><th>rank correlation</th><th>lag</th><th>points</th><th>run</th><th>raised</th><th>others</th><th class=\"l\">rose</th></tr>");
        for s in sig.iter().take(14) {
            let lv = |v: Option<f64>| v.map_or("-".into(), |v| analysis::units::level(s.kind, v));
            let _ = write!(
                o,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&analysis::prose::phrase(host, s)),
                s.rho.map_or("-".into(), |r| format!("{r:.2}")),
                s.lag.map_or("-".into(), |l| l.to_string()),
                s.points,
                lv(s.run),
                lv(s.raised),
                lv(s.others),
                if s.rose { "yes" } else { "" }
            );
        }
        o.push_str("</table>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_is_percent_per_bucket() {
        let mut h = Histogram::new();
        for _ in 0..75 {
            h.record(100_000);
        }
        for _ in 0..25 {
            h.record(10_000_000);
        }
        let d = density(&h);
        let total: f64 = d.iter().flatten().map(|p| p.1).sum();
        assert!((total - 100.0).abs() < 1e-9);
        let peak = d.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
        assert_eq!(peak, 75.0);
        assert!(density(&Histogram::new()).is_empty());
    }
}
