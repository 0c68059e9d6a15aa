//! How full the eBPF object's hash maps are (`stornet_agent_map_entries` and
//! `_max_entries`). Counting a map's entries means reading all of them, megabytes for the
//! per-CPU histograms, so this reader runs in the background (`collectors::background`),
//! not at each scrape.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use aya::maps::Map;
use tracing::debug;

use crate::kernel::map_batch::{Batch, value_bytes};
use crate::model::{Collector, MetricFamily};
use crate::probes::Probes;
use metric_names::labels::MAP;

/// A hash map of the eBPF object whose entries are counted.
struct WatchedMap {
    name: String,
    fd: OwnedFd,
    key_size: usize,
    /// Bytes of one key's value in a batch read (all CPUs' copies for per-CPU maps).
    value_bytes: usize,
    max_entries: u32,
}

pub struct MapFill {
    maps: Vec<WatchedMap>,
    /// The reads' buffers, kept from one read to the next.
    buffer: Mutex<Batch>,
}

impl MapFill {
    /// Call right after the probes are loaded, before collectors take maps out of the object.
    pub fn new(probes: &Probes) -> MapFill {
        MapFill {
            maps: probes
                .ebpf
                .as_ref()
                .map(|e| e.maps().filter_map(|(n, m)| watch(n, m)).collect())
                .unwrap_or_default(),
            buffer: Mutex::new(Batch::default()),
        }
    }
}

impl Collector for MapFill {
    fn name(&self) -> &'static str {
        crate::collectors::MAP_FILL
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
        let mut entries = MetricFamily::of(&metric_names::agent::MAP_ENTRIES);
        let mut max = MetricFamily::of(&metric_names::agent::MAP_MAX_ENTRIES);
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        for m in &self.maps {
            let read = buffer.read(
                m.fd.as_fd(),
                m.key_size,
                m.value_bytes,
                m.max_entries as usize,
                256,
            );
            match read {
                Ok(()) => {
                    entries.scalar(&[(MAP, &m.name)], buffer.len as f64);
                    max.scalar(&[(MAP, &m.name)], m.max_entries as f64);
                }
                Err(e) => debug!(map = %m.name, error = %e, "counting map entries failed"),
            }
        }
        out.extend([entries, max]);
        Ok(())
    }
}

/// Hash-type maps keep a copy of their fd so they can be counted after a collector took them.
fn watch(name: &str, map: &Map) -> Option<WatchedMap> {
    let (data, per_cpu) = match map {
        Map::HashMap(d) | Map::LruHashMap(d) => (d, false),
        Map::PerCpuHashMap(d) | Map::PerCpuLruHashMap(d) => (d, true),
        _ => return None,
    };
    let info = data.info().ok()?;
    Some(WatchedMap {
        name: name.to_string(),
        fd: data.fd().as_fd().try_clone_to_owned().ok()?,
        key_size: info.key_size() as usize,
        value_bytes: value_bytes(info.value_size() as usize, per_cpu).ok()?,
        max_entries: info.max_entries(),
    })
}
