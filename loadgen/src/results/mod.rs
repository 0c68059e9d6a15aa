//! What a run measured and how it is reported: log-linear latency histograms, the
//! per-interval timeline, the run's results, and the text, fio JSON and terse reports, with
//! the output files they go to.

pub mod histogram;
pub mod latency_search;
pub mod live_verdict;
pub mod outfile;
pub mod report;
pub mod stats;
pub mod timeline;
