//! loadgen: an io_uring storage load generator with fio's options, open-loop latency,
//! mergeable histograms, a per-interval timeline, and data-safety checks.

pub mod agent_signals;
pub mod analyze;
pub mod clock;
pub mod console;
pub mod cpu;
pub mod diskstats;
pub mod engine;
pub mod error;
pub mod files;
pub mod histogram;
pub mod jobfile;
pub mod live_metrics;
pub mod logging;
pub mod options;
pub mod outfile;
pub mod profiles;
pub mod progress;
pub mod record;
pub mod replication;
pub mod report;
pub mod run;
pub mod safety;
pub mod scrape;
pub mod stats;
pub mod target;
pub mod timeline;
pub mod verify;
