//! Counters of what the probes could not record, so a full map shows up in the agent's own
//! metrics instead of as silently missing data.

/// Index of each map in `MAP_UPDATE_FAILURES`; `MAP_NAMES[i]` is the map's name.
pub const MAP_BLOCK_COMPLETIONS: u32 = 0;
pub const MAP_NAMES: &[&str] = &["BLOCK_COMPLETIONS"];

/// Size of the per-CPU `MAP_UPDATE_FAILURES` array (room for more maps).
pub const MAX_COUNTED_MAPS: u32 = 32;

const _: () = assert!(MAP_NAMES.len() <= MAX_COUNTED_MAPS as usize);
