//! The readable report: per job and direction IOPS, bandwidth and latency percentiles
//! (total from the intended start, and completion), CPU per IO, and the timeline.

use std::fmt::Write;

use super::{entries, rates};
use crate::options::sizes;
use crate::results::histogram::Summary;
use crate::results::latency_search::SearchResult;
use crate::results::stats::{DirStats, PointResult, RunResult};
use crate::results::timeline::TimelineRow;

/// 812ns, 130.0us, 12.3ms, 1.20s.
pub fn ns(v: u64) -> String {
    let f = v as f64;
    if v < 1_000 {
        format!("{v}ns")
    } else if v < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if v < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

/// 231.2k, 1.20M.
pub fn count(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Bytes per second in binary units.
pub fn bw(v: f64) -> String {
    let mut v = v;
    for unit in ["B/s", "KiB/s", "MiB/s", "GiB/s"] {
        if v < 1024.0 {
            return format!("{v:.1}{unit}");
        }
        v /= 1024.0;
    }
    format!("{v:.1}TiB/s")
}

fn lat_line(out: &mut String, label: &str, width: usize, s: &Summary) {
    let _ = writeln!(
        out,
        "      {label:<width$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        ns(s.min),
        ns(s.mean as u64),
        ns(s.p50),
        ns(s.p90),
        ns(s.p95),
        ns(s.p99),
        ns(s.p99_9),
        ns(s.p99_99),
        ns(s.max)
    );
}

fn dir_block(out: &mut String, name: &str, d: &DirStats, runtime_ns: u64) {
    if d.ios == 0 {
        return;
    }
    let (iops, b) = rates(d, runtime_ns);
    let _ = writeln!(
        out,
        "    {name}: IOPS={}, BW={}, {} IOs in {:.1}s",
        count(iops),
        bw(b),
        count(d.ios as f64),
        runtime_ns as f64 / 1e9
    );
    // Legs this direction has (reads have no replica legs); their names
    // (`replica 198.18.0.2:7480`) are longer than the other labels.
    let legs: Vec<_> = d.legs.iter().filter(|l| l.lat.count() > 0).collect();
    let w = legs.iter().map(|l| l.name.len()).fold(7, usize::max);
    let _ = writeln!(
        out,
        "      {:<w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "latency", "min", "mean", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"
    );
    lat_line(out, "total", w, &d.total.summary());
    lat_line(out, "clat", w, &d.clat.summary());
    for leg in legs {
        lat_line(out, &leg.name, w, &leg.lat.summary());
    }
}

/// The per-interval latency of each leg of the writes (local device, each replica), when
/// writes have more than one leg.
fn leg_timeline(out: &mut String, rows: &[TimelineRow]) {
    let Some(names) = rows
        .iter()
        .map(|r| &r.write.legs)
        .find(|l| l.len() > 1 && l.iter().any(|x| x.lat_ns.n > 0))
    else {
        return;
    };
    let names: Vec<&str> = names.iter().map(|l| l.name.as_str()).collect();
    let w = names.iter().map(|n| n.len()).fold(19, usize::max);
    let _ = writeln!(
        out,
        "  write legs per interval (p50 / p99 from submission):"
    );
    let _ = write!(out, "    {:>7}", "t(s)");
    for n in &names {
        let _ = write!(out, "  {n:>w$}");
    }
    out.push('\n');
    for r in rows {
        let _ = write!(out, "    {:>7.1}", r.t_s);
        for n in &names {
            let cell = match r.write.legs.iter().find(|l| l.name == *n) {
                Some(l) if l.lat_ns.n > 0 => format!("{} / {}", ns(l.lat_ns.p50), ns(l.lat_ns.p99)),
                _ => "-".to_string(),
            };
            let _ = write!(out, "  {cell:>w$}");
        }
        out.push('\n');
    }
}

fn timeline(out: &mut String, rows: &[TimelineRow], interval_ns: u64) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  timeline ({} intervals; latency from intended start):",
        ns(interval_ns)
    );
    let _ = writeln!(
        out,
        "    {:>7} {:>8} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>6} {:>6}",
        "t(s)", "r IOPS", "r p50", "r p99", "w IOPS", "w p50", "w p99", "QD", "cpu%", "sys%"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "    {:>7.1} {:>8} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6.1} {:>6.1} {:>6.1}",
            r.t_s,
            count(r.read.iops),
            ns(r.read.lat_ns.p50),
            ns(r.read.lat_ns.p99),
            count(r.write.iops),
            ns(r.write.lat_ns.p50),
            ns(r.write.lat_ns.p99),
            r.queue_depth,
            r.cpu_process_pct,
            r.cpu_system_pct
        );
    }
}

/// The steps of a latency-target search and what it found.
fn search_table(out: &mut String, l: &SearchResult) {
    let t = &l.target;
    let p = format!("p{}", t.percentile);
    let _ = writeln!(
        out,
        "    latency target: {p} <= {} over windows of {}",
        ns(t.target_ns),
        ns(t.window_ns)
    );
    let _ = writeln!(
        out,
        "      {:>4} {:>5} {:>8} {:>8} {:>8} {:>9} {:>8}  verdict",
        "step", "depth", "t(s)", "IOs", "IOPS", p, "within"
    );
    for (i, s) in l.steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "      {:>4} {:>5} {:>8.2} {:>8} {:>8} {:>9} {:>7.2}%  {}{}",
            i + 1,
            s.depth,
            s.start_ns as f64 / 1e9,
            s.ios,
            count(s.iops),
            ns(s.latency_ns),
            s.within_pct,
            if s.met { "met" } else { "missed" },
            if s.last { " (results)" } else { "" }
        );
    }
    let found = l.steps.iter().rev().find(|s| s.last && s.met);
    let _ = match (found, l.finished) {
        (Some(s), true) => writeln!(
            out,
            "    found: depth {}, {} IOPS with {p} {} <= {}",
            l.depth,
            count(s.iops),
            ns(s.latency_ns),
            ns(t.target_ns)
        ),
        (None, true) => writeln!(
            out,
            "    found: no depth meets {p} <= {} (depth 1 gives {p} {})",
            ns(t.target_ns),
            ns(l.steps.last().map_or(0, |s| s.latency_ns))
        ),
        _ => writeln!(
            out,
            "    the search did not finish before the run ended (at depth {})",
            l.depth
        ),
    };
}

