//! What the analysis concludes: the causes it can name, the candidates it weighed, and the
//! verdicts per direction, host and run.

use serde::{Deserialize, Serialize};

use crate::baseline::Baseline;
use crate::breakdown::PartShare;
use crate::model::Direction;
use crate::signals::SignalScore;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    NetworkCongestion,
    /// A path at its capacity, or paused: IO waits in the queues, nothing is dropped.
    NetworkSaturation,
    DeviceSaturation,
    SlowDevice,
    MtuMismatch,
    /// Packets lost on a path with no full queue behind the loss.
    PacketLoss,
    /// A host's CPU starved: tasks waited for a CPU much of the time.
    Cpu,
    /// Healthy: no raised intervals and no anomalous signal.
    None,
    /// Latency rose but no measured part or signal explains it.
    Unexplained,
    /// Too few intervals to analyse.
    InsufficientData,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::NetworkCongestion => "network_congestion",
            Cause::NetworkSaturation => "network_saturation",
            Cause::DeviceSaturation => "device_saturation",
            Cause::SlowDevice => "slow_device",
            Cause::MtuMismatch => "mtu_mismatch",
            Cause::PacketLoss => "packet_loss",
            Cause::Cpu => "cpu",
            Cause::None => "none",
            Cause::Unexplained => "unexplained",
            Cause::InsufficientData => "insufficient_data",
        }
    }

    /// A named root cause (not a healthy, unexplained or empty result).
    pub fn is_root_cause(self) -> bool {
        matches!(
            self,
            Cause::NetworkCongestion
                | Cause::NetworkSaturation
                | Cause::DeviceSaturation
                | Cause::SlowDevice
                | Cause::MtuMismatch
                | Cause::PacketLoss
                | Cause::Cpu
        )
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One candidate cause at one place, with its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub cause: Cause,
    /// Where it acts: "path to replica 198.18.0.2", "device loop3 on h1".
    pub location: String,
    /// The replica it holds up: the one at the end of the path, or the one whose device
    /// it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// 0..=1.
    pub score: f64,
    /// Share of the latency rise (raised) or of the latency (whole run) in that place.
    pub share: Option<f64>,
    /// Raised: best weighted rank correlation of its signals; whole run: anomaly strength.
    pub association: Option<f64>,
    /// The cause's defining condition (docs/analysis.md) holds.
    pub requirement_met: bool,
    /// Sentences with the numbers behind it.
    pub findings: Vec<String>,
}

/// How a direction was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Fewer intervals than the analysis needs.
    InsufficientData,
    /// No raised intervals: the run is judged as a whole.
    Steady,
    /// Raised intervals judged against the others.
    Raised,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub cause: Cause,
    /// 0..=1; `confidence_explained` says how it was reached.
    pub confidence: f64,
    pub confidence_explained: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Where the cause acts ("path to replica 198.18.0.2").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectionResult {
    pub direction: Direction,
    pub state: State,
    /// Intervals with a p99 value.
    pub intervals: usize,
    pub baseline: Option<Baseline>,
    pub raised_intervals: Vec<usize>,
    /// p99 of the raised intervals (raised) or of the run (steady), from merged histograms
    /// when recorded, else the median of the intervals' p99.
    pub p99_seconds: Option<f64>,
    pub breakdown: Vec<PartShare>,
    pub candidates: Vec<Candidate>,
    pub signals: Vec<SignalScore>,
    pub cause: Cause,
    pub confidence: f64,
    pub confidence_explained: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub evidence: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostAnalysis {
    pub host: String,
    pub verdict: Verdict,
    pub directions: Vec<DirectionResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub verdict: Verdict,
    pub hosts: Vec<HostAnalysis>,
}
