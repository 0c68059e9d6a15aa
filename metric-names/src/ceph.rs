//! The metrics stornet reads from Ceph's mgr (its `prometheus` module), not the agent's own:
//! each OSD's op latencies (the application latency of a Ceph cluster), bluestore's commit
//! and key-value latencies (the OSD's own disk path), and the series that join an OSD to its
//! host, addresses and device. Checked against a live mgr of Debian 12's Ceph 16.2 (Pacific)
//! by a privileged test (`ceph_lab`): every entry with `exported` is in its `/metrics` with
//! these labels, and every entry without it is absent there: a documented gap, not a guess.

/// How a Ceph metric is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CephKind {
    /// A latency as `<name>_sum` (seconds) and `<name>_count` (ops) counters: the mean over
    /// an interval is the ratio of their increases. Ceph keeps no buckets for Prometheus.
    SumCount,
    /// A counter of ops or bytes.
    Counter,
    /// A value at scrape time.
    Gauge,
    /// Always 1; its labels carry the information (a join table).
    Info,
}

/// One metric of the mgr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CephMetric {
    pub name: &'static str,
    pub kind: CephKind,
    /// The labels stornet uses.
    pub labels: &'static [&'static str],
    /// What it measures, and what to know when reading it.
    pub what: &'static str,
    /// Whether Ceph 16.2's mgr exports it; `false` marks a gap.
    pub exported: bool,
}

const fn m(
    name: &'static str,
    kind: CephKind,
    labels: &'static [&'static str],
    what: &'static str,
) -> CephMetric {
    CephMetric {
        name,
        kind,
        labels,
        what,
        exported: true,
    }
}

const fn gap(name: &'static str, kind: CephKind, what: &'static str) -> CephMetric {
    CephMetric {
        name,
        kind,
        labels: &[],
        what,
        exported: false,
    }
}

/// The label naming the daemon (`osd.0`) on every per-daemon series.
pub const DAEMON: &str = "ceph_daemon";

use CephKind::{Counter, Gauge, Info, SumCount};

