//! Replicated writes over the network, as hyperconverged storage does them: every write
//! also goes to one or more replicas, which write it to their own device and acknowledge.
//!
//! - [`protocol`]: the versioned wire format (`docs/replication-protocol.md`).
//! - [`decoder`]: the incremental, bounded decoder both sides read with.
//! - [`client`]: the client's connection state machine (sans IO) and a blocking driver.
//! - [`legs`]: `loadgen run --replica`: each job's connections driven on its io_uring.
//! - [`replicas`]: the `--replica` options, volume names, connecting, failure accounting.
//! - [`server`]: `loadgen serve`, the replica target.
//! - [`cli`]: the command-line arguments and entry points.

pub mod cli;
pub mod client;
pub mod decoder;
pub mod legs;
pub mod protocol;
pub mod replicas;
pub mod server;
