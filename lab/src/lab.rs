//! The lab: storage hosts on one machine. Hosts are network namespaces joined through a
//! switch (a namespace holding a bridge) whose ports are shaped with tbf: rate, burst, and
//! the buffer depth as the tbf limit, each port and host with its own MTU. Disks are loop
//! devices on files in /dev/shm, optionally slowed by a cgroup v1 blkio throttle or behind a
//! short device queue. The scenario tests and `cargo xtask demo` build on it.
//!
//! Everything a lab creates is removed when it is dropped (also when a test fails, and on
//! Ctrl-C in the demo, see [`interrupt`]). A new lab refuses to start over what an earlier,
//! killed run left behind ([`leftovers`]); `cargo xtask lab clean` removes that. Namespaces
//! have no default route, and their addresses come from 198.18.0.0/15, inside them only.

pub mod disk;
pub mod interrupt;
pub mod leftovers;
pub mod node;
pub mod run;

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::{Context, Result, ensure};

use crate::netns::{Netns, Subnet, tbf, veth};

pub use disk::{Disk, DiskSpec, Throttle};
pub use node::Node;
pub use run::{Outcome, ReplicatedRun, Workload};

/// The command that removes what a killed lab run left behind.
pub const CLEAN_COMMAND: &str = "cargo xtask lab clean";

/// A switch port's egress shaping: `tc qdisc … tbf rate R burst B limit L`. The limit is
/// the port's buffer: bytes that may wait for tokens before the switch drops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaping {
    pub rate: String,
    pub burst: String,
    pub limit: String,
}

impl Shaping {
    pub fn new(rate: &str, burst: &str, limit: &str) -> Shaping {
        Shaping {
            rate: rate.into(),
            burst: burst.into(),
            limit: limit.into(),
        }
    }

    /// 200 Mbit/s with a 16 KiB buffer: an access switch that drops microbursts.
    pub fn shallow() -> Shaping {
        Shaping::new("200mbit", "32kb", "16kb")
    }

    /// 200 Mbit/s with a 4 MiB buffer: a deep-buffer switch that absorbs them.
    pub fn deep() -> Shaping {
        Shaping::new("200mbit", "32kb", "4mb")
    }
}

/// One host of the lab and its switch port.
#[derive(Clone, Debug)]
pub struct HostSpec {
    pub name: String,
    /// MTU of the host's interface.
    pub mtu: u32,
    /// MTU of the switch port it is plugged into.
    pub port_mtu: u32,
    /// Shaping of the port's egress (traffic from the switch toward this host).
    pub shaping: Option<Shaping>,
    /// Segmentation and receive offloads (TSO, GSO, GRO) of the link's two ends. veth
    /// offloads them by default, so a 64 KiB write crosses it as one packet whatever the
    /// MTU; a physical NIC without them pays per packet, which is when the MTU matters.
    pub offloads: bool,
}

impl HostSpec {
    /// A host at MTU 1500 on an unshaped 1500-byte port.
    pub fn new(name: &str) -> HostSpec {
        HostSpec {
            name: name.into(),
            mtu: 1500,
            port_mtu: 1500,
            shaping: None,
            offloads: true,
        }
    }

    pub fn mtu(mut self, host: u32, port: u32) -> HostSpec {
        self.mtu = host;
        self.port_mtu = port;
        self
    }

    /// The link's two ends without TSO, GSO and GRO: every MTU-sized packet costs the
    /// stack its own pass.
    pub fn without_offloads(mut self) -> HostSpec {
        self.offloads = false;
        self
    }

    pub fn shaped(mut self, shaping: Shaping) -> HostSpec {
        self.shaping = Some(shaping);
        self
    }
}

/// A host: its namespace, address and switch port.
pub struct Host {
    pub name: String,
    pub ns: Netns,
    pub addr: Ipv4Addr,
    /// The port's name in the switch namespace.
    pub port: String,
    pub spec: HostSpec,
}

impl Host {
    /// The host's interface (toward the switch).
    pub const DEV: &'static str = "eth0";

