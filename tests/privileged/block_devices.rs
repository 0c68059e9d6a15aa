use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_reads};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::require_root;

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

/// Whether `got` reads were counted of `n` done: all of them, or nearly (the kernel now and
/// then skips a BPF program run on a busy machine, docs/metrics.md).
fn about(got: f64, n: u64) -> bool {
    got <= n as f64 && got >= n as f64 * 0.98
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
    let include = format!("devices_include = [{:?}, {:?}]\n", a.name, b.name);
    let agent =
        AgentProcess::with_config(&format!("[block]\n{include}max_devices = 1\n"), &[]).unwrap();

    direct_reads(&a.dev, 500, 4096).unwrap();
    a.settle();
    let first = agent.scrape().unwrap();
    let a_reads = reads(&first, &a.name);
    assert!(about(a_reads, 500), "{a_reads} reads on {}", a.name);
    direct_reads(&b.dev, 300, 4096).unwrap();
    b.settle();
    let second = agent.scrape().unwrap();
    assert_eq!(
        reads(&second, &a.name),
        a_reads,
        "{} keeps its name",
        a.name
    );
    assert!(
        !has_device(&second, &b.name),
        "{} is beyond the cap",
        b.name
    );
    let other = reads(&second, "other");
    assert!(about(other, 300), "{other} reads of {} as other", b.name);
    let inflight = sum(&second, "stornet_block_inflight", &[("device", "other")]);
    assert!(
        inflight <= 300.0 - other,
        "{inflight} left in flight on other"
    );
    drop(agent);

    let exclude = format!("devices_exclude = [{:?}]\n", b.name);
    let agent = AgentProcess::with_config(&format!("[block]\n{include}{exclude}"), &[]).unwrap();
    direct_reads(&a.dev, 200, 4096).unwrap();
    direct_reads(&b.dev, 200, 4096).unwrap();
    a.settle();
    b.settle();
    let s = agent.scrape().unwrap();
    assert!(about(reads(&s, &a.name), 200));
    assert!(!has_device(&s, &b.name), "{} is excluded", b.name);
    assert!(!has_device(&s, "other"), "an excluded device is not other");
}
