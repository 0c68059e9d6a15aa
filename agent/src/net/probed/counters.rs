//! The kernel's per-CPU counter array (`NET_COUNTERS`): map-full counts and socket pressure.

use std::sync::{Arc, Mutex};

use agent_common::maps;
use agent_common::net::{
    COUNTER_CGROUP_RETRANS_OVERFLOW, COUNTER_EXCEED_OTHER, COUNTER_EXCEED_RECV,
    COUNTER_EXCEED_SEND, COUNTER_RCVQUEUE_FULL, COUNTER_RETRANS_OVERFLOW,
    COUNTER_UNSPECIFIED_OVERFLOW,
};
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuArray};

use crate::model::{Collector, MetricFamily};
use metric_names::labels::{DIRECTION, MAP};

pub struct Counters(Mutex<PerCpuArray<MapData, u64>>);

impl Counters {
    pub fn new(map: aya::maps::Map) -> Result<Counters> {
        Ok(Counters(Mutex::new(
            PerCpuArray::try_from(map).context(maps::NET_COUNTERS)?,
        )))
    }

    /// One slot, summed over CPUs.
    pub fn get(&self, slot: u32) -> Result<u64> {
        let map = self.0.lock().expect("counter map");
        Ok(map.get(&slot, 0)?.iter().sum())
    }
}

/// Socket buffer pressure, and what kernel maps could not record.
pub struct PressureCollector {
    pub counters: Arc<Counters>,
    pub exceed_up: bool,
    pub rcvqueue_up: bool,
}

impl Collector for PressureCollector {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let c = &self.counters;
        if self.exceed_up {
            let mut f = MetricFamily::of(&metric_names::net::SOCK_BUFFER_LIMIT_EXCEEDED_TOTAL);
            for (dir, slot) in [
                ("send", COUNTER_EXCEED_SEND),
                ("receive", COUNTER_EXCEED_RECV),
                ("other", COUNTER_EXCEED_OTHER),
            ] {
                f.scalar(&[(DIRECTION, dir)], c.get(slot)? as f64);
            }
            out.push(f);
        }
        if self.rcvqueue_up {
            let mut f = MetricFamily::of(&metric_names::net::SOCK_RECEIVE_QUEUE_FULL_TOTAL);
            f.scalar(&[], c.get(COUNTER_RCVQUEUE_FULL)? as f64);
            out.push(f);
        }
        let mut full = MetricFamily::of(&metric_names::net::MAP_FULL_TOTAL);
        full.scalar(
            &[(MAP, "tcp_retransmits")],
            c.get(COUNTER_RETRANS_OVERFLOW)? as f64,
        );
        full.scalar(
            &[(MAP, "tcp_cgroup_retransmits")],
            c.get(COUNTER_CGROUP_RETRANS_OVERFLOW)? as f64,
        );
        full.scalar(
            &[(MAP, "skb_drops_unspecified")],
            c.get(COUNTER_UNSPECIFIED_OVERFLOW)? as f64,
        );
        out.push(full);
        Ok(())
    }
}
