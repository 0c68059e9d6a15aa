//! Every threshold the analysis uses, in one place (docs/analysis.md explains each).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// Intervals with a p99 value a direction needs before it is analysed.
    pub min_intervals: usize,
    /// Paired points a rank correlation needs.
    pub min_correlation_points: usize,
    /// Lags tried on either side when correlating a signal with latency.
    pub max_lag: usize,
    /// Raised: p99 above baseline + this many robust standard deviations...
    pub mad_factor: f64,
    /// ...and at least this relative rise over the baseline (1.0 = twice the baseline).
    pub min_relative_rise: f64,
    /// Fewer raised intervals than this is noise: the run is judged as a whole. Two was too
    /// few: a two-interval transient of a busy host's local device outscored a replica that
    /// an MTU mismatch had cut off.
    pub min_raised_intervals: usize,
    /// A raised interval needs at least this many IOs above the threshold (where its
    /// histogram is known).
    pub min_slow_ios: u64,
    /// A signal rose when its mean in the raised intervals exceeds this multiple of its
    /// mean in the others.
    pub rise_factor: f64,
    /// A signal that did not rise in the raised intervals themselves rose with them when
    /// it did at its best lag with at least this rank correlation: a cause that leads its
    /// effect by a sampling interval (retransmits before a Ceph daemon's op latency moves).
    /// A weak correlation at a lag is chance, not a lead.
    pub lagged_rise_correlation: f64,
    /// A round trip that rose speaks for the latency's rise in proportion, up to fully when
    /// it rose by at least this share of it: a write waits a few round trips, not hundreds,
    /// so a path whose RTT went from 1 to 2 ms does not explain a p99 that went from 20 to
    /// 400 ms (every path's RTT grows a little when the whole cluster queues).
    pub rtt_rise_share: f64,
    /// An RTT that rose by less than this share of the p99's rise does not meet a network
    /// cause by itself: on a busy host every path's RTT rises by a millisecond or two
    /// while a starved replica's writes take a hundred more.
    pub min_rtt_rise_share: f64,
    /// A counter rose only with at least this many events in the raised intervals.
    pub min_events: f64,
    /// In-flight requests at or above this fraction of the queue limit are "at the limit".
    pub inflight_at_limit: f64,
    /// An interval is also at the limit when its time-averaged in-flight (completed IOs ×
    /// their mean service time / interval, Little's law) reaches this fraction of the limit:
    /// a point sample can miss a queue that fills and drains in bursts.
    pub mean_inflight_at_limit: f64,
    /// The device is saturated when at the limit in at least this fraction of intervals.
    pub at_limit_fraction: f64,
    /// The application's IO slots are all busy at this share in use: time its IOs wait
    /// before submission then belongs to the IOs in flight.
    pub slots_full: f64,
    /// A direction waits for slots the other direction holds when, on average, at least
    /// this share of the slots is in use: an average over an interval, so slots that fill
    /// in bursts (a replica's retransmit timeouts) show as busy, not full.
    pub slots_busy: f64,
    /// Whole-run judgement: a part counts when it holds at least this share of latency.
    pub min_share: f64,
    /// Raised intervals: a place (a path, a device) holding less of the rise than this,
    /// where the breakdown knows, is not where the latency went, whatever rose there.
    pub min_rise_share: f64,
    /// Whole-run judgement: a counter is anomalous with at least this many events...
    pub anomaly_min_events: f64,
    /// ...and at least this many per second.
    pub anomaly_events_per_second: f64,
    /// Whole-run judgement: retransmits and drops anomalous at this many per IO of the
    /// direction (when IOPS are known).
    pub events_per_io: f64,
    /// Whole-run judgement: retransmits anomalous at this share of the segments sent to the
    /// peer, when the agent counted them (instead of `events_per_io`): a healthy path
    /// resends hundredths of a percent, a buffer that drops bursts whole percents.
    pub retransmits_per_segment: f64,
    /// A standing qdisc queue: mean backlog at least this many bytes.
    pub backlog_bytes: f64,
    /// A slow device: mean service time at least this long.
    pub slow_service_seconds: f64,
    /// Time above the block layer is anomalous at this mean per IO...
    pub above_block_seconds: f64,
    /// ...when it is at least this share of the local device time.
    pub above_block_fraction: f64,
    /// Queueing in the block layer is anomalous at this mean per IO.
    pub queue_seconds: f64,
    /// A host's CPU is starved when some task waited for one this share of the raised
    /// intervals (its rise ties it to the latency's)...
    pub cpu_stalled: f64,
    /// ...or this share of a whole run judged at once, where nothing else ties them: a
    /// busy machine with room to serve its IO waits for a CPU a third of the time.
    pub cpu_stalled_run: f64,
    /// On a host whose CPU is contended (`cpu_stalled`), device time per IO up to this long
    /// can be its tasks waiting for a CPU rather than a slow device: time above the block
    /// layer (the submitting task's) and a loop device's service time (its worker thread's).
    pub cpu_wait_seconds: f64,
    /// MSS plus this many bytes below the interface MTU means a smaller path MTU.
    pub mss_overhead_bytes: f64,
    /// A saturated path: the round trip per IO to a peer is at least this multiple of the
    /// path's RTT plus the replica's own time per IO...
    pub saturation_round_trip_factor: f64,
    /// ...and exceeds them by at least this long...
    pub saturation_wait_seconds: f64,
    /// ...and the data waiting in the send queue, at the rate it is delivered, accounts for
    /// this share of that excess, or a shaper or link on the path carries
    /// `saturation_link_use` of its rate, or `min_events` pause frames were counted.
    pub saturation_queue_share: f64,
    pub saturation_link_use: f64,
    /// A send queue does not count toward saturation when the connections waited for the
    /// receiver's window at least this share of the time: the receiver reads too slowly,
    /// and the data waits for it, not for the path.
    pub saturation_rwnd_share: f64,
    /// A cause whose requirement is not met keeps this fraction of its score.
    pub unconfirmed_factor: f64,
    /// Raised intervals whose best cause scores below this are left unexplained.
    pub min_cause_score: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_intervals: 8,
            min_correlation_points: 8,
            max_lag: 2,
            mad_factor: 5.0,
            min_relative_rise: 1.0,
            min_raised_intervals: 3,
            min_slow_ios: 3,
            rise_factor: 1.2,
            lagged_rise_correlation: 0.6,
            rtt_rise_share: 0.1,
            min_rtt_rise_share: 0.05,
            min_events: 5.0,
            inflight_at_limit: 0.9,
            mean_inflight_at_limit: 0.75,
            at_limit_fraction: 0.5,
            slots_full: 0.9,
            slots_busy: 0.5,
            min_share: 0.2,
            min_rise_share: 0.05,
            anomaly_min_events: 10.0,
            anomaly_events_per_second: 1.0,
            events_per_io: 0.01,
            retransmits_per_segment: 0.002,
            backlog_bytes: 65536.0,
            slow_service_seconds: 0.020,
            above_block_seconds: 0.001,
            above_block_fraction: 0.5,
            cpu_stalled: 0.2,
            cpu_stalled_run: 0.5,
            cpu_wait_seconds: 0.005,
            queue_seconds: 0.001,
            mss_overhead_bytes: 100.0,
            saturation_round_trip_factor: 4.0,
            saturation_wait_seconds: 0.010,
            saturation_queue_share: 0.5,
            saturation_link_use: 0.9,
            saturation_rwnd_share: 0.5,
            unconfirmed_factor: 0.3,
            min_cause_score: 0.15,
        }
    }
}
