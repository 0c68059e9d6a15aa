//! NVMe over TCP on the guest's kernel: a target (nvmet-tcp, configured through configfs) in
//! one network namespace, the initiator in another, joined by a lossy link. The device the
//! kernel makes names its target in `stornet_block_device_info`, its writes are counted on the
//! device that carries them, and the retransmits the lossy link causes count toward that same
//! peer: a remote device's latency and its network, joined at the kernel's storage layer. Then
//! the join end to end: loadgen's verdict on runs against such a device through a deep and a
//! shallow switch buffer.

use std::net::SocketAddrV4;

use analysis::layers::delayed_layer;
use stornet_lab::blockdev::{Disk, LoopDevice};
use stornet_lab::fs::TempDir;
use stornet_lab::lab::run::{Outcome, client_agent, device_run, series_sum};
use stornet_lab::lab::{Host, HostSpec, Lab, Shaping, Workload};
use stornet_lab::nvmf::{Controller, PORT, Target};

use crate::remote::{WRITES, lossy_pair, write};
use crate::shared::{device_info, writes};

#[test]
fn nvme_tcp_device_names_its_target_and_its_retransmits() {
    let p = lossy_pair("nvmf");
    let backing = LoopDevice::new("nvmf", 64 << 20).expect("backing device");
    let target = Target::new(&p.b, p.b_addr(), &backing.dev, "tcp").expect("nvmet-tcp target");
    let ctrl = Controller::connect(&p.a, &target).expect("nvme connect over TCP");
    let name = ctrl.path_device.as_str();
    let carrier = Disk::existing(name).expect("the path device");
    let w = write(&p, &ctrl.dev, &carrier);
    let h = w.check_served(name, "tcp", SocketAddrV4::new(p.b_addr(), PORT));
    let head = ctrl.dev.file_name().unwrap().to_str().unwrap();
    if head != name {
        // A multipath head: its IO goes down the path, which it names as its parent (from
        // `multipath/`, or on kernels that list nothing there, by the path's name).
        let series = device_info(&w.after, head);
        assert!(
            series
                .iter()
                .any(|s| s.label("parent") == Some(name) && s.label("transport") == Some("tcp")),
            "head {head}: {:?}",
            series.iter().map(|s| &s.labels).collect::<Vec<_>>()
        );
        // The head is bio-based: the bio probes count each write for it too; the analysis
        // puts its time on the path.
        let on_head = writes(&w.after, head) - writes(&w.before, head);
        assert_eq!(on_head, WRITES as f64, "writes counted on the head {head}");
        assert_eq!(
            delayed_layer(&h, head, "write", &[0]),
            name,
            "the head's time"
        );
    }
    drop(ctrl);
    drop(target);
}

