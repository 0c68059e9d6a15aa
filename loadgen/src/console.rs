//! Messages on stderr that cannot stop a run: when stderr is a pipe whose reader went away,
//! a line is dropped where `eprintln!` would panic and lose the run's report.

use std::io::Write;

/// Writes one line to stderr, ignoring failure.
pub fn line(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// `note!("…", args)`: one line on stderr via [`line`].
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::console::line(format_args!($($arg)*))
    };
}
