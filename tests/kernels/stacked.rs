//! Stacked device-mapper devices on the guest's kernel: dm-linear over dm-delay (40 ms) over
//! a loop device, dm-linear over null_blk (20 ms per request), and dm-crypt over a second
//! loop device (its writes are encrypted by the kernel's workers); and an md RAID0 over two
//! loop devices, which splits its writes between them; and a dm-multipath device (request-based)
//! over two loop devices on one file, two paths to the same storage. Every layer's writes are
//! counted for its own device, equal to that device's sysfs counters; each device names the
//! one below as its parent; and the analysis, given the agent's series, places the time of
//! each stack in the layer that adds it: the delay target in the first, null_blk in the
//! second.

use std::path::Path;

use crate::shared::{device_info, layer_writes, model, parents, writes};
use stornet_lab::blockdev::{Counted, Disk, LoopDevice, direct_writes, settled_all};
use stornet_lab::dm::DmDevice;
use stornet_lab::md::MdArray;
use stornet_lab::metrics::{Sample, count};

const WRITES: u64 = 64;
const DELAY_MS: u32 = 40;

/// Mean write service time of a device between two scrapes.
fn mean_service(before: &[Sample], after: &[Sample], device: &str) -> f64 {
    let labels = [("device", device), ("op", "write")];
    let sum =
        |s: &[Sample]| stornet_lab::metrics::sum(s, "stornet_block_service_seconds_sum", &labels);
    let n = |s: &[Sample]| count(s, "stornet_block_service_seconds", &labels);
    (sum(after) - sum(before)) / (n(after) - n(before))
}

