//! Command-line flags, in the style of Prometheus exporters, and the subcommands.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::duration::parse_duration;

/// Exit code of usage and configuration errors.
pub const EXIT_USAGE: u8 = 2;

/// A usage or configuration error: reported in one line, exit code 2, before anything is
/// attached.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

#[derive(Parser, Debug)]
#[command(
    name = "stornet-agent",
    version,
    about = "eBPF telemetry of storage and network paths for Prometheus",
    args_conflicts_with_subcommands = false
)]
pub struct Cli {
    /// Address to serve the metrics on; `:PORT` listens on every address. Repeat it to
    /// listen on several addresses.
    #[arg(
        long = "web.listen-address",
        default_value = ":9477",
        value_name = "ADDR",
        action = clap::ArgAction::Append
    )]
    pub listen_address: Vec<String>,

    /// Path under which the metrics are served.
    #[arg(
        long = "web.telemetry-path",
        default_value = "/metrics",
        value_name = "PATH",
        value_parser = parse_telemetry_path
    )]
    pub telemetry_path: String,

    /// Web configuration (TLS, client certificates, headers, rate limit, basic auth) in the
    /// Prometheus exporter-toolkit format; re-read when it or its certificates change.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,

    /// Most connections served at once; at the limit a new one closes the oldest connection
    /// that is not answering a request.
    #[arg(
        long = "web.max-connections",
        default_value_t = 512,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=65536)
    )]
    pub max_connections: u32,

    /// Configuration file (TOML); without it every setting has its default.
    #[arg(long = "config.file", value_name = "FILE", global = true)]
    pub config_file: Option<PathBuf>,

    /// Only log messages of this level or above.
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info, global = true)]
    pub log_level: LogLevel,

    /// Log line format.
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt, global = true)]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub collectors: crate::collectors::CollectorFlags,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Pre-flight check: kernel, BTF, each probe's hook, capabilities, tracefs.
    /// Exits non-zero when no probe can run.
    Check,
    /// Attach, wait, print one set of metrics and exit.
    Snapshot {
        /// How long to measure before printing, e.g. 5s, 500ms, 1m.
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        interval: Duration,
        #[arg(long, value_enum, default_value_t = SnapshotFormat::Text)]
        format: SnapshotFormat,
    },
    /// Write the man pages and shell completions into a directory (for packaging).
    #[command(hide = true)]
    GenerateDocs(cli_docs::GenerateDocs),
}

pub use super::logging::{LogFormat, LogLevel};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SnapshotFormat {
    /// Prometheus text format.
    Text,
    /// The agent's data model as JSON.
    Json,
}

/// Parses the command line. Help and version print and exit 0; any other problem prints one
/// line and gives exit code 2.
pub fn parse() -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| {
        use clap::error::ErrorKind;
        if matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        ) {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        super::logging::stderr_line(&format!(
            "stornet-agent: {}",
            one_line(&e.render().to_string())
        ));
        ExitCode::from(EXIT_USAGE)
    })
}

/// Folds clap's multi-line error (message, hints, usage) into one line.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses `:9477`, `127.0.0.1:9477`, `[::1]:9477` or `localhost:9477`.
pub fn parse_listen_address(s: &str) -> Result<SocketAddr, UsageError> {
    let bad = |why: &str| {
        UsageError(format!(
            "--web.listen-address {s:?}: {why} (expected HOST:PORT or :PORT)"
        ))
    };
    let full = if s.starts_with(':') {
        format!("[::]{s}")
    } else {
        s.to_string()
    };
    if let Ok(a) = full.parse() {
        return Ok(a);
    }
    let (_, port) = full.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    port.parse::<u16>().map_err(|_| bad("bad port"))?;
    full.to_socket_addrs()
        .map_err(|e| bad(&format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| bad("resolves to no address"))
}

/// A path of its own: not the landing page or the health check.
fn parse_telemetry_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') {
        return Err(format!("{s:?} must start with /"));
    }
    if s == "/" || s == "/-/healthy" {
        return Err(format!("{s:?} is taken by the agent's own page"));
    }
    if s.contains(['?', '#']) || s.chars().any(char::is_whitespace) {
        return Err(format!("{s:?} must be a plain path"));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(parse_listen_address(":9477").unwrap().port(), 9477);
        assert!(parse_listen_address(":9477").unwrap().ip().is_unspecified());
        assert_eq!(
            parse_listen_address("127.0.0.1:1").unwrap().to_string(),
            "127.0.0.1:1"
        );
        assert!(
            parse_listen_address("localhost:9")
                .unwrap()
                .ip()
                .is_loopback()
        );
        assert!(parse_listen_address("localhost").is_err());
        assert!(parse_listen_address(":99999").is_err());
        assert!(parse_listen_address("127.0.0.1:x").is_err());
    }

    #[test]
    fn web_and_collector_flags() {
        let c = Cli::try_parse_from([
            "a",
            "--web.listen-address=127.0.0.1:1",
            "--web.listen-address",
            "[::1]:2",
            "--web.telemetry-path=/stornet",
            "--no-collector.ethtool",
            "--collector.disable-defaults",
            "--collector.block_issue",
            "--collector.sock_diag",
            "--no-collector.sock_diag",
            "--no-collector.netlink",
            "--collector.netlink",
        ])
        .unwrap();
        assert_eq!(c.listen_address, ["127.0.0.1:1", "[::1]:2"]);
        assert_eq!(c.telemetry_path, "/stornet");
        assert!(c.collectors.disable_defaults);
        let want: std::collections::BTreeMap<String, bool> = [
            ("ethtool", false),
            ("block_issue", true),
            ("sock_diag", false),
            ("netlink", true),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(c.collectors.set, want);
        // After a subcommand too.
        let c = Cli::try_parse_from(["a", "snapshot", "--no-collector.netlink"]).unwrap();
        assert_eq!(c.collectors.set.get("netlink"), Some(&false));
        for bad in [
            vec!["a", "--collector.nope"],
            vec!["a", "--web.telemetry-path=metrics"],
            vec!["a", "--web.telemetry-path=/"],
        ] {
            let e = Cli::try_parse_from(&bad).unwrap_err();
            let line = one_line(&e.render().to_string());
            assert!(!line.contains('\n') && !line.is_empty(), "{line}");
        }
    }

    #[test]
    fn flags_and_subcommands() {
        let c =
            Cli::try_parse_from(["a", "--log.format=json", "snapshot", "--interval=2s"]).unwrap();
        assert_eq!(c.log_format, LogFormat::Json);
        assert!(matches!(
            c.command,
            Some(Command::Snapshot { interval, format: SnapshotFormat::Text })
                if interval == Duration::from_secs(2)
        ));
        let c = Cli::try_parse_from(["a", "check", "--config.file", "/x.toml"]).unwrap();
        assert_eq!(
            c.config_file.as_deref(),
            Some(std::path::Path::new("/x.toml"))
        );
        assert_eq!(c.listen_address, [":9477"]);
        assert_eq!(c.telemetry_path, "/metrics");
        let e = Cli::try_parse_from(["a", "--log.level=loud"]).unwrap_err();
        let line = one_line(&e.render().to_string());
        assert!(
            line.contains("--log.level") && !line.contains('\n'),
            "{line}"
        );
    }
}