/// The join end to end: loadgen writes to the NVMe/TCP device, sampling the initiator's
/// agent (which also watches the switch and the target), through a switch whose ports hold
/// a deep buffer, then, on the same connection, a shallow one; `loadgen analyze` judges each
/// record. A write leaves as one 64 KiB burst whatever the guest's speed: the deep port holds
/// it, the shallow one drops most of it and TCP recovers by retransmitting, which costs round
/// trips (4 ms each, from netem on the hosts' links, so that they outweigh the emulated
/// guest's own delays). Through the deep buffer no network cause is named: the verdict is
/// none, or, when a busy machine slows the emulated guest until each write takes tens of
/// milliseconds, what the guest's own measurements show (a slow device, a starved CPU);
/// through the shallow one it is network congestion on the path to the target, named with
/// the device it serves, and the switch (`tc -s`) and the initiator (/proc/net/snmp) count
/// the drops and retransmits behind it. The write p99 of both runs is printed.
#[test]
fn nvme_tcp_through_a_shallow_buffer_is_congestion_toward_its_target() {
    let lab = Lab::new(
        "nvbuf",
        &[
            HostSpec::new("a").shaped(Shaping::deep()),
            HostSpec::new("b").shaped(Shaping::deep()),
        ],
    )
    .expect("the lab");
    let (a, b) = (lab.host("a"), lab.host("b"));
    // A round trip of a real network's order: inside one machine it takes microseconds, and
    // TCP repairs a loss before the IO notices.
    for h in [a, b] {
        let delay = format!("{ONE_WAY_MS}ms");
        h.ns.tc(&[
            "qdisc",
            "replace",
            "dev",
            Host::DEV,
            "root",
            "netem",
            "delay",
            &delay,
        ])
        .expect("netem delay on the host's link");
    }
    let backing = LoopDevice::new("nvbuf", 64 << 20).expect("backing device");
    let target = Target::new(&b.ns, b.addr, &backing.dev, "buf").expect("nvmet-tcp target");
    let ctrl = Controller::connect(&a.ns, &target).expect("nvme connect over TCP");
    let agent = client_agent(&lab, a).expect("agent on the initiator");
    let dir = TempDir::new("nvbuf").expect("a directory for the records");
    let peer = b.addr.to_string();
    let mut runs = Vec::new();
    for (name, shaping) in [("deep", Shaping::deep()), ("shallow", Shaping::shallow())] {
        for h in [a, b] {
            lab.reshape(h, &shaping).expect("shaping the switch ports");
        }
        let o = device_run(
            &lab,
            a,
            &agent,
            &ctrl.dev,
            &buffer_workload(),
            &dir.path,
            name,
        )
        .unwrap_or_else(|e| panic!("{name}: {e:#}\nagent log:\n{}", agent.log()));
        let w = o.latency(0, "write");
        // (+ 0.0: a sum of no deltas is -0.)
        let agent_retransmits = o
            .record_sum(0, "a", &["peers", &peer, "retransmits"])
            .expect("the record")
            + 0.0;
        eprintln!(
            "{name} buffer: {} writes, mean {:.1} ms, p99 {:.1} ms; verdict {} at {} \
             (confidence {}): {:?}; switch drops {}, RetransSegs {}, retransmits to {peer} \
             (agent) {agent_retransmits}; the record's drops by reason {:?}, CPU stalled {:.2} s; \
             {:.0} s",
            w.ios,
            w.mean_s * 1e3,
            w.p99_s * 1e3,
            o.cause(),
            o.analysis["verdict"]["location"],
            o.analysis["verdict"]["confidence"],
            o.evidence(),
            o.qdisc_drops,
            o.retransmits,
            drops_by_reason(&o),
            o.record_sum(0, "a", &["cpu_stalled_seconds"])
                .unwrap_or(f64::NAN),
            o.seconds
        );
        assert!(
            agent_retransmits <= o.retransmits as f64,
            "{name}: the agent counted {agent_retransmits} retransmits, the kernel {}",
            o.retransmits
        );
        runs.push((o, w, agent_retransmits));
    }
    let (deep, deep_w, _) = &runs[0];
    assert!(
        !NETWORK_CAUSES.contains(&deep.cause()),
        "deep buffer: {:#}\ncandidates: {:#?}",
        deep.analysis["verdict"],
        candidates(deep)
    );
    assert_eq!(deep.qdisc_drops, 0, "drops at the deep-buffer ports");
    assert!(deep_w.ios > 0.0, "no writes through the deep buffer");
    let (shallow, _, agent_retransmits) = &runs[1];
    let place = format!(
        "path to peer {peer}, which serves device {}",
        ctrl.path_device
    );
    assert_eq!(
        shallow.cause(),
        "network_congestion",
        "{:#}\ncandidates: {:#?}",
        shallow.analysis["verdict"],
        candidates(shallow)
    );
    let location = shallow.analysis["verdict"]["location"]
        .as_str()
        .unwrap_or("");
    assert!(
        location.contains(&place),
        "placed at {location:?}, not {place:?}"
    );
    assert!(
        shallow.qdisc_drops > 0,
        "the shallow buffer dropped nothing"
    );
    assert!(
        *agent_retransmits > 0.0,
        "the agent saw no retransmits toward {peer}"
    );
    // The verdict rests on the path's signals, which the evidence names: the retransmits
    // toward the target, or the drops at the switch port toward it alone when something
    // else may account for the retransmits (a starved CPU, needless retransmits): a 5.10
    // guest under CI's load named only the drops.
    // (The latency rise is printed, not asserted: under load an emulated guest's p99 moves
    // more than the buffers do, 1.3x to 18x in the runs measured.)
    let port = format!("/port-{}", b.name);
    assert!(
        shallow.evidence().iter().any(|e| {
            e.contains(&format!("retransmits to {peer}"))
                || (e.contains("drops at the tbf qdisc") && e.contains(&port))
        }),
        "the evidence names neither the retransmits toward {peer} nor drops at {port}: {:?}",
        shallow.evidence()
    );
    drop(agent);
    drop(ctrl);
    drop(target);
}

/// The causes that place latency on the network.
const NETWORK_CAUSES: &[&str] = &["network_congestion", "packet_loss", "mtu_mismatch"];

/// Every candidate the analysis weighed: cause, place, score and whether its defining
/// condition held.
fn candidates(o: &Outcome) -> Vec<String> {
    o.candidates()
        .map(|c| {
            format!(
                "{} at {}: {:.2} (met {}, share {}, association {})",
                c["cause"].as_str().unwrap_or("?"),
                c["location"].as_str().unwrap_or("?"),
                c["score"].as_f64().unwrap_or(f64::NAN),
                c["requirement_met"],
                c["share"],
                c["association"]
            )
        })
        .collect()
}

/// The skb drops of host `a` in a run's record, by reason (those with any).
fn drops_by_reason(o: &Outcome) -> Vec<(String, f64)> {
    let Ok(a) = o.record_host(0, "a") else {
        return Vec::new();
    };
    a["skb_drops"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(reason, s)| (reason.clone(), series_sum(s)))
        .filter(|(_, n)| *n > 0.0)
        .collect()
}

/// Each host's delay toward the switch: a 4 ms round trip.
const ONE_WAY_MS: u32 = 2;

/// 64 KiB writes on a fixed schedule, 4 in flight: the buffer scenarios' workload, shorter.
fn buffer_workload() -> Workload {
    let mut w = Workload::paced_writes("8s");
    w.size = "48m".into();
    w
}
