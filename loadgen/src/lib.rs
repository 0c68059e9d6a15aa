//! loadgen: an io_uring storage load generator with fio's options, open-loop latency,
//! mergeable histograms, a per-interval timeline, and data-safety checks; replicated writes
//! to peers; agent sampling during a run; cluster runs and the services that take them.
//! The root-cause analysis of a run or a fleet is the diagnosis crate's (`stornet analyze`;
//! `loadgen analyze` is its alias).
//!
//! `run` reads top to bottom: `options` (command line, job files, profiles → a validated
//! plan) → `target` (what each job opens, and the safety checks) → `engine` (io_uring jobs,
//! with `replication` legs) → `results` (histograms, timeline, reports); `live` shows the
//! run while it runs, `sampling` reads the agents and the devices, and `recording` keeps it
//! all in a run record that `stornet analyze` reads.

pub mod clock;
pub mod cluster;
pub mod console;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod files;
pub mod live;
pub mod logging;
pub mod options;
pub mod recording;
pub mod replication;
pub mod results;
pub mod run;
pub mod sampling;
pub mod serve;
pub mod target;
pub mod verify;
