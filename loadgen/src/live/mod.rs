//! A run while it runs: the progress line on a terminal and the live `/metrics` endpoint
//! (both show the live verdict, `results::live_verdict`).

pub mod metrics;
pub mod progress;
