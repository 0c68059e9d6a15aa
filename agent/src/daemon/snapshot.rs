//! `stornet-agent snapshot`: attach, measure for an interval, print one set of metrics, exit.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use tracing::error;

use super::cli::SnapshotFormat;
use crate::agent::Agent;
use crate::config::Config;
use crate::exposition::text;

pub fn run(config: &Config, interval: Duration, format: SnapshotFormat) -> ExitCode {
    // Everything read at the one gather, after the interval.
    let agent = Agent::start(config, None);
    std::thread::sleep(interval);
    let gathered = agent.gather();
    let families = gathered.families();
    let text = match format {
        SnapshotFormat::Text => text::render(&families),
        SnapshotFormat::Json => serde_json::to_string_pretty(&families)
            .map(|s| s + "\n")
            .map_err(Into::into),
    };
    drop(agent);
    match text.map(|t| std::io::stdout().lock().write_all(t.as_bytes())) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            error!(error = %e, "writing the snapshot");
            ExitCode::FAILURE
        }
        Err(e) => {
            error!(error = %format!("{e:#}"), "rendering the snapshot");
            ExitCode::FAILURE
        }
    }
}
