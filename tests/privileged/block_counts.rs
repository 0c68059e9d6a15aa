use stornet_tests::agent::AgentProcess;
use stornet_tests::blockdev::{LoopDevice, direct_writes};
use stornet_tests::metrics::sum;
use stornet_tests::privilege::require_root;

/// N O_DIRECT 4 KiB writes to a loop device: the agent counts exactly N write completions for
/// that device, the same as the delta of /sys/block/loopX/stat.
#[test]
fn write_completions_match_sysfs() {
    if !require_root("write_completions_match_sysfs") {
        return;
    }
    const N: u64 = 2000;
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let up = sum(
        &agent.scrape().unwrap(),
        "stornet_probe_up",
        &[("probe", "block_completion")],
    );
    assert_eq!(up, 1.0, "block_completion probe must be up");

    let disk = LoopDevice::new("blockcount", 64 << 20).expect("loop device");
    let labels = [("device", disk.name.as_str()), ("op", "write")];
    let before_agent = sum(
        &agent.scrape().unwrap(),
        "stornet_block_completed_ios_total",
        &labels,
    );
    let before = disk.stat().unwrap();

    direct_writes(&disk.dev, N, 4096).expect("direct writes");

    let after = disk.stat().unwrap();
    let samples = agent.scrape().unwrap();
    let counted = sum(&samples, "stornet_block_completed_ios_total", &labels) - before_agent;
    let sysfs = after.write_ios - before.write_ios;
    assert_eq!(sysfs, N, "/sys/block/{}/stat write delta", disk.name);
    assert_eq!(
        counted as u64, N,
        "agent write completions for {}",
        disk.name
    );
    let bytes = sum(&samples, "stornet_block_completed_bytes_total", &labels);
    assert_eq!(
        bytes as u64,
        N * 4096,
        "agent write bytes for {}",
        disk.name
    );
}
