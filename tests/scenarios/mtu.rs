//! Scenario 3, the jumbo-frame mistake: both hosts at MTU 9000, the switch between them
//! (a bridge in its own namespace) at 1500.
//!
//! What the kernel does here, and why the verdict is still `mtu_mismatch`: a bridge sends
//! no ICMP, so path MTU discovery never learns of the 1500-byte ports and both sockets keep
//! an MSS of 8948. A veth passes a segmentation-offloaded burst (several segments in one
//! buffer) whatever its size, so the bulk of each 64 KiB write still crosses the switch;
//! but the part of a write TCP sends as one segment on its own (the write's last 3 to 9
//! KiB) is larger than the port's MTU, and the port drops it, counted as an rx drop of the
//! port and as a drop without reason (`not_specified`, in `__dev_forward_skb2`). That part
//! only gets through with the next write's burst, so every write waits for the next one,
//! and the last write of the run never completes: the replica times out and loadgen fails,
//! after writing its run record. The analysis then has what it needs: MTUs that differ on
//! the path (the agent watches the switch's namespace), rx drops on the switch port that
//! rose with the replica's round trip, and the round trip holding the latency. On real
//! switches, which drop every jumbo frame, the replica connection hangs outright.
//!
//! The replica host is tuned for throughput (a receive buffer of 1 MiB from the start, as
//! storage hosts commonly are): with the small default window the sender sends writes in
//! smaller bursts whose last piece is two segments, which the veth passes too, and the
//! mistake would go unnoticed until the window grows.

use stornet_lab::lab::{DiskSpec, HostSpec, Lab, ReplicatedRun, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir, recorded};

fn jumbo_mistake() -> Lab {
    support::two_hosts(
        "s3",
        HostSpec::new(CLIENT).mtu(9000, 1500),
        HostSpec::new(REPLICA).mtu(9000, 1500),
    )
}

#[test]
fn scenario_3_jumbo_frames_through_a_1500_switch_is_mtu_mismatch() {
    if !require_root("scenario_3_jumbo_frames_through_a_1500_switch_is_mtu_mismatch") {
        return;
    }
    let dir = RunDir::new("mtu");
    let lab = jumbo_mistake();
    lab.host(REPLICA)
        .sysctl("net.ipv4.tcp_rmem", "4096 1048576 6291456")
        .unwrap();
    let disk = support::disk("s3", DiskSpec::new(support::DISK_BYTES));
    let w = Workload {
        runtime: "15s".into(),
        ..crate::buffers::workload()
    };
    let rr = ReplicatedRun::start(&lab, CLIENT, REPLICA).expect("agent and replica");
    let o = rr
        .run_to_end(&disk, &w, &dir.path, "mtu", None)
        .unwrap_or_else(|e| panic!("{e:#}\nagent log:\n{}", rr.agent.log()));
    drop(rr);
    support::print_outcome("mtu", &o);
    if let Some(f) = &o.failure {
        println!("loadgen: {f}");
        assert!(
            f.contains(&format!("replica {}", support::replica_ip(&lab))),
            "the failure names the replica: {f}"
        );
    }
    assert_eq!(o.cause(), "mtu_mismatch", "{:#}", o.analysis["verdict"]);
    let evidence = o.evidence().join("\n");
    assert!(
        evidence.contains("MTUs differ on the path") && evidence.contains("1500"),
        "the evidence names the MTUs: {evidence}"
    );
    // Independent counts: the switch ports refused frames (ip -s link), and the agent's
    // record holds the same kind of drops on the port.
    assert!(
        o.port_rx_drops >= 100,
        "{} rx drops on the switch ports",
        o.port_rx_drops
    );
    let sw = &lab.switch.name;
    let port = format!("{sw}/port-{CLIENT}");
    let agent = recorded(&o, &["interfaces", &port, "rx_drops"]);
    assert!(
        agent > 0.0 && agent <= o.port_rx_drops as f64,
        "the record holds {agent} rx drops on the port, ip -s link {}",
        o.port_rx_drops
    );
}
