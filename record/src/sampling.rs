//! How the agents were sampled during a run: per agent and sweep point, the samples taken in
//! time and those missed.

use serde::{Deserialize, Serialize};

/// How one agent's sampling of one point went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleStatus {
    /// Boundaries scraped in time / missed.
    pub samples: usize,
    pub missing: usize,
    /// Largest delay between a boundary and the end of its scrape, in seconds.
    pub max_delay_seconds: f64,
    /// The first few problems, e.g. "at 3.0 s: cannot connect to …".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}
