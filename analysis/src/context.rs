//! What a direction is judged on: the run, the analysed host and direction, its latency
//! breakdown and scored signals, and whether raised intervals or the whole run are judged.

use std::cell::OnceCell;

use crate::breakdown::{PartKind, PartShare, Parts};
use crate::layers::layers_of;
use crate::model::{Direction, Host, Run};
use crate::series::{all, at};
use crate::signals::{Signal, SignalKind, SignalScore};
use crate::thresholds::Thresholds;

/// Judging raised intervals against the rest, or a whole run that is slow throughout.
#[derive(Clone, Copy, Debug)]
pub enum Mode<'a> {
    Raised {
        raised: &'a [usize],
        others: &'a [usize],
    },
    Whole,
}

pub struct Context<'a> {
    pub run: &'a Run,
    pub subject: &'a Host,
    pub direction: Direction,
    pub t: &'a Thresholds,
    pub parts: &'a Parts,
    pub shares: &'a [PartShare],
    pub signals: &'a [Signal],
    pub scores: &'a [SignalScore],
    pub mode: Mode<'a>,
    /// How far the p99 of the raised intervals rose above the baseline (their median less
    /// the baseline); none when the run is judged as a whole.
    pub rise_seconds: Option<f64>,
    /// The layers the local IO's time goes to: found once, when first asked for.
    pub(crate) local_layers: OnceCell<Vec<String>>,
}

impl Context<'_> {
    /// The layers the local IO's time goes to ([`layers_of`] the local devices of the
    /// breakdown, over the judged intervals).
    pub fn local_layers(&self) -> &[String] {
        self.local_layers.get_or_init(|| {
            layers_of(
                self.subject,
                &self.parts.devices,
                self.direction.op(),
                &self.intervals(),
            )
        })
    }

    /// The judged intervals: the raised ones, or all of the run.
    pub fn intervals(&self) -> Vec<usize> {
        match self.mode {
            Mode::Raised { raised, .. } => raised.to_vec(),
            Mode::Whole => all(self.run.len()),
        }
    }

    /// The share of latency (rise) in a part, of one key when given.
    pub fn share(&self, kind: PartKind, key: Option<&str>) -> Option<f64> {
        self.shares
            .iter()
            .find(|s| s.part == kind && key.is_none_or(|k| s.key == k))
            .map(|s| s.share)
    }

    pub fn raised(&self) -> bool {
        matches!(self.mode, Mode::Raised { .. })
    }

    /// Seconds covered by the intervals where a series has data.
    pub fn seconds_with_data(&self, i: usize) -> f64 {
        let s = &self.signals[i].series;
        (0..s.len()).filter(|&k| at(s, k).is_some()).count() as f64 * self.run.interval_seconds
    }

    /// For retransmit signal `i`, the segments its host sent to the peer over the intervals
    /// the retransmits were counted in, when the agent counted them there.
    pub fn segments_sent(&self, i: usize) -> Option<f64> {
        let s = &self.signals[i];
        if s.kind != SignalKind::Retransmits {
            return None;
        }
        let delivered = &self
            .run
            .host(&s.host)?
            .peers
            .get(&s.key)?
            .delivered_segments;
        let sum: f64 = (0..s.series.len())
            .filter(|&k| at(&s.series, k).is_some())
            .filter_map(|k| at(delivered, k))
            .sum();
        (sum > 0.0).then_some(sum)
    }

    /// IOs of the analysed direction over the run, when IOPS were recorded.
    pub fn ios(&self) -> Option<f64> {
        let lat = self.subject.latency(self.direction)?;
        let sum: f64 = (0..self.run.len()).filter_map(|i| at(&lat.iops, i)).sum();
        (sum > 0.0).then_some(sum * self.run.interval_seconds)
    }
}
