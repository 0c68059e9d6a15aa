//! What the tests of network block devices share: two namespaces joined by a veth whose
//! sending side loses packets (netem), writes to a remote device between two scrapes of the
//! agent, and the checks that the device names its server, that every write is counted on
//! the device that carries it, and that the retransmits the loss causes count toward that
//! same server.

use std::net::SocketAddrV4;
use std::path::Path;

use crate::shared::{agent, device_info, model, writes};
use stornet_lab::blockdev::{Disk, direct_writes, settled};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::netns::HostPair;

pub const WRITES: u64 = 400;

/// Namespaces `a` (the initiator's) and `b` (the server's); 2% of what `a` sends is lost.
pub fn lossy_pair(tag: &str) -> HostPair {
    let p = HostPair::new(tag).expect("host pair");
    p.a.tc(&[
        "qdisc", "replace", "dev", p.a_dev, "root", "netem", "loss", "2%",
    ])
    .expect("netem");
    p
}

/// Two scrapes around [`WRITES`] writes, with the kernel's own counts of them.
pub struct Written {
    pub before: Vec<Sample>,
    pub after: Vec<Sample>,
    /// Writes in `carrier`'s /sys/block stat.
    pub sysfs: u64,
    /// RetransSegs of `a` (/proc/net/snmp).
    pub retrans_segs: u64,
}

/// [`WRITES`] writes of 16 KiB to `dev`, which `carrier` carries, between two scrapes settled
/// on `carrier`.
pub fn write(p: &HostPair, dev: &Path, carrier: &Disk) -> Written {
    let scrape = || agent().scrape();
    let snmp0 = p.a.snmp_tcp("RetransSegs").unwrap();
    let (before, s0) = settled(&scrape, carrier);
    direct_writes(dev, WRITES, 16384).expect("writes to the remote device");
    let (after, s1) = settled(&scrape, carrier);
    Written {
        before,
        after,
        sysfs: s1.write_ios - s0.write_ios,
        retrans_segs: p.a.snmp_tcp("RetransSegs").unwrap() - snmp0,
    }
}

impl Written {
    /// Device `name` names `transport` and `server` in `stornet_block_device_info`, the agent
    /// counted every write on it as sysfs did, the analysis's model (as loadgen fills it from
    /// the two scrapes) has it served by the server's address, and the agent saw retransmits
    /// toward that address, never more than the kernel sent. The model, for more checks.
    pub fn check_served(
        &self,
        name: &str,
        transport: &str,
        server: SocketAddrV4,
    ) -> analysis::model::Host {
        let (before, after) = (&self.before, &self.after);
        let series = device_info(after, name);
        eprintln!(
            "{name}: device info {:?}",
            series.iter().map(|s| &s.labels).collect::<Vec<_>>()
        );
        let peer = server.to_string();
        assert!(
            series
                .iter()
                .any(|s| s.label("transport") == Some(transport) && s.label("peer") == Some(&peer)),
            "{name} must name transport {transport} and peer {peer}"
        );
        let counted = writes(after, name) - writes(before, name);
        let ip = server.ip().to_string();
        let retransmits = sum(after, "stornet_tcp_retransmits_total", &[("peer", &ip)])
            - sum(before, "stornet_tcp_retransmits_total", &[("peer", &ip)]);
        eprintln!(
            "{WRITES} writes: the agent counted {counted} on {name} (sysfs {}); retransmits \
             toward {ip}: {retransmits} (RetransSegs {})",
            self.sysfs, self.retrans_segs
        );
        assert_eq!(self.sysfs, WRITES, "sysfs counts each write on {name} once");
        assert_eq!(counted, WRITES as f64, "writes counted on {name}");
        let h = model(before, after);
        assert_eq!(
            h.devices.get(name).and_then(|d| d.peer.as_deref()),
            Some(ip.as_str()),
            "{name} is served by {ip} in the analysis's model"
        );
        assert!(
            retransmits > 0.0 && retransmits <= self.retrans_segs as f64,
            "retransmits toward {ip} {retransmits}, RetransSegs {}",
            self.retrans_segs
        );
        h
    }
}
