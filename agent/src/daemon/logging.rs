//! The agent's log: stornet's shared logfmt/JSON stderr log (the `stornet-log` crate).

pub use stornet_log::{LogFormat, LogLevel, init, stderr_line};
