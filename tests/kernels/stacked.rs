//! Stacked device-mapper devices on the guest's kernel: dm-linear over dm-delay (40 ms) over
//! a loop device, and dm-linear over null_blk (20 ms per request). Every layer's writes are
//! counted for its own device, equal to that device's sysfs counters; each device names the
//! one below as its parent; and the analysis, given the agent's series, places the time of
//! each stack in the layer that adds it: the delay target in the first, null_blk in the
//! second.

use std::path::Path;

use loadgen::sampling::agent_signals::{host, reading};
use loadgen::sampling::deltas::Deltas;
use stornet_lab::blockdev::{Counted, Disk, LoopDevice, direct_writes, settled_all};
use stornet_lab::dm::DmDevice;
use stornet_lab::metrics::{Sample, count};

const WRITES: u64 = 64;
const DELAY_MS: u32 = 40;

fn writes(s: &[Sample], device: &str) -> f64 {
    count(
        s,
        "stornet_block_io_size_bytes",
        &[("device", device), ("op", "write")],
    )
}

/// Mean write service time of a device between two scrapes.
fn mean_service(before: &[Sample], after: &[Sample], device: &str) -> f64 {
    let labels = [("device", device), ("op", "write")];
    let sum =
        |s: &[Sample]| stornet_lab::metrics::sum(s, "stornet_block_service_seconds_sum", &labels);
    let n = |s: &[Sample]| count(s, "stornet_block_service_seconds", &labels);
    (sum(after) - sum(before)) / (n(after) - n(before))
}

fn parents<'a>(s: &'a [Sample], device: &str) -> Vec<&'a str> {
    s.iter()
        .filter(|x| x.name == "stornet_block_device_info" && x.label("device") == Some(device))
        .filter_map(|x| x.label("parent"))
        .collect()
}

#[test]
fn dm_layers_are_counted_each_for_its_own_device() {
    let lo = LoopDevice::new("stacked", 32 << 20).expect("loop device");
    let delay = DmDevice::delay("delay", &lo.dev, DELAY_MS).expect("dm-delay");
    let top = DmDevice::linear("top", &delay.dev).expect("dm-linear over dm-delay");
    let null = Disk::existing("nullb0").expect("null_blk");
    let slow = DmDevice::linear("slow", Path::new("/dev/nullb0")).expect("dm-linear over null_blk");
    let layers: [&dyn Counted; 5] = [&top, &delay, &lo, &slow, &null];

    let agent = crate::shared::agent();
    let scrape = || agent.scrape();
    let (before, s0) = settled_all(&scrape, &layers);
    direct_writes(&top.dev, WRITES, 4096).expect("writes through the delayed stack");
    direct_writes(&slow.dev, WRITES, 4096).expect("writes through the slow stack");
    let (after, s1) = settled_all(&scrape, &layers);

    for (layer, (a, b)) in layers.iter().zip(s0.iter().zip(&s1)) {
        let name = layer.name();
        let counted = writes(&after, name) - writes(&before, name);
        let sys = b.write_ios - a.write_ios;
        eprintln!(
            "{name}: {counted} writes counted, sysfs {sys}; mean service {:.2} ms; parents {:?}",
            mean_service(&before, &after, name) * 1e3,
            parents(&after, name)
        );
        assert_eq!(counted, sys as f64, "writes counted on {name}");
    }
    for dm in [&top, &delay, &slow] {
        assert_eq!(
            writes(&after, &dm.name) - writes(&before, &dm.name),
            WRITES as f64,
            "every write is counted once on {}",
            dm.name
        );
    }
    assert_eq!(parents(&after, &top.name), [delay.name.as_str()]);
    assert_eq!(parents(&after, &delay.name), [lo.name.as_str()]);
    assert_eq!(parents(&after, &slow.name), ["nullb0"]);
    // dm-delay counts its delay in jiffies from the current one: a bio can leave up to a
    // jiffy (4 ms at HZ=250) early.
    let delayed = mean_service(&before, &after, &delay.name);
    assert!(
        delayed >= 0.75 * DELAY_MS as f64 / 1e3,
        "{}: a mean service of {delayed} s through a {DELAY_MS} ms delay",
        delay.name
    );

    // The analysis's model of this host, as loadgen fills it from two scrapes.
    let mut d = Deltas::new();
    d.push(Some(reading(&before)));
    d.push(Some(reading(&after)));
    let h = host("guest", Vec::new(), &d.finish(1), 1);
    let layer = |dev: &str| analysis::layers::delayed_layer(&h, dev, "write", &[0]);
    assert_eq!(
        layer(&top.name),
        delay.name,
        "the delay target adds the time"
    );
    assert_eq!(layer(&slow.name), "nullb0", "null_blk below takes the time");
    drop((top, slow));
    drop(delay);
}
