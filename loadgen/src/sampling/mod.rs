//! What loadgen reads beside its own IOs during a run: each stornet-agent's metrics
//! (`scrape`, folded into per-interval values by `deltas`, named by the diagnosis crate's
//! metric table, `diagnose::signals`) and the block devices' own counters (`diskstats`).

pub mod deltas;
pub mod diskstats;
pub mod scrape;
