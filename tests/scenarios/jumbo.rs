//! Scenario 6: jumbo frames against MTU 1500 on a healthy link (hosts and switch alike),
//! the same replicated write load as fast as it goes: throughput, latency and CPU side by
//! side. The links run without segmentation and receive offloads (TSO, GSO, GRO), as a NIC
//! without them would: veth otherwise carries a 64 KiB write as one packet at either MTU,
//! and the MTU would cost nothing. Informational: the numbers depend on the machine (and on
//! who else uses its CPUs), so the test only checks that both runs completed and moved data.

use stornet_lab::lab::{DiskSpec, HostSpec, Workload};
use stornet_lab::privilege::require_root;

use crate::support::{self, CLIENT, REPLICA, RunDir};

#[test]
fn scenario_6_jumbo_frames_against_1500_table() {
    if !require_root("scenario_6_jumbo_frames_against_1500_table") {
        return;
    }
    let dir = RunDir::new("jumbo");
    let w = Workload {
        rw: "randwrite".into(),
        rwmixread: None,
        bs: "64k".into(),
        iodepth: 8,
        numjobs: 1,
        rate_iops: None,
        size: "256m".into(),
        runtime: "10s".into(),
        ramp_time: Some("1s".into()),
        interval: "1s".into(),
        extra: Vec::new(),
    };
    let mut rows = Vec::new();
    for mtu in [1500, 9000] {
        let lab = support::two_hosts(
            &format!("s6m{mtu}"),
            HostSpec::new(CLIENT).mtu(mtu, mtu).without_offloads(),
            HostSpec::new(REPLICA).mtu(mtu, mtu).without_offloads(),
        );
        let disk = support::disk("s6", DiskSpec::new(support::DISK_BYTES));
        let o = support::run(&lab, &disk, &w, &dir, &format!("mtu{mtu}"));
        let l = o.latency(0, "write");
        assert!(
            l.ios > 0.0 && l.bytes_per_second > 0.0,
            "MTU {mtu}: no data moved"
        );
        rows.push((mtu, l, o.cpu(0), o.retransmits));
    }
    println!("\nreplicated 64k writes, QD8, links without TSO, GSO and GRO");
    println!(
        "{:>5} {:>9} {:>8} {:>9} {:>9} {:>9} {:>11} {:>12} {:>11}",
        "MTU",
        "writes/s",
        "MB/s",
        "mean",
        "p99",
        "loadgen",
        "CPU per IO",
        "machine CPU",
        "retransmits"
    );
    for (mtu, l, (proc_pct, per_io, sys_pct), rt) in &rows {
        println!(
            "{mtu:>5} {:>9.0} {:>8.1} {:>9} {:>9} {:>8.0}% {:>9.1}µs {:>11.0}% {rt:>11}",
            l.iops,
            l.bytes_per_second / 1e6,
            support::ms(l.mean_s),
            support::ms(l.p99_s),
            proc_pct,
            per_io,
            sys_pct
        );
    }
    let (a, b) = (&rows[0].1, &rows[1].1);
    println!(
        "MTU 9000 against 1500: {:.2}x the throughput, {:.2}x the write p99\n",
        b.bytes_per_second / a.bytes_per_second,
        b.p99_s / a.p99_s
    );
}