    /// A free TCP port on the host's address (bound in its namespace, then released).
    pub fn free_port(&self) -> Result<u16> {
        let addr = self.addr;
        self.ns
            .enter(|| Ok(std::net::TcpListener::bind((addr, 0))?.local_addr()?.port()))
    }

    /// Sets a network sysctl of the host's namespace (`net.ipv4.tcp_mtu_probing`, `1`).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        anyhow::ensure!(
            key.starts_with("net."),
            "{key} is not a per-namespace sysctl"
        );
        self.ns
            .run("sysctl", &["-q", "-w", &format!("{key}={value}")])?;
        Ok(())
    }

    pub fn socket(&self, port: u16) -> SocketAddr {
        SocketAddr::from((self.addr, port))
    }
}

/// Hosts joined through a switch. Dropping it deletes the namespaces (and with them every
/// link) and releases the subnet.
pub struct Lab {
    pub hosts: Vec<Host>,
    pub switch: Netns,
    pub subnet: Subnet,
}

impl Lab {
    /// Builds the lab after checking for leftovers of earlier runs. `tag` names its
    /// namespaces (`stn-<tag>-<host>-<pid>`, `stn-<tag>-sw-<pid>`).
    pub fn new(tag: &str, hosts: &[HostSpec]) -> Result<Lab> {
        leftovers::refuse()?;
        ensure!((1..=250).contains(&hosts.len()), "a lab has 1 to 250 hosts");
        let subnet = Subnet::allocate()?;
        let switch = Netns::new(&format!("{tag}-sw"))?;
        switch.ip(&["link", "add", "br0", "type", "bridge"])?;
        let mut lab = Lab {
            hosts: Vec::new(),
            switch,
            subnet,
        };
        for (i, spec) in hosts.iter().enumerate() {
            let ns = Netns::new(&format!("{tag}-{}", spec.name))?;
            let host = Host {
                name: spec.name.clone(),
                addr: lab.subnet.addr(i as u8 + 1),
                port: format!("port-{}", spec.name),
                ns,
                spec: spec.clone(),
            };
            lab.plug(&host)?;
            lab.hosts.push(host);
        }
        lab.switch.ip(&["link", "set", "br0", "up"])?;
        for ns in lab.namespaces() {
            ns.assert_isolated()?;
        }
        Ok(lab)
    }

