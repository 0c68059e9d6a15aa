//! Replicated writes during a run, and the replica side: the protocol itself is the
//! `replica` crate.
//!
//! - [`legs`]: `loadgen run --replica`: each job's connections driven on its io_uring.
//! - [`health`]: failures per replica, and the error a job fails with.
//! - [`replicas`]: the `--replica` options, volume names, connecting, failure accounting.
//! - [`client`]: `loadgen replica-client`, a plain client of one replica (the replica
//!   server is `loadgen serve`'s: [`crate::serve`]).

pub mod client;
pub mod health;
pub mod legs;
pub mod replicas;
