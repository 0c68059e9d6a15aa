//! The kernel support table: what the agent does on each kernel of the matrix, made from what
//! the guests reported (`stornet-agent check` and the tests), and kept in docs/agent.md, which
//! the tier checks against it.

use anyhow::{Result, bail};

use super::Run;
use super::guest::DRIVERS;

const BEGIN: &str = "<!-- kernel-support: begin (written by `cargo xtask vm --bless`) -->";
const END: &str = "<!-- kernel-support: end -->";
const DOC: &str = "docs/agent.md";

/// Probes attached in a boot, as `n of m`, with the down ones and why.
fn probes_up(r: &Run) -> String {
    let rows: Vec<&String> = r
        .outcome
        .check
        .iter()
        .filter(|l| l.starts_with("probe "))
        .collect();
    let down: Vec<String> = rows
        .iter()
        .filter(|l| l.split_whitespace().nth(2).is_none_or(|s| s != "ok"))
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect();
    let up = rows.len() - down.len();
    if down.is_empty() {
        format!("all {up}")
    } else {
        format!("{up} of {}; down: {}", rows.len(), down.join(", "))
    }
}

/// Drivers whose exact-count and in-flight tests passed in a boot, and those the kernel
/// lacks.
fn drivers(r: &Run) -> String {
    let mut cells = Vec::new();
    for d in DRIVERS {
        if !r.drivers.contains(&d.name) {
            cells.push(format!("no {} (not in this kernel package)", d.name));
            continue;
        }
        let passed = r
            .outcome
            .results
            .iter()
            .filter(|t| t.name.starts_with(&format!("drivers::{}::", d.name)))
            .all(|t| t.ok);
        cells.push(format!(
            "{} {}",
            d.name,
            if passed { "exact" } else { "FAILED" }
        ));
    }
    cells.join(", ")
}

fn cell(r: &Run, check: &str) -> String {
    r.outcome
        .check_row(check)
        .map(|(_, d)| d)
        .unwrap_or_else(|| "?".into())
}

/// The table, one row per kernel series, from its `drivers` and `lockdown` boots.
pub fn table(runs: &[Run]) -> String {
    let mut out = String::from(
        "| kernel | probes attached | under `lockdown=confidentiality` | block layout | drop reasons | block drivers, counts vs /sys/block/*/stat |\n\
         |---|---|---|---|---|---|\n",
    );
    let mut series: Vec<&str> = runs.iter().map(|r| r.kernel.series.series).collect();
    series.dedup();
    for s in series {
        let of = |boot: &str| {
            runs.iter()
                .find(|r| r.kernel.series.series == s && r.boot.name == boot)
        };
        let (Some(full), Some(locked)) = (of("drivers"), of("lockdown")) else {
            continue;
        };
        out.push_str(&format!(
            "| {s} ({}) | {} | {} | {} | {} | {} |\n",
            full.kernel.series.distro,
            probes_up(full),
            probes_up(locked),
            cell(full, "block layout"),
            cell(full, "drop reasons"),
            drivers(full),
        ));
    }
    out
}

/// One line per boot: kernel, release, boot, tests passed, seconds.
pub fn summary(runs: &[Run]) -> String {
    let mut out =
        String::from("kernel  release                          boot      tests     seconds\n");
    for r in runs {
        let passed = r.outcome.results.iter().filter(|t| t.ok).count();
        let total = r.outcome.results.len() + r.outcome.missing.len();
        out.push_str(&format!(
            "{:<7} {:<32} {:<9} {:>3}/{:<5} {:>7.0}{}\n",
            r.kernel.series.series,
            r.kernel.release,
            r.boot.name,
            passed,
            total,
            r.seconds,
            if r.outcome.passed() { "" } else { "  FAILED" }
        ));
    }
    out
}

/// Replaces the text between the markers.
pub fn splice(doc: &str, table: &str) -> Result<String> {
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        bail!("{DOC} has no kernel support markers ({BEGIN} … {END})");
    };
    Ok(format!("{}{BEGIN}\n{table}{}", &doc[..b], &doc[e..]))
}

/// Checks (or with `bless` writes) the table in docs/agent.md.
pub fn check_docs(runs: &[Run], bless: bool) -> Result<()> {
    let path = crate::cmd::workspace_root().join(DOC);
    let doc = std::fs::read_to_string(&path)?;
    let table = table(runs);
    let want = splice(&doc, &table)?;
    println!("kernel support, as measured:\n{table}");
    if want == doc {
        println!("{DOC}: the kernel support table matches");
        return Ok(());
    }
    if bless {
        std::fs::write(&path, want)?;
        println!("{DOC}: kernel support table written");
        return Ok(());
    }
    bail!(
        "{DOC}: the kernel support table differs from what the guests measured (above); \
         `cargo xtask vm --bless` writes it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_between_markers() {
        let doc = format!("a\n{BEGIN}\nold\n{END}\nb\n");
        assert_eq!(
            splice(&doc, "| new |\n").unwrap(),
            format!("a\n{BEGIN}\n| new |\n{END}\nb\n")
        );
        assert!(splice("no markers", "x").is_err());
    }
}