    /// Joins a host to the switch: a veth pair, MTUs, the port's shaping, the address.
    fn plug(&self, h: &Host) -> Result<()> {
        veth(&h.ns, Host::DEV, &self.switch, &h.port)?;
        self.switch.set_mtu(&h.port, h.spec.port_mtu)?;
        self.switch.ip(&["link", "set", &h.port, "master", "br0"])?;
        h.ns.set_mtu(Host::DEV, h.spec.mtu)?;
        if !h.spec.offloads {
            let off = ["tso", "off", "gso", "off", "gro", "off"];
            h.ns.run("ethtool", &[&["-K", Host::DEV][..], &off].concat())
                .context("turning the host's offloads off (apt-get install ethtool)")?;
            self.switch
                .run("ethtool", &[&["-K", h.port.as_str()][..], &off].concat())
                .context("turning the switch port's offloads off")?;
        }
        if let Some(s) = &h.spec.shaping {
            tbf(&self.switch, &h.port, &s.rate, &s.burst, &s.limit)
                .with_context(|| format!("shaping switch port {}", h.port))?;
        }
        h.ns.addr(Host::DEV, h.addr, 24)
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("the lab has no host {name}"))
    }

    /// Every namespace of the lab, hosts first, the switch last.
    pub fn namespaces(&self) -> Vec<&Netns> {
        let mut v: Vec<&Netns> = self.hosts.iter().map(|h| &h.ns).collect();
        v.push(&self.switch);
        v
    }

    /// Waits until `from` reaches every other host (ARP and bridge learning done), so the
    /// first IOs of a run do not pay for them.
    pub fn wait_connected(&self, from: &Host) -> Result<()> {
        for h in self.hosts.iter().filter(|h| h.name != from.name) {
            from.ns
                .run(
                    "ping",
                    &["-c", "2", "-i", "0.2", "-W", "2", &h.addr.to_string()],
                )
                .with_context(|| format!("{} does not reach {}", from.name, h.name))?;
        }
        Ok(())
    }

    /// Packets the tbf qdiscs of the shaped switch ports dropped, as `tc -s` counts them.
    pub fn port_qdisc_drops(&self) -> Result<u64> {
        let mut total = 0;
        for h in self.hosts.iter().filter(|h| h.spec.shaping.is_some()) {
            total += self.port_qdisc_dropped(h)?;
        }
        Ok(total)
    }

    /// Shapes the switch port toward `host` anew, now (a fault injected while a run goes on).
    pub fn reshape(&self, host: &Host, s: &Shaping) -> Result<()> {
        tbf(&self.switch, &host.port, &s.rate, &s.burst, &s.limit)
    }

    /// Takes the shaping off the switch port toward `host` now (the port is then as fast
    /// as the veth, with the default queue).
    pub fn unshape(&self, host: &Host) -> Result<()> {
        let shown = self.switch.tc(&["qdisc", "show", "dev", &host.port])?;
        if shown.contains("tbf") {
            self.switch
                .tc(&["qdisc", "del", "dev", &host.port, "root"])?;
        }
        Ok(())
    }

    /// Sets the MTU of the switch port toward `host` now (a fault injected while a run goes
    /// on: a port reconfigured below the hosts' MTU drops their larger frames, and a bridge
    /// sends no ICMP about it).
    pub fn set_port_mtu(&self, host: &Host, mtu: u32) -> Result<()> {
        self.switch.set_mtu(&host.port, mtu)
    }

    /// Packets the qdisc of the switch port toward `host` dropped (`tc -s`).
    pub fn port_qdisc_dropped(&self, host: &Host) -> Result<u64> {
        self.switch.qdisc_dropped(&host.port)
    }

    /// `rx_dropped` of every switch port (frames the port refused, e.g. above its MTU).
    pub fn port_rx_drops(&self) -> Result<u64> {
        let mut total = 0;
        for h in &self.hosts {
            total += self.switch.link_stat(&h.port, "rx_dropped")?;
        }
        Ok(total)
    }

    /// Makes host `host` drop `per_mille` of the TCP segments it receives, at random, as a
    /// lossy link or NIC would, with no queue behind the loss (nftables in its namespace);
    /// 0 removes the rule.
    pub fn lose(&self, host: &Host, per_mille: u32) -> Result<()> {
        let ns = &host.ns;
        if has_loss_table(host)? {
            ns.run("nft", &["delete", "table", "inet", LOSS_TABLE])?;
        }
        if per_mille == 0 {
            return Ok(());
        }
        ns.run("nft", &["add", "table", "inet", LOSS_TABLE])?;
        ns.run(
            "nft",
            &[
                "add",
                "chain",
                "inet",
                LOSS_TABLE,
                "input",
                "{ type filter hook input priority 0; }",
            ],
        )?;
        let rule = format!("meta l4proto tcp numgen random mod 1000 < {per_mille} counter drop");
        let mut args = vec!["add", "rule", "inet", LOSS_TABLE, "input"];
        args.extend(rule.split(' '));
        ns.run("nft", &args)?;
        Ok(())
    }

    /// Segments that `lose` dropped at `host` so far (its rule's counter; 0 without one).
    pub fn lost(&self, host: &Host) -> Result<u64> {
        if !has_loss_table(host)? {
            return Ok(0);
        }
        let out = host.ns.run("nft", &["list", "table", "inet", LOSS_TABLE])?;
        Ok(out
            .split("packets ")
            .skip(1)
            .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
            .sum())
    }
}

/// The nftables table of `Lab::lose`.
const LOSS_TABLE: &str = "stornet_loss";

fn has_loss_table(host: &Host) -> Result<bool> {
    Ok(host
        .ns
        .run("nft", &["list", "tables"])?
        .contains(LOSS_TABLE))
}