#[test]
fn dm_layers_are_counted_each_for_its_own_device() {
    let lo = LoopDevice::new("stacked", 32 << 20).expect("loop device");
    let delay = DmDevice::delay("delay", &lo.dev, DELAY_MS).expect("dm-delay");
    let top = DmDevice::linear("top", &delay.dev).expect("dm-linear over dm-delay");
    let null = Disk::existing("nullb0").expect("null_blk");
    let slow = DmDevice::linear("slow", Path::new("/dev/nullb0")).expect("dm-linear over null_blk");
    let lo2 = LoopDevice::new("crypted", 32 << 20).expect("loop device");
    let crypt = DmDevice::crypt("crypt", &lo2.dev).expect("dm-crypt");
    let layers: [&dyn Counted; 7] = [&top, &delay, &lo, &slow, &null, &crypt, &lo2];

    let agent = crate::shared::agent();
    let scrape = || agent.scrape();
    let (before, s0) = settled_all(&scrape, &layers);
    direct_writes(&top.dev, WRITES, 4096).expect("writes through the delayed stack");
    direct_writes(&slow.dev, WRITES, 4096).expect("writes through the slow stack");
    direct_writes(&crypt.dev, WRITES, 4096).expect("writes through dm-crypt");
    let (after, s1) = settled_all(&scrape, &layers);

    for (name, counted, sys) in layer_writes(&layers, (&before, &s0), (&after, &s1)) {
        eprintln!(
            "{name}: mean write service {:.2} ms",
            mean_service(&before, &after, &name) * 1e3
        );
        assert_eq!(counted, sys as f64, "writes counted on {name}");
    }
    for dm in [&top, &delay, &slow, &crypt] {
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
    assert_eq!(parents(&after, &crypt.name), [lo2.name.as_str()]);
    // dm-delay counts its delay in jiffies from the current one: a bio can leave up to a
    // jiffy (4 ms at HZ=250) early.
    let delayed = mean_service(&before, &after, &delay.name);
    assert!(
        delayed >= 0.75 * DELAY_MS as f64 / 1e3,
        "{}: a mean service of {delayed} s through a {DELAY_MS} ms delay",
        delay.name
    );

    // The analysis's model of this host, as loadgen fills it from two scrapes.
    let h = model(&before, &after);
    let layer = |dev: &str| analysis::layers::delayed_layer(&h, dev, "write", &[0]);
    assert_eq!(
        layer(&top.name),
        delay.name,
        "the delay target adds the time"
    );
    assert_eq!(layer(&slow.name), "nullb0", "null_blk below takes the time");
    drop((top, slow, crypt));
    drop(delay);
}

/// md RAID0 over two loop devices in 64 KiB chunks: 16 KiB writes from the start go four to
/// a chunk, the chunks in turn to each member. The array counts every write once for itself
/// (bio-based, as dm), each member what reached it (equal to its sysfs counters), and the
/// members add up to the array; the array names both as parents.
#[test]
fn md_raid0_is_counted_for_itself_and_for_each_member() {
    let members = [
        LoopDevice::new("md-a", 16 << 20).expect("loop device"),
        LoopDevice::new("md-b", 16 << 20).expect("loop device"),
    ];
    let md = MdArray::raid0("stn", &[&members[0].dev, &members[1].dev], 64).expect("md RAID0");
    let layers: [&dyn Counted; 3] = [&md, &members[0], &members[1]];
    let agent = crate::shared::agent();
    let scrape = || agent.scrape();
    let (before, s0) = settled_all(&scrape, &layers);
    direct_writes(&md.dev, WRITES, 16384).expect("writes through the array");
    let (after, s1) = settled_all(&scrape, &layers);
    let mut counted_on: Vec<String> = after
        .iter()
        .filter(|s| s.name == "stornet_block_io_size_bytes_count" && s.label("op") == Some("write"))
        .filter_map(|s| Some(format!("{}={}", s.label("device")?, s.value)))
        .collect();
    counted_on.dedup();
    let bio = |s: &[Sample]| {
        stornet_lab::metrics::sum(
            s,
            "stornet_block_dispatch_stamps_total",
            &[("source", "bio")],
        )
    };
    eprintln!(
        "{} ({}): bio stamps {}; devices with writes: {counted_on:?}",
        md.name,
        std::fs::read_to_string(format!("/sys/class/block/{}/dev", md.name))
            .unwrap_or_default()
            .trim(),
        bio(&after) - bio(&before)
    );
    let mut on_members = 0.0;
    for (name, counted, sys) in layer_writes(&layers, (&before, &s0), (&after, &s1)) {
        if name == md.name {
            assert_eq!(counted, WRITES as f64, "every write counted once on {name}");
        } else {
            assert_eq!(counted, sys as f64, "writes counted on {name}");
            assert!(counted > 0.0, "{name} got none of the writes");
            on_members += counted;
        }
    }
    assert_eq!(
        on_members, WRITES as f64,
        "the members' writes add up to the array's"
    );
    let mut p = parents(&after, &md.name);
    let mut want = [members[0].name.as_str(), members[1].name.as_str()];
    p.sort();
    want.sort();
    assert_eq!(p, want, "the array's parents");
    drop(md);
}

/// dm-multipath over two paths to one file (two loop devices), taken in turn: the multipath
/// device is request-based (its requests are cloned onto a path), so every write is counted
/// for it as a request and again for the path that carried it, each equal to its sysfs
/// counters; the paths add up to the multipath device, which is `dm-mpath` (from the uuid
/// multipathd gives it) with both paths as parents.
#[test]
fn dm_multipath_is_counted_for_itself_and_for_each_path() {
    let first = LoopDevice::new("mpath", 16 << 20).expect("loop device");
    let second = first
        .another_path()
        .expect("a second loop device on the same file");
    let mpath = DmDevice::multipath("mpath", &[&first.dev, &second.dev]).expect("dm-multipath");
    let layers: [&dyn Counted; 3] = [&mpath, &first, &second];
    let agent = crate::shared::agent();
    let scrape = || agent.scrape();
    let (before, s0) = settled_all(&scrape, &layers);
    direct_writes(&mpath.dev, WRITES, 16384).expect("writes through the multipath device");
    let (after, s1) = settled_all(&scrape, &layers);
    let mut on_paths = 0.0;
    for (name, counted, sys) in layer_writes(&layers, (&before, &s0), (&after, &s1)) {
        assert_eq!(counted, sys as f64, "writes counted on {name}");
        if name == mpath.name {
            assert_eq!(counted, WRITES as f64, "every write counted once on {name}");
        } else {
            assert!(counted > 0.0, "path {name} carried none of the writes");
            on_paths += counted;
        }
    }
    assert_eq!(on_paths, WRITES as f64, "the paths' writes add up");
    let kinds: Vec<&str> = device_info(&after, &mpath.name)
        .into_iter()
        .filter_map(|x| x.label("kind"))
        .collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == "dm-mpath"),
        "{}: kinds {kinds:?}",
        mpath.name
    );
    let mut p = parents(&after, &mpath.name);
    let mut want = [first.name.as_str(), second.name.as_str()];
    p.sort();
    want.sort();
    assert_eq!(p, want, "the paths are the parents of {}", mpath.name);
    drop(mpath);
}
