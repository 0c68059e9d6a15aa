//! `stornet_skb_drops_total{reason}`, with reason names from the running kernel's
//! `enum skb_drop_reason` (numbering differs between kernels), and
//! `stornet_skb_drops_unspecified_total{function}`: where `not_specified` drops happen.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};

use agent_common::maps;
use agent_common::net::{
    COUNTER_UNSPECIFIED_OVERFLOW, DROP_REASON_SUBSYSTEM_SLOT, MAX_DROP_LOCATIONS, REASON_NONE_SLOT,
};
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};

use super::counters::Counters;
use crate::kernel::btf::Btf;
use crate::kernel::kallsyms::Symbols;
use crate::kernel::map_batch::{Batch, fd_of, per_cpu, read, value_bytes};
use crate::model::{Collector, MetricFamily};
use metric_names::labels::{FUNCTION, REASON};

const ENUM: &str = "skb_drop_reason";

/// The `reason` label of an enumerator: lower case, without `SKB_DROP_REASON_` (or `SKB_`).
pub fn reason_label(enumerator: &str) -> String {
    enumerator
        .strip_prefix("SKB_DROP_REASON_")
        .or_else(|| enumerator.strip_prefix("SKB_"))
        .unwrap_or(enumerator)
        .to_ascii_lowercase()
}

/// Reason names indexed by value, for the values the kernel's drop-reason array has slots for.
/// A kernel without `enum skb_drop_reason` (before 5.17) passes no reason: the probe counts
/// every drop in `REASON_NONE_SLOT`, named `not_specified`.
pub fn reason_names(btf: &Btf) -> Result<Vec<Option<String>>> {
    let mut names: Vec<Option<String>> = Vec::new();
    let Ok(values) = btf.enum_values(ENUM) else {
        names.resize(REASON_NONE_SLOT as usize + 1, None);
        names[REASON_NONE_SLOT as usize] = Some("not_specified".into());
        return Ok(names);
    };
    for (name, value) in values {
        // SKB_DROP_REASON_MAX is a bound, not a reason.
        if name == "SKB_DROP_REASON_MAX" || *value < 0 {
            continue;
        }
        let v = *value as usize;
        if v >= DROP_REASON_SUBSYSTEM_SLOT as usize {
            continue;
        }
        if names.len() <= v {
            names.resize(v + 1, None);
        }
        names[v].get_or_insert_with(|| reason_label(name));
    }
    Ok(names)
}

pub struct DropCollector {
    /// The reason slots the kernel names, read in one batch into a buffer kept between
    /// scrapes (one lookup per reason would take a system call each, over a hundred).
    reasons_fd: OwnedFd,
    reasons_batch: Mutex<Batch>,
    reasons: Mutex<PerCpuArray<MapData, u64>>,
    locations: Mutex<PerCpuHashMap<MapData, u64, u64>>,
    names: Vec<Option<String>>,
    symbols: Mutex<Symbols>,
    counters: Arc<Counters>,
}

impl DropCollector {
    pub fn new(
        reasons: aya::maps::Map,
        locations: aya::maps::Map,
        btf: &Btf,
        counters: Arc<Counters>,
    ) -> Result<DropCollector> {
        Ok(DropCollector {
            reasons_fd: fd_of(&reasons).context(maps::NET_DROP_REASONS)?,
            reasons_batch: Mutex::new(Batch::default()),
            reasons: Mutex::new(PerCpuArray::try_from(reasons).context(maps::NET_DROP_REASONS)?),
            locations: Mutex::new(
                PerCpuHashMap::try_from(locations).context(maps::NET_UNSPECIFIED_DROPS)?,
            ),
            names: reason_names(btf)?,
            symbols: Mutex::new(Symbols::default()),
            counters,
        })
    }

