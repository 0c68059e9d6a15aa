//! Fleet mode: the agents' metrics read back from Prometheus over a window (`fleet` holds the
//! queries and how their answers fill the model), judged as one run whose hosts are the
//! agents; its first line says where and when, its notes what fleet mode cannot see.

use analysis::Run;
use promclient::Url;
use promclient::query::QueryError;

use super::output::{Output, Source, print, write_html};
use crate::cli::AnalyzeArgs;
use crate::error::Failure;
use crate::{fleet, html, time};

/// What every fleet query of one `stornet analyze --prometheus` shares.
pub(super) struct FleetQuery {
    url: Url,
    client: promclient::Client,
    pub step: f64,
    matchers: String,
    timeout: std::time::Duration,
}

pub(super) fn fleet_query(a: &AnalyzeArgs, url: &str) -> Result<FleetQuery, Failure> {
    let usage = |e: String| Failure::Usage(e);
    let url = Url::parse(url).map_err(|e| usage(format!("--prometheus: {e}")))?;
    let step = record::units::parse_time_ns(a.fleet.step.as_deref().unwrap_or("15s"))
        .map_err(|e| usage(format!("--step: {e}")))? as f64
        / 1e9;
    let matchers = fleet::matchers(a.fleet.selector.as_deref().unwrap_or("")).map_err(usage)?;
    let client = a
        .fleet
        .prometheus_client()
        .load("--prometheus")
        .map_err(usage)?;
    Ok(FleetQuery {
        url,
        client: promclient::Client::new(&client),
        step,
        matchers,
        timeout: a.fleet.timeout,
    })
}

/// --start and --end, with `now` as given.
pub(super) fn window(a: &AnalyzeArgs, now: f64) -> Result<(f64, f64), Failure> {
    let usage = |e: String| Failure::Usage(e);
    let start = a
        .fleet
        .start
        .as_deref()
        .ok_or_else(|| usage("fleet mode needs --start".into()))
        .and_then(|s| time::parse(s, now).map_err(|e| usage(format!("--start: {e}"))))?;
    let end = a
        .fleet
        .end
        .as_deref()
        .ok_or_else(|| usage("fleet mode needs --end".into()))
        .and_then(|s| time::parse(s, now).map_err(|e| usage(format!("--end: {e}"))))?;
    Ok((start, end))
}

/// The agents' signals between `start` and `end`, as the analysis' input.
pub(super) fn fleet_run(
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
            a.fleet
                .selector
                .as_deref()
                .map_or(String::new(), |s| format!(" matching {s}")),
            time::format(start),
            time::format(end)
        )));
    }
    Ok((f, grid, run))
}

/// `stornet analyze --prometheus URL`: the fleet's verdict over one window.
pub(super) fn analyze(a: &AnalyzeArgs, q: &FleetQuery) -> Result<u8, Failure> {
    let (start, end) = window(a, time::now())?;
    let step = q.step;
    let (f, grid, run) = fleet_run(a, q, start, end)?;
    let report = super::analyze(&run, "the Prometheus data")?;
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
            selector: a.fleet.selector.clone().unwrap_or_default(),
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
