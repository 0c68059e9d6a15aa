//! Scenario 7: every write goes to two replicas, b and c, and only the switch port toward c
//! has a shallow buffer. The verdict must name the path to c, not to b, and say that b stayed
//! healthy: with several replicas, knowing which one holds the writes is the point.

use stornet_lab::lab::{DiskSpec, ReplicatedRun, Shaping};
use stornet_lab::privilege::require_root;

use crate::buffers::workload;
use crate::support::{self, CLIENT, REPLICA, RunDir};

const SECOND: &str = "c";

#[test]
fn scenario_7_the_congested_replica_is_named_among_two() {
    if !require_root("scenario_7_the_congested_replica_is_named_among_two") {
        return;
    }
    let dir = RunDir::new("tworeplicas");
    let lab = support::client_and_two_replicas("s7", SECOND, Shaping::shallow());
    let disk = support::disk("s7", DiskSpec::new(support::DISK_BYTES));
    let rr = ReplicatedRun::start_many(&lab, CLIENT, &[REPLICA, SECOND])
        .expect("starting the agent and the replicas");
    let (healthy, congested) = (lab.host(REPLICA), lab.host(SECOND));
    let drops0 = [healthy, congested].map(|h| lab.port_qdisc_dropped(h).unwrap());
    let o = rr
        .run(&disk, &workload(), &dir.path, "tworeplicas", None)
        .unwrap_or_else(|e| panic!("{e:#}\nagent log:\n{}", rr.agent.log()));
    let drops = [healthy, congested].map(|h| lab.port_qdisc_dropped(h).unwrap());
    support::print_outcome("tworeplicas", &o);
    support::check_live_verdicts("tworeplicas", &o);
    println!(
        "switch port drops (tc -s): toward b {}, toward c {}",
        drops[0] - drops0[0],
        drops[1] - drops0[1]
    );
    // The kernel's own count: only the shallow port dropped.
    assert_eq!(
        drops[0], drops0[0],
        "the deep port toward b dropped packets"
    );
    assert!(
        drops[1] > drops0[1],
        "the shallow port toward c dropped nothing"
    );

    let (b, c) = (healthy.addr.to_string(), congested.addr.to_string());
    support::assert_verdict(&o, "network_congestion", &format!("path to replica {c}"));
    support::assert_named_healthy(&o, &b);
}
