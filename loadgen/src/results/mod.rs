//! What a run measured and how it is reported: the per-interval timeline as the jobs hand it
//! over, and the text, fio JSON and terse reports, with the output files they go to. The
//! results themselves (histograms, per-job and per-point statistics) are the run record's
//! data, from the `record` crate.

pub use record::{histogram, latency_search, live_verdict, stats, steadystate};

pub mod given;
pub mod outfile;
pub mod report;
pub mod timeline;