pub const OSD_OP_W_LATENCY: CephMetric = m(
    "ceph_osd_op_w_latency",
    SumCount,
    &[DAEMON],
    "Client writes at their primary OSD, from receipt to reply: includes the writes to the \
     replicas on other hosts (the network between the OSD hosts) and every replica's commit.",
);
pub const OSD_OP_R_LATENCY: CephMetric = m(
    "ceph_osd_op_r_latency",
    SumCount,
    &[DAEMON],
    "Client reads at their primary OSD, from receipt to reply.",
);
pub const OSD_OP_RW_LATENCY: CephMetric = m(
    "ceph_osd_op_rw_latency",
    SumCount,
    &[DAEMON],
    "Client read-modify-write ops at their primary OSD.",
);
pub const OSD_OP_LATENCY: CephMetric = m(
    "ceph_osd_op_latency",
    SumCount,
    &[DAEMON],
    "Every client op at its primary OSD.",
);
pub const OSD_OP_W_PROCESS_LATENCY: CephMetric = m(
    "ceph_osd_op_w_process_latency",
    SumCount,
    &[DAEMON],
    "The part of a client write from dequeue to reply (without its wait in the OSD's op \
     queue).",
);
pub const OSD_OP_R_PROCESS_LATENCY: CephMetric = m(
    "ceph_osd_op_r_process_latency",
    SumCount,
    &[DAEMON],
    "The part of a client read from dequeue to reply.",
);
pub const OSD_OP_W_PREPARE_LATENCY: CephMetric = m(
    "ceph_osd_op_w_prepare_latency",
    SumCount,
    &[DAEMON],
    "The part of a client write before it is submitted to the object store and replicas.",
);
pub const OSD_OP_W: CephMetric = m(
    "ceph_osd_op_w",
    Counter,
    &[DAEMON],
    "Client writes served as primary.",
);
pub const OSD_OP_R: CephMetric = m(
    "ceph_osd_op_r",
    Counter,
    &[DAEMON],
    "Client reads served as primary.",
);
pub const OSD_COMMIT_LATENCY_MS: CephMetric = m(
    "ceph_osd_commit_latency_ms",
    Gauge,
    &[DAEMON],
    "The OSD's recent commit latency as `ceph osd perf` shows it, milliseconds (a moving \
     figure the OSD reports to the mon, not a counter).",
);
pub const OSD_APPLY_LATENCY_MS: CephMetric = m(
    "ceph_osd_apply_latency_ms",
    Gauge,
    &[DAEMON],
    "The OSD's recent apply latency as `ceph osd perf` shows it, milliseconds (equal to the \
     commit latency on bluestore).",
);
pub const BLUESTORE_COMMIT_LAT: CephMetric = m(
    "ceph_bluestore_commit_lat",
    SumCount,
    &[DAEMON],
    "A bluestore transaction from submission to commit, on this OSD alone: its own disk \
     (data write and key-value sync), no network.",
);
pub const BLUESTORE_KV_SYNC_LAT: CephMetric = m(
    "ceph_bluestore_kv_sync_lat",
    SumCount,
    &[DAEMON],
    "Bluestore's key-value (RocksDB WAL) sync: a flush to the OSD's device.",
);
pub const BLUESTORE_KV_FLUSH_LAT: CephMetric = m(
    "ceph_bluestore_kv_flush_lat",
    SumCount,
    &[DAEMON],
    "Bluestore's flush of the device before a key-value sync.",
);
pub const BLUESTORE_KV_FINAL_LAT: CephMetric = m(
    "ceph_bluestore_kv_final_lat",
    SumCount,
    &[DAEMON],
    "Bluestore's completion of transactions after their key-value sync.",
);
pub const BLUESTORE_STATE_AIO_WAIT_LAT: CephMetric = m(
    "ceph_bluestore_state_aio_wait_lat",
    SumCount,
    &[DAEMON],
    "Bluestore's wait for its data writes to the device (aio) to complete.",
);
pub const BLUESTORE_SUBMIT_LAT: CephMetric = m(
    "ceph_bluestore_submit_lat",
    SumCount,
    &[DAEMON],
    "Bluestore's preparation of a transaction before its IO is submitted.",
);
pub const BLUESTORE_THROTTLE_LAT: CephMetric = m(
    "ceph_bluestore_throttle_lat",
    SumCount,
    &[DAEMON],
    "Transactions held by bluestore's own throttle (too many bytes or ops in flight).",
);
pub const OSD_METADATA: CephMetric = m(
    "ceph_osd_metadata",
    Info,
    &[
        DAEMON,
        "hostname",
        "public_addr",
        "cluster_addr",
        "back_iface",
        "front_iface",
        "device_class",
    ],
    "Joins an OSD to its host: `hostname`, and the addresses of its public (clients) and \
     cluster (replication) networks, which are the `peer` labels of the agents on the other \
     hosts. `back_iface` and `front_iface` are exported but empty in 16.2 (filled in later \
     releases): find the interface by the address.",
);
pub const DISK_OCCUPATION: CephMetric = m(
    "ceph_disk_occupation",
    Info,
    &[DAEMON, "device", "devices", "instance"],
    "Joins an OSD to its device: `device` is its path (`/dev/loop2`), `devices` the kernel \
     names (the agent's `device` label), `instance` the OSD's hostname (scrape with \
     `honor_labels: true`, or Prometheus overwrites it).",
);
pub const DISK_OCCUPATION_HUMAN: CephMetric = m(
    "ceph_disk_occupation_human",
    Info,
    &[DAEMON, "device", "instance"],
    "The same join with only the device path and hostname.",
);
pub const OSD_UP: CephMetric = m(
    "ceph_osd_up",
    Gauge,
    &[DAEMON],
    "1 while the mon counts the OSD up.",
);
pub const OSD_IN: CephMetric = m(
    "ceph_osd_in",
    Gauge,
    &[DAEMON],
    "1 while the OSD holds data (in the CRUSH map's weight).",
);
pub const HEALTH_STATUS: CephMetric = m(
    "ceph_health_status",
    Gauge,
    &[],
    "Ceph's own verdict: 0 HEALTH_OK, 1 HEALTH_WARN, 2 HEALTH_ERR.",
);
pub const HEALTHCHECK_SLOW_OPS: CephMetric = m(
    "ceph_healthcheck_slow_ops",
    Gauge,
    &[],
    "Ops older than `osd_op_complaint_time` (30 s by default): Ceph's own slowness signal.",
);

