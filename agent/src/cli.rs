//! Command-line flags, in the style of Prometheus exporters.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "stornet-agent",
    version,
    about = "eBPF telemetry of storage and network paths for Prometheus"
)]
pub struct Cli {
    /// Address to serve /metrics on; `:PORT` listens on every address.
    #[arg(long = "web.listen-address", default_value = ":9477")]
    pub listen_address: String,
    /// Configuration file (TOML); without it every setting has its default.
    #[arg(long = "config.file")]
    pub config_file: Option<std::path::PathBuf>,
}

/// Reads and checks the configuration file, or the defaults without one.
pub fn load_config(path: Option<&std::path::Path>) -> Result<crate::config::Config> {
    let Some(path) = path else {
        return Ok(crate::config::Config::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --config.file {}", path.display()))?;
    crate::config::Config::parse(&text).with_context(|| format!("{}", path.display()))
}

/// Parses `:9477`, `127.0.0.1:9477` or `[::1]:9477`.
pub fn parse_listen_address(s: &str) -> Result<SocketAddr> {
    let full = if s.starts_with(':') {
        format!("[::]{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .with_context(|| format!("--web.listen-address {s:?} is not HOST:PORT or :PORT"))
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
        assert!(parse_listen_address("localhost").is_err());
        assert!(parse_listen_address(":99999").is_err());
    }
}
