//! What an analysis prints: the verdict and its evidence as text or as one JSON document
//! (with what was analysed), on stdout; the HTML report into its file.

use std::io::Write;

use analysis::Report;
use serde::Serialize;

use crate::cli::Format;
use crate::error::Failure;

/// What was analysed, for the JSON output.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Source {
    Record {
        path: String,
    },
    Prometheus {
        url: String,
        start: f64,
        end: f64,
        step_seconds: f64,
        selector: String,
    },
}

/// A sweep point's verdict.
#[derive(Serialize)]
pub(super) struct PointVerdict {
    pub index: usize,
    pub label: String,
    pub verdict: analysis::Verdict,
}

#[derive(Serialize)]
pub(super) struct Output<'a> {
    pub source: Source,
    /// The chosen point's report (the only one without a sweep).
    #[serde(flatten)]
    pub report: &'a Report,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<PointVerdict>,
}

pub(super) fn write_html(path: &std::path::Path, html: &str) -> Result<(), Failure> {
    std::fs::write(path, html)
        .map_err(|e| Failure::Usage(format!("--html: cannot write {}: {e}", path.display())))?;
    crate::note!("stornet: HTML report written to {}", path.display());
    Ok(())
}

pub(super) fn print(
    format: Format,
    out: &Output,
    text: impl FnOnce() -> String,
) -> Result<u8, Failure> {
    let s = match format {
        // Names from a record or from Prometheus reach the terminal as plain text.
        Format::Text => crate::console::terminal(&text()),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(out)
                .map_err(|e| Failure::Runtime(anyhow::anyhow!("encoding the report: {e}")))?;
            s.push('\n');
            s
        }
    };
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes())
        .and_then(|_| o.flush())
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("writing the report: {e}")))?;
    Ok(0)
}
