//! `stornet_block_device_info` on a real partitioned loop device, against sysfs read here.

use std::path::Path;

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::metrics::Sample;
use stornet_lab::privilege::require_root;

/// The (parent, kind, transport, peer) of each `stornet_block_device_info` series of `device`.
fn info(s: &[Sample], device: &str) -> Vec<(String, String, String, String)> {
    let label = |x: &Sample, k: &str| x.label(k).unwrap_or("<none>").to_string();
    let mut v: Vec<_> = s
        .iter()
        .filter(|x| x.name == "stornet_block_device_info" && x.label("device") == Some(device))
        .inspect(|x| assert_eq!(x.value, 1.0, "{x:?}"))
        .map(|x| {
            (
                label(x, "parent"),
                label(x, "kind"),
                label(x, "transport"),
                label(x, "peer"),
            )
        })
        .collect();
    v.sort();
    v
}

fn row(parent: &str, kind: &str) -> (String, String, String, String) {
    (parent.into(), kind.into(), String::new(), String::new())
}

/// A loop device with two partitions: each partition's parent is the loop device, which is
/// a bottom device (`parent=""`); an excluded partition has no series.
#[test]
fn partitions_of_a_loop_device_have_it_as_parent() {
    if !require_root("partitions_of_a_loop_device_have_it_as_parent") {
        return;
    }
    // 16 MiB: partitions of 4 MiB at 1 MiB and at 5 MiB.
    let disk = LoopDevice::partitioned("topology", 16 << 20, &[(2048, 8192), (10240, 8192)])
        .expect("partitioned loop device");
    let n = &disk.name;
    let (p1, p2) = (format!("{n}p1"), format!("{n}p2"));
    // The kernel's own view, read independently of the agent.
    let class = Path::new("/sys/class/block");
    for p in [&p1, &p2] {
        assert!(
            class.join(p).join("partition").exists(),
            "{p} is a partition in sysfs"
        );
        let target = std::fs::canonicalize(class.join(p)).unwrap();
        assert_eq!(
            target
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|d| d.to_str()),
            Some(n.as_str()),
            "{p} sits under {n} in sysfs ({})",
            target.display()
        );
    }
    let slaves = std::fs::read_dir(class.join(n).join("slaves"))
        .unwrap()
        .count();
    assert_eq!(slaves, 0, "{n} has no slaves");
    assert!(class.join(n).join("loop").is_dir(), "{n} is a loop device");

    let include = format!("devices_include = [{n:?}, {p1:?}, {p2:?}]\n");
    let exclude = format!("devices_exclude = [{p2:?}]\n");
    let agent = AgentProcess::with_config(&format!("[block]\n{include}{exclude}"), &[]).unwrap();
    let s = agent.scrape().unwrap();
    assert_eq!(info(&s, n), [row("", "loop")]);
    assert_eq!(info(&s, &p1), [row(n, "partition")]);
    assert!(info(&s, &p2).is_empty(), "{p2} is excluded");
    let others = s
        .iter()
        .filter(|x| x.name == "stornet_block_device_info")
        .filter(|x| ![n.as_str(), p1.as_str()].contains(&x.label("device").unwrap_or("")))
        .count();
    assert_eq!(others, 0, "only the included devices");
    drop(agent);

    // With room for one device, the first by name keeps its series and the other is `other`.
    let agent = AgentProcess::with_config(
        &format!("[block]\n{include}{exclude}max_devices = 1\n"),
        &[],
    )
    .unwrap();
    let s = agent.scrape().unwrap();
    assert_eq!(info(&s, n), [row("", "loop")]);
    assert!(info(&s, &p1).is_empty(), "{p1} is beyond the cap");
    assert_eq!(info(&s, "other"), [row("", "")]);
}
