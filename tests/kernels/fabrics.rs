//! NVMe over TCP on the guest's kernel: a target (nvmet-tcp, configured through configfs) in
//! one network namespace, the initiator in another, joined by a veth whose sending side loses
//! packets (netem). The device the kernel makes names its target in
//! `stornet_block_device_info`, its writes are counted on the device that carries them, and
//! the retransmits the lossy link causes count toward that same peer: a remote device's
//! latency and its network, joined at the kernel's storage layer.

use analysis::layers::delayed_layer;
use loadgen::sampling::agent_signals::{host, reading};
use loadgen::sampling::deltas::Deltas;
use stornet_lab::blockdev::{Disk, LoopDevice, direct_writes, settled};
use stornet_lab::metrics::{Sample, count, sum};
use stornet_lab::netns::HostPair;
use stornet_lab::nvmf::{Controller, PORT, Target};

const WRITES: u64 = 400;
const INFO: &str = "stornet_block_device_info";

fn info<'a>(s: &'a [Sample], device: &str) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| x.name == INFO && x.label("device") == Some(device))
        .collect()
}

#[test]
fn nvme_tcp_device_names_its_target_and_its_retransmits() {
    let p = HostPair::new("nvmf").expect("host pair");
    p.a.tc(&[
        "qdisc", "replace", "dev", p.a_dev, "root", "netem", "loss", "2%",
    ])
    .expect("netem");
    let backing = LoopDevice::new("nvmf", 64 << 20).expect("backing device");
    let target = Target::new(&p.b, p.b_addr(), &backing.dev, "tcp").expect("nvmet-tcp target");
    let ctrl = Controller::connect(&p.a, &target).expect("nvme connect over TCP");
    let agent = crate::shared::agent();
    let carrier = Disk::existing(&ctrl.path_device).expect("the path device");
    let scrape = || agent.scrape();
    let snmp0 = p.a.snmp_tcp("RetransSegs").unwrap();
    let (before, s0) = settled(&scrape, &carrier);
    direct_writes(&ctrl.dev, WRITES, 16384).expect("writes through the controller");
    let (after, s1) = settled(&scrape, &carrier);
    let snmp = p.a.snmp_tcp("RetransSegs").unwrap() - snmp0;

    let peer = format!("{}:{PORT}", p.b_addr());
    let name = ctrl.path_device.as_str();
    let series = info(&after, name);
    eprintln!(
        "{} over {name}: device info {:?}",
        ctrl.dev.display(),
        series.iter().map(|s| &s.labels).collect::<Vec<_>>()
    );
    assert!(
        series
            .iter()
            .any(|s| s.label("transport") == Some("tcp") && s.label("peer") == Some(&peer)),
        "{name} must name transport tcp and peer {peer}"
    );
    let head = ctrl.dev.file_name().unwrap().to_str().unwrap();
    if head != name {
        // A multipath head: its IO goes down the path, which it names as its parent (from
        // `multipath/`, or on kernels that list nothing there, by the path's name).
        let h = info(&after, head);
        assert!(
            h.iter()
                .any(|s| s.label("parent") == Some(name) && s.label("transport") == Some("tcp")),
            "head {head}: {:?}",
            h.iter().map(|s| &s.labels).collect::<Vec<_>>()
        );
        // The head is bio-based: the bio probes count each write for it too.
        let labels = [("device", head), ("op", "write")];
        let on_head = count(&after, "stornet_block_io_size_bytes", &labels)
            - count(&before, "stornet_block_io_size_bytes", &labels);
        assert_eq!(on_head, WRITES as f64, "writes counted on the head {head}");
    }
    let labels = [("device", name), ("op", "write")];
    let counted = count(&after, "stornet_block_io_size_bytes", &labels)
        - count(&before, "stornet_block_io_size_bytes", &labels);
    let sys = s1.write_ios - s0.write_ios;
    let ip = p.b_addr().to_string();
    let retransmits = sum(&after, "stornet_tcp_retransmits_total", &[("peer", &ip)])
        - sum(&before, "stornet_tcp_retransmits_total", &[("peer", &ip)]);
    eprintln!(
        "{WRITES} writes: the agent counted {counted} on {name} (sysfs {sys}); retransmits \
         toward {ip}: {retransmits} (RetransSegs {snmp})"
    );
    let mut counted_on: Vec<&str> = after
        .iter()
        .filter(|s| s.name == "stornet_block_io_size_bytes_count")
        .filter_map(|s| s.label("device"))
        .collect();
    counted_on.dedup();
    assert_eq!(
        counted, WRITES as f64,
        "writes counted on {name} (devices with counts: {counted_on:?})"
    );
    // The analysis's model of this host, as loadgen fills it from the two scrapes: the path
    // device is served by the target, and the head's time goes to it.
    let mut d = Deltas::new();
    d.push(Some(reading(&before)));
    d.push(Some(reading(&after)));
    let h = host("guest", Vec::new(), &d.finish(1), 1);
    assert_eq!(
        h.devices.get(name).and_then(|d| d.peer.as_deref()),
        Some(ip.as_str()),
        "{name} is served by {ip} in the analysis's model"
    );
    if head != name {
        assert_eq!(
            delayed_layer(&h, head, "write", &[0]),
            name,
            "the head's time"
        );
    }
    assert!(
        retransmits > 0.0 && retransmits <= snmp as f64,
        "retransmits toward the target {retransmits}, RetransSegs {snmp}"
    );
    drop(ctrl);
    drop(target);
}
