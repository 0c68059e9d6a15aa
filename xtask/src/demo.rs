//! `cargo xtask demo`: the buffer shootout. The same replicated workload (reads and writes,
//! every write also sent to a replica host) runs through a switch with shallow port buffers
//! and through one with deep buffers, at 4 KiB and 64 KiB blocks, with stornet-agent
//! watching and `stornet analyze` naming the cause; a side-by-side table and HTML reports.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use stornet_lab::lab::run::Latency;
use stornet_lab::lab::{
    Disk, DiskSpec, HostSpec, Lab, Outcome, ReplicatedRun, Shaping, Workload, interrupt,
};

use crate::cmd;

/// A switch of the shootout.
struct Switch {
    name: &'static str,
    shaping: Shaping,
}

/// Block sizes, and each one's rates of reads and writes per job: 2,000 and 100 IOs per
/// second in all, 70% reads, a light load for the switch (2.5 and 1.8 MB/s of writes
/// against its 25 MB/s). A single `rate_iops` caps reads and writes each (fio's meaning):
/// 500 per job ran 2,000 reads and 2,000 writes a second.
const BLOCKS: [(&str, (u32, u32)); 2] = [("4k", (350, 150)), ("64k", (18, 7))];

fn workload(bs: &str, (reads, writes): (u32, u32)) -> Workload {
    Workload {
        rw: "randrw".into(),
        rwmixread: Some(70),
        bs: bs.into(),
        iodepth: 4,
        numjobs: 4,
        rate_iops: None,
        size: "256m".into(),
        runtime: "20s".into(),
        ramp_time: Some("1s".into()),
        // Long enough for thousands of IOs per interval: a p99 that a moment of CPU
        // contention on a busy machine does not move.
        interval: "2s".into(),
        extra: vec![format!("--rate_iops={reads},{writes}")],
    }
}

/// One cell column of the table.
struct Column {
    bs: &'static str,
    switch: &'static str,
    outcome: Outcome,
    html: PathBuf,
}

