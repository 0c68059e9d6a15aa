//! The log of `loadgen serve`: stornet's shared logfmt/JSON stderr log (the `stornet-log`
//! crate), in the agent's styles.

pub use stornet_log::{LogFormat, LogLevel, init};
