//! stornet's diagnosis: everything that turns samples into a verdict above the pure
//! `analysis` crate, and the `stornet` command that prints it.
//!
//! Samples reach the analysis model (`analysis::Run`) three ways, and all three speak the
//! agent's metric names through one table:
//!
//! - [`signals`]: the metric-to-model table (which agent metric fills which part of a host),
//!   used by a load generator sampling agents during a run and by fleet mode alike;
//! - [`latency`]: a load generator's own latency, from a run record's timeline;
//! - [`fleet`]: the same signals read back from Prometheus with range queries ([`time`]
//!   parses the window).
//!
//! [`analyze`] judges a run record (the record reader) or the fleet, once or again every
//! step (`watch`), and prints the verdict as text or JSON; [`html`] renders the report page.
//! [`cli`] is the command line of `stornet analyze`, `watch` and `report`; [`console`] keeps
//! text from records and Prometheus plain on a terminal; [`error`] says how it fails.

pub mod analyze;
pub mod cli;
pub mod console;
pub mod error;
pub mod fleet;
pub mod html;
pub mod latency;
pub mod signals;
pub mod time;

pub use error::Failure;
