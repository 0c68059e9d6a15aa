//! The command line of `stornet`: `analyze` (a run record, or the fleet from Prometheus),
//! `watch` (the fleet's verdict again every step) and `report` (with the HTML report). Each
//! comes down to one [`AnalyzeArgs`], which `loadgen analyze` also takes as it is.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Names the root cause of a storage latency rise: a slow device, a saturated queue, or the
/// network between the hosts, with the evidence.
#[derive(Parser, Debug)]
#[command(name = "stornet", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Name the root cause of a latency rise from a run record or from Prometheus.
    Analyze(AnalyzeArgs),
    /// Watch the fleet during an incident: its verdict over a window that moves with the
    /// clock, evaluated again every --step, one line each, until interrupted.
    Watch(WatchArgs),
    /// Write the HTML report (charts, self-contained) of a run record or of the fleet, and
    /// print the verdict as `analyze` does.
    Report(ReportArgs),
    /// Write the man pages and shell completions into a directory (for packaging).
    #[command(hide = true)]
    GenerateDocs(cli_docs::GenerateDocs),
}

impl Command {
    /// The one analysis every command is; `generate-docs` analyses nothing and is given back.
    pub fn into_analysis(self) -> Result<AnalyzeArgs, cli_docs::GenerateDocs> {
        Ok(match self {
            Command::GenerateDocs(docs) => return Err(docs),
            Command::Analyze(a) => a,
            Command::Watch(w) => AnalyzeArgs {
                record: None,
                format: w.format,
                html: None,
                watch: true,
                fleet: w.fleet,
            },
            Command::Report(r) => AnalyzeArgs {
                record: r.record,
                format: r.format,
                html: Some(r.html),
                watch: false,
                fleet: r.fleet,
            },
        })
    }
}

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

/// Arguments of `stornet analyze` (and of `loadgen analyze`, its alias).
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// A run record written by `loadgen run --record FILE`.
    #[arg(conflicts_with = "prometheus")]
    pub record: Option<PathBuf>,
    /// How to print the verdict.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write a self-contained HTML report with charts to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Fleet mode: evaluate the window again every --step, `now` read afresh (give relative
    /// times: --start now-15m --end now), and print each verdict as one line (with --format
    /// json, one JSON object per line) until interrupted; a failed query is a line too
    /// (`stornet watch`).
    #[arg(long, requires = "prometheus")]
    pub watch: bool,
    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// Arguments of `stornet watch`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("prometheus", |a| a.required(true)))]
pub struct WatchArgs {
    /// How to print each verdict: a line of text, or one JSON object per line.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// Arguments of `stornet report`.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A run record written by `loadgen run --record FILE`.
    #[arg(conflicts_with = "prometheus")]
    pub record: Option<PathBuf>,
    /// The self-contained HTML report with charts to write (nothing in it is fetched).
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    /// How to print the verdict.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// Fleet mode: where the agents' metrics are read and over which window.
#[derive(clap::Args, Debug)]
pub struct FleetArgs {
    /// Fleet mode: read the agents' metrics from this Prometheus server instead of a record.
    #[arg(long, value_name = "URL")]
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
    /// Fleet mode: label matchers for every query, e.g. '{instance=~"stor.*"}'.
    #[arg(long, value_name = "MATCHERS")]
    pub selector: Option<String>,
    /// Fleet mode: judge each host by an application's own latency instead of its block
    /// layer's: `ceph` (each OSD's op latency from the mgr, joined to its host by
    /// `ceph_osd_metadata`), or KIND:METRIC:HOST_LABEL[:read|write] for any latency metric
    /// in seconds (KIND `histogram`, `summary` or `sumcount`; HOST_LABEL names the host as
    /// an agent's instance, its address or its host name; once per direction).
    #[arg(long, value_name = "SPEC", requires = "prometheus")]
    pub app_latency: Vec<String>,
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

impl FleetArgs {
    pub fn prometheus_client(&self) -> promclient::ClientFiles {
        promclient::ClientFiles {
            ca_file: self.prometheus_ca_file.clone(),
            cert_file: self.prometheus_cert_file.clone(),
            key_file: self.prometheus_key_file.clone(),
            insecure_skip_verify: self.prometheus_insecure_skip_verify,
            bearer_token_file: self.prometheus_bearer_token_file.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn watch_and_report_are_analyses() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["stornet"], args].concat())
                .map(|c| c.command.into_analysis().unwrap())
        };
        let w = parse(&[
            "watch",
            "--prometheus=http://p:9090",
            "--start=now-5m",
            "--end=now",
        ])
        .unwrap();
        assert!(w.watch && w.record.is_none() && w.html.is_none());
        assert_eq!(w.fleet.start.as_deref(), Some("now-5m"));
        let e = parse(&["watch", "--start=now-5m", "--end=now"]).unwrap_err();
        assert!(e.to_string().contains("--prometheus"), "{e}");
        let r = parse(&["report", "run.json", "--html", "r.html"]).unwrap();
        assert_eq!(r.html, Some(PathBuf::from("r.html")));
        assert!(!r.watch && r.record.is_some());
        assert!(
            parse(&["report", "run.json"]).is_err(),
            "--html is required"
        );
        let a = parse(&["analyze", "run.json", "--format=json"]).unwrap();
        assert_eq!(a.format, Format::Json);
        assert!(parse(&["analyze", "run.json", "--prometheus=http://p"]).is_err());
    }
}
