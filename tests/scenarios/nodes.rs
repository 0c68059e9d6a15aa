//! Scenario 9: every write goes to two replicas, b and c, each a node with its own disk and
//! its own agent, through deep switch buffers. 10 s into one run, c's server is starved of
//! CPU: a spinner joins its cgroups under a CPU limit of a quarter of a CPU, as a storage
//! daemon whose other work uses up its container's limit. 10 s into another, the device
//! behind c's disk is throttled to 40 writes per second. The verdicts must name c: its CPU,
//! then its device, and b as healthy.

use std::time::Duration;

use stornet_lab::blockdev::DiskStat;
use stornet_lab::lab::{DiskSpec, Outcome, ReplicatedRun, Shaping};
use stornet_lab::privilege::require_root;

use crate::buffers::workload;
use crate::support::{self, CLIENT, REPLICA, RunDir};

const NODE: &str = "c";
/// The CPU limit c's server shares with the spinner, per mille of a CPU.
const CPU_PER_MILLE: u64 = 250;
/// The write limit of the device behind c's disk.
const DISK_WRITES: u64 = 40;
/// When the fault starts: the 1 s ramp and 12 s of the 20 s run (the baseline is the run's
/// own, so the healthy part is the longer one).
const ONSET: Duration = Duration::from_secs(13);

#[test]
fn scenario_9_a_replica_starved_of_cpu_or_slowed_by_its_disk_is_named() {
    if !require_root("scenario_9_a_replica_starved_of_cpu_or_slowed_by_its_disk_is_named") {
        return;
    }
    let dir = RunDir::new("nodes");
    let lab = support::client_and_two_replicas("s9", NODE, Shaping::deep());
    let disk = support::disk("s9", DiskSpec::new(support::DISK_BYTES));
    let rr = ReplicatedRun::start_nodes(&lab, CLIENT, &[REPLICA, NODE])
        .expect("starting the agents and the replica nodes");
    let node = &rr.nodes[1];
    let (b, c) = (lab.host(REPLICA).addr, lab.host(NODE).addr);
    let run = |name: &str, inject: &(dyn Fn() + Sync)| -> Outcome {
        let o = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(ONSET);
                inject();
            });
            rr.run(&disk, &workload(), &dir.path, name, None)
        })
        .unwrap_or_else(|e| panic!("{name}: {e:#}\nnode agent log:\n{}", node.agent.log()));
        node.starve_cpu(None).unwrap();
        node.slow_disk(None).unwrap();
        support::print_outcome(name, &o);
        support::check_live_verdicts(name, &o);
        o
    };

    // The kernel's counts: the time c's server group was throttled (cpu.stat, summed over
    // the CPUs) and the time some task of it waited for a CPU (its cpu.pressure), which
    // c's agent exports and the record holds per interval.
    let throttled0 = node.cpu_throttled_seconds().unwrap();
    let waited0 = node.cpu_waited_seconds().unwrap();
    let o = run("starved", &|| node.starve_cpu(Some(CPU_PER_MILLE)).unwrap());
    let throttled = node.cpu_throttled_seconds().unwrap() - throttled0;
    let waited = node.cpu_waited_seconds().unwrap() - waited0;
    let recorded = o
        .record_sum(0, NODE, &["cpu_stalled_seconds"])
        .expect("c's CPU pressure in the record");
    println!(
        "c's server group: throttled {throttled:.2} s (cpu.stat), some task waiting for a CPU \
         {waited:.2} s (cpu.pressure), {recorded:.2} s of it in the record (c's agent)"
    );
    assert!(
        throttled > 1.0,
        "the limit throttled c for only {throttled} s"
    );
    // The record covers the measured intervals; the kernel's count also the set-up and
    // the end, when nothing was starved.
    assert!(
        recorded <= waited * 1.02 && recorded >= 0.8 * waited,
        "the record holds {recorded} s of c's CPU wait, the kernel counted {waited} s"
    );
    support::assert_verdict(&o, "cpu", &format!("CPU of {NODE} (replica {c})"));
    support::assert_named_healthy(&o, &b.to_string());

    // The block layer's count of c's writes against the agent's.
    let stat0 = DiskStat::read(node.disk.name()).unwrap();
    let o = run("slow-disk", &|| node.slow_disk(Some(DISK_WRITES)).unwrap());
    let writes = DiskStat::read(node.disk.name()).unwrap().write_ios - stat0.write_ios;
    let counted = o
        .record_sum(
            0,
            NODE,
            &["devices", node.disk.name(), "ops", "write", "ios"],
        )
        .expect("c's device in the record");
    println!(
        "c's disk {} completed {writes} writes (/sys/block); the agent counted {counted:.0}",
        node.disk.name()
    );
    assert!(
        counted <= writes as f64 && counted >= 0.8 * writes as f64,
        "c's agent counted {counted} writes of {writes}"
    );
    support::assert_verdict(
        &o,
        "slow_device",
        &format!("device {} on {NODE} (replica {c})", node.disk.name()),
    );
    support::assert_named_healthy(&o, &b.to_string());
}
