//! Recording a run (`--record run.json`): while it runs, the start of each point's measured
//! part, its interval histograms and the agents' samples; at its end, the run record (the
//! `record` crate's format) with the analysis input of every point, built by the diagnosis
//! crate's table (`diagnose::signals` for the agents, `diagnose::latency` for loadgen's own).
//!
//! - [`recorder`]: collects during the run, builds and writes the record.
//! - [`system`]: the host loadgen runs on: its name, addresses, and the disks of its targets.

pub mod recorder;
pub mod system;

pub use recorder::Recorder;