    fn reasons(&self) -> Result<Vec<(String, u64)>> {
        let mut counts: Vec<(u32, u64)> = Vec::new();
        {
            let mut batch = self.reasons_batch.lock().expect("drop reason buffer");
            batch
                .read(
                    self.reasons_fd.as_fd(),
                    std::mem::size_of::<u32>(),
                    value_bytes(std::mem::size_of::<u64>(), true)?,
                    self.names.len(),
                    self.names.len(),
                )
                .context(maps::NET_DROP_REASONS)?;
            for i in 0..batch.len {
                let slot: u32 = read(batch.key(i));
                if (slot as usize) < self.names.len() {
                    counts.push((slot, per_cpu::<u64>(batch.value(i)).sum()));
                }
            }
        }
        let subsystem = self
            .reasons
            .lock()
            .expect("drop reason map")
            .get(&DROP_REASON_SUBSYSTEM_SLOT, 0)?
            .iter()
            .sum();
        counts.push((DROP_REASON_SUBSYSTEM_SLOT, subsystem));
        let mut out = Vec::new();
        for (slot, n) in counts {
            if n == 0 {
                continue;
            }
            let name = match self.names.get(slot as usize) {
                Some(Some(name)) => name.clone(),
                // Reasons of subsystems (mac80211, openvswitch, …) carry their id in the
                // upper bits and live in their own enums.
                _ if slot == DROP_REASON_SUBSYSTEM_SLOT => "subsystem".into(),
                _ => format!("unknown_{slot}"),
            };
            out.push((name, n));
        }
        Ok(out)
    }

    fn unspecified(&self) -> Result<BTreeMap<String, u64>> {
        let mut per_location = Vec::new();
        {
            let map = self.locations.lock().expect("drop location map");
            for entry in map.iter() {
                let (loc, per_cpu) = entry?;
                per_location.push((loc, per_cpu.iter().sum::<u64>()));
            }
        }
        debug_assert!(per_location.len() <= MAX_DROP_LOCATIONS as usize);
        let addrs: Vec<u64> = per_location.iter().map(|(a, _)| *a).collect();
        let names = self.symbols.lock().expect("symbols").names(&addrs);
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (name, (_, n)) in names.into_iter().zip(per_location) {
            *out.entry(name).or_default() += n;
        }
        let overflow = self.counters.get(COUNTER_UNSPECIFIED_OVERFLOW)?;
        if overflow > 0 {
            *out.entry("other".into()).or_default() += overflow;
        }
        Ok(out)
    }
}

impl Collector for DropCollector {
    fn name(&self) -> &'static str {
        "skb_drops"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut f = MetricFamily::of(&metric_names::net::SKB_DROPS_TOTAL);
        for (reason, n) in self.reasons()? {
            f.scalar(&[(REASON, &reason)], n as f64);
        }
        out.push(f);
        let mut u = MetricFamily::of(&metric_names::net::SKB_DROPS_UNSPECIFIED_TOTAL);
        for (function, n) in self.unspecified()? {
            u.scalar(&[(FUNCTION, &function)], n as f64);
        }
        out.push(u);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::btf::testing::Builder;

    #[test]
    fn labels_drop_the_prefix_and_lower_the_case() {
        assert_eq!(reason_label("SKB_DROP_REASON_QDISC_DROP"), "qdisc_drop");
        assert_eq!(
            reason_label("SKB_DROP_REASON_NOT_SPECIFIED"),
            "not_specified"
        );
        assert_eq!(reason_label("SKB_CONSUMED"), "consumed");
    }

    /// Two kernels number the same reasons differently: names follow each kernel's BTF.
    #[test]
    fn names_come_from_the_kernels_own_numbering() {
        let blob = |values: &[(&str, i32)]| {
            let mut b = Builder::new();
            b.int("int", 4);
            b.enumeration(ENUM, values);
            Btf::parse(&b.build()).unwrap()
        };
        let this_kernel = blob(&[
            ("SKB_NOT_DROPPED_YET", 0),
            ("SKB_CONSUMED", 1),
            ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
            ("SKB_DROP_REASON_QDISC_DROP", 64),
            ("SKB_DROP_REASON_MAX", 128),
        ]);
        let older = blob(&[
            ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
            ("SKB_DROP_REASON_QDISC_DROP", 35),
            ("SKB_DROP_REASON_MAX", 60),
        ]);
        let a = reason_names(&this_kernel).unwrap();
        let b = reason_names(&older).unwrap();
        assert_eq!(a.len(), 65);
        assert_eq!(a[64].as_deref(), Some("qdisc_drop"));
        assert_eq!(a[2].as_deref(), Some("not_specified"));
        assert_eq!(a[1].as_deref(), Some("consumed"));
        assert_eq!(a[3], None);
        assert_eq!(b.len(), 36);
        assert_eq!(b[35].as_deref(), Some("qdisc_drop"));
        // No enum (before 5.17): every drop is counted in one slot, named not_specified.
        let none = reason_names(&blob(&[])).unwrap();
        assert_eq!(none.len(), REASON_NONE_SLOT as usize + 1);
        assert_eq!(
            none[REASON_NONE_SLOT as usize].as_deref(),
            Some("not_specified")
        );
    }
}
