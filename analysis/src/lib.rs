//! Correlation of storage latency with congestion signals, and root-cause ranking, as pure
//! functions over time series.
//!
//! The input ([`Run`]) holds aligned per-interval series for one or more hosts: storage
//! latency per direction with its breakdown (local device, time above the block layer,
//! block-layer queue and service time, each replica's round trip) and the signals of the
//! agent (retransmits, drops, qdiscs, interfaces, in-flight requests). [`analyze`] finds the
//! intervals where p99 latency is raised against the run's own baseline, or judges a run
//! that is slow throughout as a whole, and names the likely cause with evidence. The method
//! is described in `docs/analysis.md`.

pub mod baseline;
pub mod breakdown;
pub mod causes;
pub mod context;
pub mod correlation;
pub mod histogram;
pub mod layers;
pub mod model;
pub mod mtu;
pub mod prose;
pub mod render;
pub mod report;
pub mod series;
pub mod signals;
pub mod slots;
pub mod thresholds;
pub mod units;
pub mod verdict;

pub use histogram::BucketHistogram;
pub use model::{
    BlockOp, Device, Direction, Host, Interface, Latency, ModelError, Peer, Qdisc, Run, Series,
};
pub use report::{Candidate, Cause, DirectionResult, HostAnalysis, Report, State, Verdict};
pub use thresholds::Thresholds;

/// Analyses a run with the default thresholds.
pub fn analyze(run: &Run) -> Result<Report, ModelError> {
    analyze_with(run, &Thresholds::default())
}

/// Analyses a run. Fails only on input whose series do not line up with its timeline; too
/// few intervals give the verdict `insufficient_data`.
pub fn analyze_with(run: &Run, t: &Thresholds) -> Result<Report, ModelError> {
    run.validate()?;
    Ok(verdict::report(run, t))
}

impl Report {
    /// The report as text: verdict, evidence, then per host and direction.
    pub fn to_text(&self) -> String {
        render::render(self)
    }
}
