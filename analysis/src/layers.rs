//! Stacked devices: which layer of a stack its IO's time goes to.
//!
//! A bio-based device (dm, md) is timed per bio from entering it to completing, so its time
//! per IO holds the time of every layer below it. The layer the time goes to is found by
//! walking down from the device the IO was sent to: while a device below it (a `parent` in
//! `stornet_block_device_info`) takes at least [`BELOW_FRACTION`] of its time per IO, the
//! time is that device's; the walk stops at the first layer that adds most of the time
//! itself (a dm-delay target, a crypt layer short of CPU) or at the bottom device.

use std::collections::BTreeSet;

use crate::model::{BlockOp, Host};
use crate::series::at;

/// The share of a device's time per IO that a device below it must take for the time to be
/// placed below.
pub const BELOW_FRACTION: f64 = 0.5;

/// The layer that the time per IO of `device` goes to (for `op`, over `intervals`): the
/// device itself, or one below it. Devices without time of their own for `op` end the walk.
pub fn delayed_layer(host: &Host, device: &str, op: &str, intervals: &[usize]) -> String {
    let mut at_layer = device.to_string();
    let mut seen = BTreeSet::from([at_layer.clone()]);
    while let Some(time) = time_per_io(host, &at_layer, op, intervals) {
        let below = host
            .devices
            .get(&at_layer)
            .into_iter()
            .flat_map(|d| d.parents.iter())
            .filter(|p| !seen.contains(*p))
            .filter_map(|p| Some((time_per_io(host, p, op, intervals)?, p)))
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(a.1)));
        match below {
            Some((t, p)) if time > 0.0 && t >= BELOW_FRACTION * time => {
                at_layer = p.clone();
                seen.insert(at_layer.clone());
            }
            _ => break,
        }
    }
    at_layer
}

/// The layers the time per IO of each of `devices` goes to ([`delayed_layer`]), each once.
pub fn layers_of(host: &Host, devices: &[String], op: &str, intervals: &[usize]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in devices {
        let layer = delayed_layer(host, d, op, intervals);
        if !out.contains(&layer) {
            out.push(layer);
        }
    }
    out
}

/// `devices` and every device below them (their parents, and theirs), each once: the
/// layers [`delayed_layer`] may place their time on.
pub fn with_layers_below(host: &Host, devices: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in devices {
        if !out.contains(d) {
            out.push(d.clone());
        }
    }
    let mut i = 0;
    while i < out.len() {
        for p in host
            .devices
            .get(&out[i])
            .into_iter()
            .flat_map(|d| &d.parents)
        {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        i += 1;
    }
    out
}

/// Mean time per IO of a device and op (queue and service) over `intervals`, weighted by
/// the IOs of each interval.
pub fn time_per_io(host: &Host, device: &str, op: &str, intervals: &[usize]) -> Option<f64> {
    let o: &BlockOp = host.devices.get(device)?.ops.get(op)?;
    let (mut sum, mut ios) = (0.0, 0.0);
    for &i in intervals {
        let (Some(s), Some(n)) = (at(&o.service_seconds, i), at(&o.ios, i)) else {
            continue;
        };
        if n <= 0.0 {
            continue;
        }
        sum += (s + at(&o.queue_seconds, i).unwrap_or(0.0)) * n;
        ios += n;
    }
    (ios > 0.0).then(|| sum / ios)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Device;

    /// A device whose writes took `seconds` each (service, and `queue` before it), 100 per
    /// interval for 3 intervals, sitting on `parents`.
    fn device(h: &mut Host, name: &str, queue: f64, seconds: f64, parents: &[&str]) {
        let op = BlockOp {
            ios: vec![Some(100.0); 3],
            queue_seconds: if queue > 0.0 {
                vec![Some(queue); 3]
            } else {
                Vec::new()
            },
            service_seconds: vec![Some(seconds); 3],
            errors: Vec::new(),
        };
        let d = Device {
            ops: [("write".to_string(), op)].into(),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            ..Device::default()
        };
        h.devices.insert(name.into(), d);
    }

    const ALL: &[usize] = &[0, 1, 2];

    #[test]
    fn a_delay_target_is_the_layer_when_the_devices_below_are_fast() {
        let mut h = Host::default();
        device(&mut h, "dm-1", 0.0, 0.0305, &["dm-0"]);
        device(&mut h, "dm-0", 0.0, 0.0302, &["loop0"]);
        device(&mut h, "loop0", 0.0001, 0.0002, &[]);
        // dm-1 (linear) passes its time down to dm-0 (delay), which adds it.
        assert_eq!(delayed_layer(&h, "dm-1", "write", ALL), "dm-0");
        assert_eq!(delayed_layer(&h, "dm-0", "write", ALL), "dm-0");
    }

    #[test]
    fn a_slow_bottom_device_takes_the_time_of_the_layers_above() {
        let mut h = Host::default();
        device(&mut h, "dm-2", 0.0, 0.0210, &["nullb0"]);
        // Its queue time counts too: a saturated device below is where the time goes.
        device(&mut h, "nullb0", 0.0090, 0.0110, &[]);
        assert_eq!(delayed_layer(&h, "dm-2", "write", ALL), "nullb0");
    }

    #[test]
    fn the_slowest_of_several_devices_below_is_followed() {
        let mut h = Host::default();
        device(&mut h, "md0", 0.0, 0.020, &["sda", "sdb"]);
        device(&mut h, "sda", 0.0, 0.001, &[]);
        device(&mut h, "sdb", 0.0, 0.019, &[]);
        assert_eq!(delayed_layer(&h, "md0", "write", ALL), "sdb");
    }

    #[test]
    fn without_series_below_or_above_the_device_is_its_own_layer() {
        let mut h = Host::default();
        // A parent with no series (not reported, other op) ends the walk.
        device(&mut h, "dm-0", 0.0, 0.020, &["sdz"]);
        assert_eq!(delayed_layer(&h, "dm-0", "write", ALL), "dm-0");
        assert_eq!(delayed_layer(&h, "dm-0", "read", ALL), "dm-0");
        assert_eq!(delayed_layer(&h, "nope", "write", ALL), "nope");
        assert_eq!(time_per_io(&h, "dm-0", "write", &[]), None);
        // A cycle in the reported parents cannot loop.
        device(&mut h, "a", 0.0, 0.02, &["b"]);
        device(&mut h, "b", 0.0, 0.02, &["a"]);
        assert_eq!(delayed_layer(&h, "a", "write", ALL), "b");
    }

    #[test]
    fn a_stack_lists_every_device_below_once() {
        let mut h = Host::default();
        // dm-3 on md0 on two members, and a cycle back to the top.
        device(&mut h, "dm-3", 0.0, 0.02, &["md0"]);
        device(&mut h, "md0", 0.0, 0.02, &["sda", "sdb"]);
        device(&mut h, "sda", 0.0, 0.02, &["dm-3"]);
        device(&mut h, "sdb", 0.0, 0.02, &[]);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            with_layers_below(&h, &names(&["dm-3", "sdb"])),
            names(&["dm-3", "sdb", "md0", "sda"])
        );
        // A device the host does not report is listed, with nothing below it.
        assert_eq!(with_layers_below(&h, &names(&["nope"])), names(&["nope"]));
    }
}
