use stornet_agent::config::Config;
use stornet_tests::agent::InProcessAgent;
use stornet_tests::blockdev::{LoopDevice, direct_reads};
use stornet_tests::metrics::{Sample, sum};
use stornet_tests::privilege::require_root;

use crate::block_util::count;

fn reads(s: &[Sample], device: &str) -> f64 {
    count(
        s,
        "stornet_block_io_size_bytes",
        &[("device", device), ("op", "read")],
    )
}

fn has_device(s: &[Sample], device: &str) -> bool {
    s.iter()
        .any(|x| x.name.starts_with("stornet_block_") && x.label("device") == Some(device))
}

/// With `max_devices = 1`, the first device doing IO keeps its name and the next one is
/// reported as `device="other"`; an excluded device is not reported at all.
#[test]
fn block_device_cap_folds_into_other_and_exclude_drops() {
    if !require_root("block_device_cap_folds_into_other_and_exclude_drops") {
        return;
    }
    let a = LoopDevice::new("blockcap-a", 16 << 20).expect("loop device");
    let b = LoopDevice::new("blockcap-b", 16 << 20).expect("loop device");
    // Only these two devices, so that IO elsewhere on the machine takes no place.
    let mut config = Config::default();
    config.block.devices_include = vec![a.name.clone(), b.name.clone()];
    config.block.max_devices = 1;
    let agent = InProcessAgent::start(&config);

    direct_reads(&a.dev, 100, 4096).unwrap();
    a.settle();
    let first = agent.scrape().unwrap();
    assert_eq!(reads(&first, &a.name), 100.0);
    direct_reads(&b.dev, 70, 4096).unwrap();
    b.settle();
    let second = agent.scrape().unwrap();
    assert_eq!(reads(&second, &a.name), 100.0, "{} keeps its name", a.name);
    assert!(
        !has_device(&second, &b.name),
        "{} is beyond the cap",
        b.name
    );
    assert_eq!(reads(&second, "other"), 70.0, "{} counts as other", b.name);
    assert_eq!(
        sum(&second, "stornet_block_inflight", &[("device", "other")]),
        0.0
    );
    drop(agent);

    config.block.max_devices = 64;
    config.block.devices_exclude = vec![b.name.clone()];
    let agent = InProcessAgent::start(&config);
    direct_reads(&a.dev, 10, 4096).unwrap();
    direct_reads(&b.dev, 10, 4096).unwrap();
    a.settle();
    b.settle();
    let s = agent.scrape().unwrap();
    assert_eq!(reads(&s, &a.name), 10.0);
    assert!(!has_device(&s, &b.name), "{} is excluded", b.name);
    assert!(!has_device(&s, "other"), "an excluded device is not other");
}
