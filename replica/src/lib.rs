//! Replicated writes over the network, as hyperconverged storage does them: every write
//! also goes to one or more replicas, which write it to their own device and acknowledge.
//! This crate is the protocol alone; loadgen drives it during runs and serves it.
//!
//! - [`protocol`]: the versioned wire format (`docs/replication-protocol.md`).
//! - [`decoder`]: the incremental, bounded decoder both sides read with.
//! - [`client`]: the client's connection state machine (sans IO) and a blocking driver.
//! - [`server`]: the replica target that `loadgen serve` runs.

pub mod client;
pub mod decoder;
pub mod protocol;
pub mod server;