pub fn demo(skip_setup: bool) -> Result<()> {
    let started = Instant::now();
    if !cmd::is_root() {
        bail!(
            "the demo builds network namespaces, loop devices and cgroups: run it as root (sudo -E cargo xtask demo)"
        );
    }
    if !skip_setup {
        crate::setup::setup()?;
    }
    cmd::step("build stornet-agent, loadgen and stornet", || {
        cmd::run(cmd::cargo().args(["build", "--release", "--bins"]))
    })?;
    interrupt::install()?;
    let out = cmd::workspace_root().join("target/demo");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;

    let switches = [
        Switch {
            name: "shallow",
            shaping: Shaping::shallow(),
        },
        Switch {
            name: "deep",
            shaping: Shaping::deep(),
        },
    ];
    let mut columns = Vec::new();
    for sw in &switches {
        columns.extend(shootout(sw, &out)?);
    }
    columns.sort_by_key(|c| {
        (
            BLOCKS.iter().position(|b| b.0 == c.bs),
            c.switch != "shallow",
        )
    });
    let table = table(&columns);
    println!("\n{table}");
    let index = write_index(&out, &table, &columns)?;
    println!(
        "Reports: {} (each run's verdict and evidence, with charts); run records in {}",
        index.display(),
        out.display()
    );
    println!("The demo took {:.0} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// Both block sizes through one switch.
fn shootout(sw: &Switch, out: &Path) -> Result<Vec<Column>> {
    let s = &sw.shaping;
    println!(
        "==> {} buffers: switch ports at {}, burst {}, buffer {}",
        sw.name, s.rate, s.burst, s.limit
    );
    let hosts = [
        HostSpec::new("a").shaped(s.clone()),
        HostSpec::new("b").shaped(s.clone()),
    ];
    let lab = Lab::new(&format!("demo-{}", sw.name), &hosts)?;
    let disk = Disk::new("demo", DiskSpec::new(1 << 30))?;
    let rr = ReplicatedRun::start(&lab, "a", "b")?;
    let mut cols = Vec::new();
    for (bs, rate) in BLOCKS {
        interrupt::check()?;
        let name = format!("{bs}-{}", sw.name);
        let html = out.join(format!("report-{name}.html"));
        let w = workload(bs, rate);
        println!(
            "    {bs} blocks, {} jobs x {} reads/s + {} writes/s, {} in flight each, {}: running",
            w.numjobs, rate.0, rate.1, w.iodepth, w.runtime
        );
        let o = rr.run(&disk, &w, out, &name, Some(&html))?;
        println!("    verdict: {}", o.cause());
        cols.push(Column {
            bs,
            switch: sw.name,
            outcome: o,
            html,
        });
    }
    Ok(cols)
}

fn ms(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

fn table(cols: &[Column]) -> String {
    let lat = |c: &Column, dir: &str| -> Latency { c.outcome.latency(0, dir) };
    type Cell = Box<dyn Fn(&Column) -> String>;
    let rows: Vec<(&str, Cell)> = vec![
        (
            "IOPS",
            Box::new(move |c| format!("{:.0}", lat(c, "read").iops + lat(c, "write").iops)),
        ),
        (
            "MB/s",
            Box::new(move |c| {
                format!(
                    "{:.2}",
                    (lat(c, "read").bytes_per_second + lat(c, "write").bytes_per_second) / 1e6
                )
            }),
        ),
        ("read mean", Box::new(move |c| ms(lat(c, "read").mean_s))),
        ("read p95", Box::new(move |c| ms(lat(c, "read").p95_s))),
        ("read p99", Box::new(move |c| ms(lat(c, "read").p99_s))),
        ("write mean", Box::new(move |c| ms(lat(c, "write").mean_s))),
        ("write p95", Box::new(move |c| ms(lat(c, "write").p95_s))),
        ("write p99", Box::new(move |c| ms(lat(c, "write").p99_s))),
        (
            "retransmits",
            Box::new(|c| c.outcome.retransmits.to_string()),
        ),
        (
            "drops",
            Box::new(|c| (c.outcome.qdisc_drops + c.outcome.port_rx_drops).to_string()),
        ),
        ("verdict", Box::new(|c| c.outcome.cause().to_string())),
    ];
    const W: usize = 19;
    let mut t = format!("{:<12}", "");
    for c in cols {
        t.push_str(&format!("{:>W$}", format!("{} {}", c.bs, c.switch)));
    }
    t.push('\n');
    for (name, cell) in rows {
        t.push_str(&format!("{name:<12}"));
        for c in cols {
            t.push_str(&format!("{:>W$}", cell(c)));
        }
        t.push('\n');
    }
    t.push_str(
        "\nThe same load (70% reads, every write also sent to a replica host, at a fixed rate)\n\
         through a switch at 200 Mbit/s with 16 KiB port buffers (shallow) and with 4 MiB\n\
         (deep): latency from each IO's scheduled start, the client's TCP retransmits, the\n\
         switch's drops, and the cause stornet names from the agent's signals.\n",
    );
    t
}

/// `index.html`: the table and a link to each run's report.
fn write_index(out: &Path, table: &str, cols: &[Column]) -> Result<PathBuf> {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut links = String::new();
    for c in cols {
        let file = c.html.file_name().unwrap_or_default().to_string_lossy();
        links.push_str(&format!(
            "<li><a href=\"{file}\">{} blocks, {} buffers</a>: {}</li>\n",
            c.bs,
            c.switch,
            esc(c.outcome.cause())
        ));
    }
    let html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>stornet buffer shootout</title>\
         <style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em}}</style>\
         </head><body><h1>stornet buffer shootout</h1><pre>{}</pre><ul>\n{links}</ul></body></html>\n",
        esc(table)
    );
    let path = out.join("index.html");
    std::fs::write(&path, html).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
