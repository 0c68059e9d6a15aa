//! Scenario 9: every write goes to two replicas, b and c, each a node with its own disk and
//! its own agent, through deep switch buffers. 19 s into the run, c's server is starved of
//! CPU: a spinner joins its cgroups under a CPU limit of a quarter of a CPU, as a storage
//! daemon whose other work uses up its container's limit. The verdict must name c's CPU,
//! and b as healthy. (A replica's slow disk, the other fault a node's agent shows, is in
//! the diagnosis bench and the analysis' lab-record tests; CI's time goes to this one.)

use std::time::Duration;

use stornet_lab::lab::{DiskSpec, ReplicatedRun, Shaping, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir};

const NODE: &str = "c";
/// The CPU limit c's server shares with the spinner, per mille of a CPU.
const CPU_PER_MILLE: u64 = 250;
/// When the fault starts: the 1 s ramp and 19 s of the 30 s run. The baseline is the run's
/// own, so the healthy part must stay the larger one, and hold a quiet majority, even when
/// the agents and the replicas are slow to start on a busy machine, the fault lands an
/// interval or two early and other work on the machine raises a few healthy intervals (four
/// of twelve such intervals lifted a 20 s run's baseline to the starved latency).
const ONSET: Duration = Duration::from_secs(20);

/// The paced replicated writes of scenarios 1 and 2, for longer.
fn workload() -> Workload {
    Workload::paced_writes("30s")
}

#[test]
fn scenario_9_a_replica_starved_of_cpu_is_its_cpu() {
    if !require_root("scenario_9_a_replica_starved_of_cpu_is_its_cpu") {
        return;
    }
    let dir = RunDir::new("nodes");
    let lab = support::client_and_two_replicas("s9", NODE, Shaping::deep());
    let disk = support::disk("s9", DiskSpec::new(support::DISK_BYTES));
    let rr = ReplicatedRun::start_nodes(&lab, CLIENT, &[REPLICA, NODE])
        .expect("starting the agents and the replica nodes");
    let node = &rr.nodes[1];
    let (b, c) = (lab.host(REPLICA).addr, lab.host(NODE).addr);

    // The kernel's counts: the time c's server group was throttled (cpu.stat, summed over
    // the CPUs) and the time some task of it waited for a CPU (its cpu.pressure), which
    // c's agent exports and the record holds per interval.
    let throttled0 = node.cpu_throttled_seconds().unwrap();
    let waited0 = node.cpu_waited_seconds().unwrap();
    let o = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(ONSET);
            node.starve_cpu(Some(CPU_PER_MILLE)).unwrap();
        });
        rr.run(&disk, &workload(), &dir.path, "starved", None)
    })
    .unwrap_or_else(|e| panic!("{e:#}\nnode agent log:\n{}", node.agent.log()));
    node.starve_cpu(None).unwrap();
    let throttled = node.cpu_throttled_seconds().unwrap() - throttled0;
    let waited = node.cpu_waited_seconds().unwrap() - waited0;
    let recorded = o
        .record_sum(0, NODE, &["cpu_stalled_seconds"])
        .expect("c's CPU pressure in the record");
    support::print_outcome("starved", &o);
    support::check_live_verdicts("starved", &o);
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
}