/// `, rate_iops=500` or `, rate_iops=500,200` (reads, writes); empty without a limit.
fn rate_label(r: &[Option<u64>; 2]) -> String {
    let f = |x: Option<u64>| x.map(|n| n.to_string()).unwrap_or_default();
    match r {
        [None, None] => String::new(),
        [a, b] if a == b => format!(", rate_iops={}", f(*a)),
        [a, b] => format!(", rate_iops={},{}", f(*a), f(*b)),
    }
}

fn point(out: &mut String, r: &RunResult, p: &PointResult, group: bool) {
    if r.points.len() > 1 {
        let shapes: Vec<String> = p
            .jobs
            .iter()
            .map(|j| format!("bs={} iodepth={}", sizes::label(&j.sizes), j.iodepth))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // A job file's groups (stonewall) run different jobs; a sweep's points the same.
        let jobs = |q: &PointResult| -> Vec<usize> { q.jobs.iter().map(|j| j.group).collect() };
        let what = if r.points.iter().any(|q| jobs(q) != jobs(&r.points[0])) {
            "group"
        } else {
            "point"
        };
        let _ = writeln!(
            out,
            "{what} {}/{}: {}",
            p.index + 1,
            r.points.len(),
            shapes.join("; ")
        );
    }
    let list = entries(p, group);
    for (j, members) in &list {
        let _ = writeln!(
            out,
            "  {}{}: rw={}, bs={}, iodepth={}{}, {}",
            j.name,
            if members.len() > 1 {
                format!(" ({} jobs merged)", members.len())
            } else {
                format!(".{}", j.jobnum)
            },
            j.rw.as_str(),
            sizes::label(&j.sizes),
            j.iodepth,
            rate_label(&j.rate_iops),
            j.filename
        );
        dir_block(out, "read", &j.dirs[0], j.runtime_ns);
        // A trim job's IOs are its writes' (each a hole punched).
        let w = if j.rw.trim() { "trim" } else { "write" };
        dir_block(out, w, &j.dirs[1], j.runtime_ns);
        if let Some(e) = j.errors_continued.filter(|e| e.total > 0) {
            let _ = writeln!(
                out,
                "    errors gone on after (continue_on_error): {}, the first {}",
                e.total,
                crate::options::errors::name(e.first)
            );
        }
        if j.sync.ios > 0 {
            let _ = writeln!(
                out,
                "    sync: {} fsync/fdatasync",
                count(j.sync.ios as f64)
            );
            let _ = writeln!(
                out,
                "      {:<7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "latency", "min", "mean", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"
            );
            lat_line(out, "sync", 7, &j.sync.lat.summary());
        }
        if let Some(l) = &j.latency_search {
            search_table(out, l);
        }
        if let Some(ss) = &j.steadystate {
            // As fio's: the window's means, and the criterion last judged.
            let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / ss.dur_s.max(1) as f64;
            let c = ss.criterion;
            let _ = writeln!(
                out,
                "    steadystate: attained={}, bw={}, iops={}, {}{}={:.3}{}",
                if ss.attained { "yes" } else { "no" },
                bw(mean(&ss.bw)),
                count(mean(&ss.iops)),
                if c.iops { "iops" } else { "bw" },
                if c.slope { " slope" } else { " mean dev" },
                ss.value,
                if c.pct { "%" } else { "" }
            );
        }
        if let Some(v) = &j.verify {
            let bad = v.corruptions.len() as u64 + v.more_corruptions;
            let _ = writeln!(
                out,
                "    verify: {} blocks written, {} checked, {} corrupt",
                v.blocks_written, v.blocks_checked, bad
            );
            for c in &v.corruptions {
                let _ = writeln!(
                    out,
                    "      offset {} ({:#x}): {}",
                    c.offset, c.offset, c.problem
                );
            }
        }
    }
    if list.len() > 1 {
        let _ = writeln!(out, "  all jobs:");
        dir_block(out, "read", &p.merged[0], p.runtime_ns);
        dir_block(out, "write", &p.merged[1], p.runtime_ns);
    }
    let c = &p.cpu;
    let _ = writeln!(
        out,
        "  cpu: {:.2}us per IO (user {:.2}s, sys {:.2}s, io_uring workers {:.2}s); process {:.0}% of one CPU; system {:.0}% of {} CPUs",
        c.per_io_us, c.user_s, c.sys_s, c.io_workers_s, c.process_pct, c.system_pct, c.cpus
    );
    timeline(out, &p.timeline, r.options.interval_ns);
    leg_timeline(out, &p.timeline);
}

pub fn render(r: &RunResult, group: bool) -> String {
    let mut out = String::new();
    for p in &r.points {
        point(&mut out, r, p, group);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(ns(812), "812ns");
        assert_eq!(ns(130_000), "130.0us");
        assert_eq!(ns(12_340_000), "12.34ms");
        assert_eq!(ns(1_200_000_000), "1.20s");
        assert_eq!(count(231_200.0), "231.2k");
        assert_eq!(bw(1024.0 * 1024.0 * 903.0), "903.0MiB/s");
    }
}