// Gaps: what an operator might look for and Ceph 16.2's mgr does not export.

pub const OSD_OP_W_LATENCY_BUCKETS: CephMetric = gap(
    "ceph_osd_op_w_latency_bucket",
    SumCount,
    "No latency distribution: the OSD keeps histograms (`op_w_latency_in_bytes_histogram` in \
     `perf dump`), the mgr exports only sum and count, so percentiles cannot be had.",
);
pub const OSD_SUBOP_W_LATENCY: CephMetric = gap(
    "ceph_osd_subop_w_latency",
    SumCount,
    "No replica-side write latency: the OSD counts it (`subop_w_latency` in `perf dump`) \
     below the mgr's export priority, so a slow replica shows only in its primaries' \
     `op_w_latency`.",
);
pub const OSD_HEARTBEAT_PING: CephMetric = gap(
    "ceph_osd_heartbeat_ping_ms",
    Gauge,
    "No network latency between OSDs: heartbeat ping times are only in the admin socket's \
     `dump_osd_network`.",
);

/// Every metric, exported ones first.
pub const ALL: &[CephMetric] = &[
    OSD_OP_W_LATENCY,
    OSD_OP_R_LATENCY,
    OSD_OP_RW_LATENCY,
    OSD_OP_LATENCY,
    OSD_OP_W_PROCESS_LATENCY,
    OSD_OP_R_PROCESS_LATENCY,
    OSD_OP_W_PREPARE_LATENCY,
    OSD_OP_W,
    OSD_OP_R,
    OSD_COMMIT_LATENCY_MS,
    OSD_APPLY_LATENCY_MS,
    BLUESTORE_COMMIT_LAT,
    BLUESTORE_KV_SYNC_LAT,
    BLUESTORE_KV_FLUSH_LAT,
    BLUESTORE_KV_FINAL_LAT,
    BLUESTORE_STATE_AIO_WAIT_LAT,
    BLUESTORE_SUBMIT_LAT,
    BLUESTORE_THROTTLE_LAT,
    OSD_METADATA,
    DISK_OCCUPATION,
    DISK_OCCUPATION_HUMAN,
    OSD_UP,
    OSD_IN,
    HEALTH_STATUS,
    HEALTHCHECK_SLOW_OPS,
    OSD_OP_W_LATENCY_BUCKETS,
    OSD_SUBOP_W_LATENCY,
    OSD_HEARTBEAT_PING,
];

impl CephMetric {
    /// The suffixes of its series names: `_sum` and `_count` for a latency, none otherwise.
    pub fn suffixes(&self) -> &'static [&'static str] {
        match self.kind {
            SumCount => &["_sum", "_count"],
            _ => &[""],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_per_daemon_series_name_their_daemon() {
        for (i, a) in ALL.iter().enumerate() {
            assert!(a.name.starts_with("ceph_"), "{}", a.name);
            assert!(a.what.ends_with('.'), "{}", a.name);
            assert!(
                !ALL[..i].iter().any(|b| b.name == a.name),
                "{} twice",
                a.name
            );
            let per_daemon = a.name.starts_with("ceph_osd_")
                || a.name.starts_with("ceph_bluestore_")
                || a.name.starts_with("ceph_disk_");
            if a.exported && per_daemon {
                assert!(a.labels.contains(&DAEMON), "{}", a.name);
            }
        }
    }
}
