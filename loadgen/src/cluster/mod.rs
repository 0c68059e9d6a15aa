//! Stress runs across a cluster: `loadgen serve --jobs-listen` takes job orders from a
//! controller, `loadgen run --client HOST …` is the controller.
//!
//! - [`protocol`]: the job service's messages (one JSON object per line).
//! - [`args`]: the controller's command line split into each host's job.
//! - [`policy`]: what a job order may touch on a host (its `--dir`s and `--allow-device`s).
//! - [`confine`]: opening a job's targets beneath a served directory, following no link.
//! - [`clock`]: each host's clock offset and round trip, from timed exchanges.
//! - [`service`]: the host side: check a job, run it as a child process, report back.
//! - [`order`]: the checked job and its opened targets, as that child process gets them.
//! - [`controller`]: connect, check, start every host at one instant, collect, merge.
//! - [`merge`]: every host's results as one: histograms merged bin by bin, fio's
//!   client/server JSON, the text table, one run record.

pub mod args;
pub mod clock;
pub mod confine;
pub mod controller;
pub mod gate;
pub mod merge;
pub mod order;
pub mod policy;
pub mod protocol;
pub mod service;

/// The job service's port when `--client` names none.
pub const DEFAULT_PORT: u16 = 7481;
