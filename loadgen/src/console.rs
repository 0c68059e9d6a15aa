//! Messages on stderr that cannot stop a run, and text from elsewhere made fit for a
//! terminal: the diagnosis crate's (`diagnose::console`), with loadgen's own `note!`.

pub use diagnose::console::{line, plain, terminal};

/// `note!("…", args)`: one line on stderr via [`line`].
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::console::line(format_args!($($arg)*))
    };
}
