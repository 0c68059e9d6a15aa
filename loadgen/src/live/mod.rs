//! A run while it runs: the progress line on a terminal and the live `/metrics` endpoint.

pub mod metrics;
pub mod progress;
