use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_reads};
use stornet_lab::metrics::sum;
use stornet_lab::privilege::require_root;

use crate::block_util::count;

/// With the dispatch probes off, the completion probe alone still counts and times every
/// request from the kernel's own stamps; only the depth at dispatch is missing.
#[test]
fn block_completion_probe_works_alone() {
    if !require_root("block_completion_probe_works_alone") {
        return;
    }
    let disk = LoopDevice::new("blockalone", 16 << 20).expect("loop device");
    let config = format!(
        "[probes]\ndisable = [\"block_issue\", \"block_requeue\"]\n[block]\ndevices_include = [{:?}]\n",
        disk.name
    );
    let agent = AgentProcess::with_config(&config, &[]).unwrap();
    let s = agent.scrape().unwrap();
    assert_eq!(
        sum(&s, "stornet_probe_up", &[("probe", "block_completion")]),
        1.0
    );
    direct_reads(&disk.dev, 400, 4096).unwrap();
    disk.settle();
    let s = agent.scrape().unwrap();
    let labels = [("device", disk.name.as_str()), ("op", "read")];
    let reads = count(&s, "stornet_block_io_size_bytes", &labels);
    let timed = count(&s, "stornet_block_service_seconds", &labels);
    assert!((392.0..=400.0).contains(&reads), "{reads} reads");
    assert_eq!(timed, reads, "every read timed from the kernel's stamps");
    assert_eq!(
        count(
            &s,
            "stornet_block_inflight_at_issue",
            &[("device", &disk.name)]
        ),
        0.0,
        "no depth without the issue probe"
    );
}
