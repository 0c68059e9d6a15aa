//! Scenario 8: every write goes to two replicas, b and c, through deep switch buffers, and
//! host c loses 3% of the TCP segments it receives, at random, with no queue behind the
//! loss (an nftables rule: a bad cable or NIC, as the kernel counts a filtered packet). The
//! verdict must be `packet_loss` on the path to c, not congestion and not b: nothing queued
//! or overflowed, and the drops the kernel counted came with retransmits toward c only.

use stornet_lab::lab::{DiskSpec, ReplicatedRun, Shaping};
use stornet_lab::privilege::require_root;

use crate::buffers::workload;
use crate::support::{self, CLIENT, REPLICA, RunDir};

const LOSSY: &str = "c";
/// Segments host c drops, per mille.
const LOSS_PER_MILLE: u32 = 30;

#[test]
fn scenario_8_a_lossy_replica_link_is_packet_loss() {
    if !require_root("scenario_8_a_lossy_replica_link_is_packet_loss") {
        return;
    }
    let dir = RunDir::new("lossy");
    let lab = support::client_and_two_replicas("s8", LOSSY, Shaping::deep());
    let disk = support::disk("s8", DiskSpec::new(support::DISK_BYTES));
    let rr = ReplicatedRun::start_many(&lab, CLIENT, &[REPLICA, LOSSY])
        .expect("starting the agent and the replicas");
    let (healthy, lossy) = (lab.host(REPLICA), lab.host(LOSSY));
    lab.lose(lossy, LOSS_PER_MILLE).expect("the loss rule");
    let queued0 = lab.port_qdisc_drops().unwrap();
    let o = rr
        .run(&disk, &workload(), &dir.path, "lossy", None)
        .unwrap_or_else(|e| panic!("{e:#}\nagent log:\n{}", rr.agent.log()));
    let lost = lab.lost(lossy).unwrap();
    lab.lose(lossy, 0).unwrap();
    let queued = lab.port_qdisc_drops().unwrap() - queued0;
    support::print_outcome("lossy", &o);
    support::check_live_verdicts("lossy", &o);
    let counted = support::recorded(&o, &["skb_drops", "netfilter_drop"]);
    println!(
        "host c dropped {lost} segments (nftables' count); the agent counted {counted:.0} \
         netfilter drops; switch qdisc drops {queued}"
    );
    // The kernel's own counts: c lost segments, no switch queue overflowed, and the agent
    // saw the segments the rule dropped. The rule also counts during the ramp before the
    // record's first interval (a twentieth of the run), and drop reasons are counted
    // machine-wide, so the record may hold a little less or more.
    assert!(lost > 0, "the loss rule dropped nothing");
    assert_eq!(queued, 0, "a switch port dropped packets");
    assert!(
        counted >= 0.9 * lost as f64,
        "the agent counted {counted} netfilter drops, nftables {lost}"
    );

    let (b, c) = (healthy.addr.to_string(), lossy.addr.to_string());
    support::assert_verdict(&o, "packet_loss", &format!("path to replica {c}"));
    let evidence = o.evidence();
    assert!(
        evidence
            .iter()
            .any(|e| e.contains(&format!("replica {b}")) && e.contains("healthy")),
        "the evidence names b ({b}) as healthy: {evidence:#?}"
    );
}
