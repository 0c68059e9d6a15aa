//! The log of stornet's programs on stderr: logfmt (`ts=… level=info msg="…" key=value`)
//! like other Prometheus exporters, or one JSON object per line, chosen with `--log.format`
//! and filtered with `--log.level`. A stderr that breaks (its reader went away) costs the log
//! lines, never the program: write errors are dropped.

use std::fmt::{self, Write as _};
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--log.level`: only messages of this level or above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// `--log.format`: the log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Logfmt,
    Json,
}

/// Installs the subscriber for the rest of the process; a second call (a test that starts a
/// server twice in one process) keeps the first.
pub fn init(level: LogLevel, format: LogFormat) {
    let filter = match level {
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Error => LevelFilter::ERROR,
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Reporting a failed write would itself write to stderr, and panic.
        .log_internal_errors(false)
        .with_max_level(filter);
    let _ = match format {
        LogFormat::Logfmt => builder.event_format(Logfmt).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// Writes one line to stderr, dropping it if stderr is gone (where `eprintln!` panics).
pub fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The logfmt event formatter.
pub struct Logfmt;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        let mut fields = Fields::default();
        event.record(&mut fields);
        write!(w, "ts={ts} level={level}")?;
        if let Some(msg) = fields.message {
            write!(w, " msg={}", quote(&msg))?;
        }
        w.write_str(&fields.rest)?;
        writeln!(w)
    }
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            let _ = write!(self.rest, " {}={}", field.name(), quote(value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// A logfmt value: bare when it is a simple token, else double-quoted with escapes.
pub fn quote(v: &str) -> String {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
    if bare {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn logfmt_quoting() {
        assert_eq!(quote("block_completion"), "block_completion");
        assert_eq!(quote("127.0.0.1:9477"), "127.0.0.1:9477");
        assert_eq!(quote("no probe"), "\"no probe\"");
        assert_eq!(quote("a=\"b\"\n"), "\"a=\\\"b\\\"\\n\"");
        assert_eq!(quote(""), "\"\"");
    }
}
