//! What loadgen reads beside its own IOs during a run: each stornet-agent's metrics
//! (`scrape`, folded into per-interval values by `deltas`, named in `agent_signals`) and
//! the block devices' own counters (`diskstats`).

pub mod agent_signals;
pub mod deltas;
pub mod diskstats;
pub mod scrape;
