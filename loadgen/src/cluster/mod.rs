//! Stress runs across a cluster: `loadgen run --client HOST …` is the controller; the job
//! service it talks to (`loadgen serve --jobs-listen`) is [`crate::serve::jobs`].
//!
//! - [`protocol`]: the job service's messages (one JSON object per line).
//! - [`args`]: the controller's command line split into each host's job.
//! - [`clock`]: each host's clock offset and round trip, from timed exchanges.
//! - [`gate`]: a host's job waiting for the instant every host starts at.
//! - [`controller`]: connect, check, start every host at one instant, collect, merge.
//! - [`merge`]: every host's results as one: histograms merged bin by bin, fio's
//!   client/server JSON, the text table, one run record.

pub mod args;
pub mod clock;
pub mod controller;
pub mod gate;
pub mod merge;
pub mod protocol;

/// The job service's port when `--client` names none.
pub const DEFAULT_PORT: u16 = 7481;
