//! The field's faults on the Ceph lab, through the lab's own mechanisms, and the independent
//! counts that show each one acting: a switch port's buffer (tbf; `tc -s` drops, the
//! senders' `RetransSegs`), an OSD's slow disk (blkio on the device behind its disk;
//! `/sys/block/*/stat`, its bluestore commit latency), an MTU mismatch at one host's port
//! (the ports' rx drops), an OSD starved of CPU (a cpu cgroup quota; `cpu.stat`).

use anyhow::Result;

use super::CephLab;
use crate::lab::{Host, Shaping};

impl CephLab {
    /// Shapes the switch port toward `host` (`h1`, …) now; `None` takes the shaping off.
    pub fn shape_port(&self, host: &str, shaping: Option<&Shaping>) -> Result<()> {
        let h = self.lab.host(host);
        match shaping {
            Some(s) => self.lab.reshape(h, s),
            None => self.lab.unshape(h),
        }
    }

    /// Packets the qdisc of the switch port toward `host` dropped (`tc -s`).
    pub fn port_drops(&self, host: &str) -> Result<u64> {
        self.lab.port_qdisc_dropped(self.lab.host(host))
    }

    /// `RetransSegs` of every host's namespace (/proc/net/snmp), by host name.
    pub fn retransmits(&self) -> Result<Vec<(String, u64)>> {
        self.lab
            .hosts
            .iter()
            .map(|h| Ok((h.name.clone(), h.ns.snmp_tcp("RetransSegs")?)))
            .collect()
    }

    /// Throttles the writes of OSD `id`'s disk to `writes_per_second` (requests wait in
    /// service, as on a slow drive); `None` lifts it.
    pub fn slow_osd_disk(&self, id: u32, writes_per_second: Option<u64>) -> Result<()> {
        self.osd(id).slow_disk(writes_per_second)
    }

    /// Caps OSD `id`'s daemon at `per_mille` thousandths of one CPU (a cgroup quota, as a
    /// container's CPU limit); `None` lifts it.
    pub fn starve_osd_cpu(&self, id: u32, per_mille: Option<u64>) -> Result<()> {
        self.osd(id).starve_cpu(per_mille)
    }

    /// Jumbo frames everywhere but one switch port: every host, port and the bridge at
    /// MTU 9000 and the port toward `host` at 1500 (a port someone forgot). `None` puts
    /// everything back at 1500. Connections open before keep the segment size they agreed,
    /// new ones send frames that port cannot carry.
    pub fn mtu_mismatch(&self, host: Option<&str>) -> Result<()> {
        self.set_mtu(if host.is_some() { 9000 } else { 1500 })?;
        if let Some(h) = host {
            self.set_port_mtu(h, 1500)?;
        }
        Ok(())
    }

    /// Every host, switch port and the bridge at `mtu` (9000: a jumbo-frame network).
    /// Connections open before keep the segment size they agreed.
    pub fn set_mtu(&self, mtu: u32) -> Result<()> {
        for h in &self.lab.hosts {
            self.lab.switch.set_mtu(&h.port, mtu)?;
            h.ns.set_mtu(Host::DEV, mtu)?;
        }
        self.lab.switch.set_mtu("br0", mtu)
    }

    /// The switch port toward `host` alone at `mtu`: on a jumbo-frame network, 1500 is a
    /// port whose configuration was lost, and the connections through it that agreed on
    /// jumbo segments lose every frame above 1500 bytes there, open or new.
    pub fn set_port_mtu(&self, host: &str, mtu: u32) -> Result<()> {
        self.lab.set_port_mtu(self.lab.host(host), mtu)
    }

    /// Frames the switch ports refused on receive (`ip -s link` rx_dropped), by host.
    pub fn port_rx_drops(&self) -> Result<Vec<(String, u64)>> {
        self.lab
            .hosts
            .iter()
            .map(|h| {
                Ok((
                    h.name.clone(),
                    self.lab.switch.link_stat(&h.port, "rx_dropped")?,
                ))
            })
            .collect()
    }
}
