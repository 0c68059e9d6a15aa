//! Network namespaces as test hosts, veth links, bridges and tbf shaping.
//!
//! Safety rules: every namespace this module makes has the `stn-` prefix, loopback and the
//! links a test adds, addresses from 198.18.0.0/15 only, and no default route; traffic
//! commands run only inside such namespaces. Everything is removed on drop.

use std::fs::{File, OpenOptions};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Output};

use anyhow::{Context, Result, bail, ensure};

/// The prefix of every namespace the harness creates (`cargo xtask lab clean` removes them).
pub const PREFIX: &str = "stn-";
const LOCK_DIR: &str = "/run/stornet-lab";

fn check(out: Output, what: &str) -> Result<String> {
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip <args>` in the root namespace (only for namespace management and `ip -n`).
pub fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    check(out, &format!("ip {}", args.join(" ")))
}

/// A /24 from 198.18.0.0/15 that no other test process holds (an flock'd file, released
/// when this value drops or the process dies).
pub struct Subnet {
    pub index: u16,
    _lock: File,
}

impl Subnet {
    pub fn allocate() -> Result<Subnet> {
        std::fs::create_dir_all(LOCK_DIR)?;
        let start = (std::process::id() % 512) as u16;
        for i in 0..512u16 {
            let index = (start + i) % 512;
            let f = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .open(format!("{LOCK_DIR}/subnet-{index}.lock"))?;
            // SAFETY: flock on an fd we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Subnet { index, _lock: f });
            }
        }
        bail!("all 512 lab subnets of 198.18.0.0/15 are in use")
    }

    /// Host address `host` (1..=254) in this /24.
    pub fn addr(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(
            198,
            18 + (self.index / 256) as u8,
            (self.index % 256) as u8,
            host,
        )
    }
}

/// True for addresses of 198.18.0.0/15, the only ones lab traffic may use.
pub fn is_lab_addr(a: Ipv4Addr) -> bool {
    let o = a.octets();
    o[0] == 198 && (o[1] == 18 || o[1] == 19)
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates `stn-<tag>-<pid>` with loopback up. Refuses a name that already exists.
    pub fn new(tag: &str) -> Result<Netns> {
        let name = format!("{PREFIX}{tag}-{}", std::process::id());
        ensure!(name.len() <= 64, "namespace name {name} too long");
        ip(&["netns", "add", &name]).with_context(|| format!("creating namespace {name}"))?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// `ip -n <ns> <args>`.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// A command that runs inside this namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `f` on a new thread that has entered this namespace (`setns` moves only the
    /// calling thread), so a test can open sockets there without a helper process.
    pub fn spawn<T, F>(&self, f: F) -> std::thread::JoinHandle<Result<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T> + Send + 'static,
    {
        let path = self.path();
        std::thread::spawn(move || {
            enter_current_thread(&path)?;
            f()
        })
    }

    /// Runs `f` on a thread that has entered this namespace and waits for it; sockets `f`
    /// opens belong to the namespace and may then be used from any thread.
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
        in_namespace(&self.path(), f)
    }

    /// `/run/netns/<name>`.
    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    /// A counter of `dev` from /sys/class/net/DEV/statistics (e.g. `rx_dropped`), as
    /// `ip -s link` shows it.
    pub fn link_stat(&self, dev: &str, field: &str) -> Result<u64> {
        let path = format!("/sys/class/net/{dev}/statistics/{field}");
        self.run("cat", &[&path])?
            .trim()
            .parse()
            .with_context(|| format!("unreadable {path} in {}", self.name))
    }

    /// Smoothed RTTs (milliseconds) of the established TCP sockets to `peer`, as `ss -ti`
    /// prints them (`rtt:SRTT/RTTVAR`).
    pub fn ss_rtts_ms(&self, peer: Ipv4Addr) -> Result<Vec<f64>> {
        let out = self.run(
            "ss",
            &["-tin", "state", "established", "dst", &peer.to_string()],
        )?;
        Ok(ss_rtts(&out))
    }

    /// Runs a program inside the namespace and returns its stdout.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String> {
        let out = self.command(program).args(args).output()?;
        check(
            out,
            &format!("{program} {} in {}", args.join(" "), self.name),
        )
    }

    /// `tc <args>` inside the namespace.
    pub fn tc(&self, args: &[&str]) -> Result<String> {
        self.run("tc", args)
    }

    /// Adds an address from the lab range to `dev` and brings it up.
    pub fn addr(&self, dev: &str, addr: Ipv4Addr, prefix: u8) -> Result<()> {
        ensure!(is_lab_addr(addr), "{addr} is outside 198.18.0.0/15");
        self.ip(&["addr", "add", &format!("{addr}/{prefix}"), "dev", dev])?;
        self.ip(&["link", "set", dev, "up"])?;
        Ok(())
    }

    pub fn set_mtu(&self, dev: &str, mtu: u32) -> Result<()> {
        self.ip(&["link", "set", dev, "mtu", &mtu.to_string()])
            .map(drop)
    }

    /// Refuses to go on unless the namespace has no default route and only lab or loopback
    /// addresses: lab traffic can then never leave the machine.
    pub fn assert_isolated(&self) -> Result<()> {
        let routes = self.ip(&["route", "show", "default"])?;
        ensure!(
            routes.trim().is_empty(),
            "{} has a default route: {routes}",
            self.name
        );
        let addrs = self.ip(&["-4", "-o", "addr", "show"])?;
        for line in addrs.lines() {
            let a = line
                .split_whitespace()
                .skip_while(|w| *w != "inet")
                .nth(1)
                .and_then(|c| c.split('/').next())
                .and_then(|a| a.parse::<Ipv4Addr>().ok())
                .with_context(|| format!("unreadable address line {line:?}"))?;
            ensure!(
                a.is_loopback() || is_lab_addr(a),
                "{} holds {a}, outside the lab range",
                self.name
            );
        }
        Ok(())
    }

    /// A field of the `Tcp:` line of this namespace's /proc/net/snmp (e.g. `RetransSegs`).
    pub fn snmp_tcp(&self, field: &str) -> Result<u64> {
        snmp_field(&self.run("cat", &["/proc/net/snmp"])?, "Tcp:", field)
    }

    /// A counter of `dev` as `ip -s link` prints it: `dir` is `rx` or `tx`, `field` e.g.
    /// `bytes` or `packets` (from its JSON form).
    pub fn ip_link_stat(&self, dev: &str, dir: &str, field: &str) -> Result<u64> {
        let out = self.ip(&["-j", "-s", "link", "show", "dev", dev])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).with_context(|| format!("ip -j output {out:?}"))?;
        v[0]["stats64"][dir][field]
            .as_u64()
            .with_context(|| format!("no {dir} {field} of {dev} in ip -s link: {out}"))
    }

    /// A field of the `TcpExt:` lines of this namespace's /proc/net/netstat (e.g.
    /// `TCPDeliveredCE`).
    pub fn netstat_tcp_ext(&self, field: &str) -> Result<u64> {
        snmp_field(&self.run("cat", &["/proc/net/netstat"])?, "TcpExt:", field)
    }

    /// `tc -s -j qdisc show dev DEV`: the qdiscs of `dev` with their options and
    /// statistics, as tc's JSON (rates in bytes per second, `bytes` and `packets` sent).
    pub fn tc_qdiscs(&self, dev: &str) -> Result<serde_json::Value> {
        let out = self.tc(&["-s", "-j", "qdisc", "show", "dev", dev])?;
        serde_json::from_str(&out).with_context(|| format!("tc -j output {out:?}"))
    }

    /// The `dropped` count of a qdisc on `dev` as `tc -s qdisc show` prints it.
    pub fn qdisc_dropped(&self, dev: &str) -> Result<u64> {
        let out = self.tc(&["-s", "qdisc", "show", "dev", dev])?;
        let mut total = 0;
        for line in out.lines() {
            if let Some(rest) = line.split("dropped ").nth(1) {
                total += rest
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .context("unreadable tc dropped count")?;
            }
        }
        Ok(total)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace removes its links (and veth peers elsewhere).
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// The `rtt:SRTT/RTTVAR` values (SRTT, ms) in `ss -ti` output.
pub fn ss_rtts(text: &str) -> Vec<f64> {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix("rtt:"))
        .filter_map(|v| v.split('/').next()?.parse().ok())
        .collect()
}

/// Runs `f` on a thread that has entered the network namespace at `path` and waits for it.
pub fn in_namespace<T: Send>(path: &str, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_current_thread(path)?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("thread in {path} panicked"))?
    })
}

/// Moves the calling thread into the network namespace at `path`.
fn enter_current_thread(path: &str) -> Result<()> {
    let ns = File::open(path).with_context(|| format!("opening {path}"))?;
    // SAFETY: setns(2) on an fd we own; it moves only the calling thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("entering {path}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads `field` from the `prefix` line pair of /proc/net/snmp text.
pub fn snmp_field(snmp: &str, prefix: &str, field: &str) -> Result<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with(prefix));
    let names = lines.next().context("no header line")?;
    let values = lines.next().context("no value line")?;
    let i = names
        .split_whitespace()
        .position(|n| n == field)
        .with_context(|| format!("no {prefix} {field} in /proc/net/snmp"))?;
    values
        .split_whitespace()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("unreadable {prefix} {field}"))
}

/// Joins `a` and `b` with a veth pair (`a_dev` in `a`, `b_dev` in `b`). Created inside the
/// namespaces, so names never collide with the root namespace.
pub fn veth(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str) -> Result<()> {
    a.ip(&[
        "link", "add", a_dev, "type", "veth", "peer", "name", b_dev, "netns", &b.name,
    ])?;
    a.ip(&["link", "set", a_dev, "up"])?;
    b.ip(&["link", "set", b_dev, "up"])?;
    Ok(())
}

/// Shapes `dev` in `ns` with tbf: `rate` (e.g. "200mbit"), `burst` and `limit` (the buffer
/// depth, e.g. "16kb" for a shallow switch, "4mb" for a deep one).
pub fn tbf(ns: &Netns, dev: &str, rate: &str, burst: &str, limit: &str) -> Result<()> {
    ns.tc(&[
        "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", burst, "limit", limit,
    ])
    .map(drop)
}

/// Two hosts joined by one veth link, addressed .1 and .2 in a fresh subnet.
pub struct HostPair {
    pub a: Netns,
    pub b: Netns,
    pub subnet: Subnet,
    /// The veth end in `a` and in `b`.
    pub a_dev: &'static str,
    pub b_dev: &'static str,
}

impl HostPair {
    pub fn new(tag: &str) -> Result<HostPair> {
        let subnet = Subnet::allocate()?;
        let a = Netns::new(&format!("{tag}-a"))?;
        let b = Netns::new(&format!("{tag}-b"))?;
        let p = HostPair {
            a,
            b,
            subnet,
            a_dev: "veth-a",
            b_dev: "veth-b",
        };
        veth(&p.a, p.a_dev, &p.b, p.b_dev)?;
        p.a.addr(p.a_dev, p.a_addr(), 24)?;
        p.b.addr(p.b_dev, p.b_addr(), 24)?;
        p.a.assert_isolated()?;
        p.b.assert_isolated()?;
        Ok(p)
    }
    pub fn a_addr(&self) -> Ipv4Addr {
        self.subnet.addr(1)
    }
    pub fn b_addr(&self) -> Ipv4Addr {
        self.subnet.addr(2)
    }
}

/// Two hosts joined through a switch: a bridge `br0` in its own namespace with one veth port
/// per host (`port-a`, `port-b`), hosts addressed .1 and .2 on `eth0`. The MTUs of the hosts'
/// links and of the switch ports are set apart, to build MTU mistakes.
pub struct SwitchedPair {
    pub a: Netns,
    pub b: Netns,
    pub switch: Netns,
    pub subnet: Subnet,
}

impl SwitchedPair {
    pub const HOST_DEV: &'static str = "eth0";
    pub const A_PORT: &'static str = "port-a";
    pub const B_PORT: &'static str = "port-b";

    pub fn new(tag: &str, host_mtu: u32, port_mtu: u32) -> Result<SwitchedPair> {
        let subnet = Subnet::allocate()?;
        let p = SwitchedPair {
            a: Netns::new(&format!("{tag}-a"))?,
            b: Netns::new(&format!("{tag}-b"))?,
            switch: Netns::new(&format!("{tag}-sw"))?,
            subnet,
        };
        p.switch.ip(&["link", "add", "br0", "type", "bridge"])?;
        for (host, port) in [(&p.a, Self::A_PORT), (&p.b, Self::B_PORT)] {
            veth(host, Self::HOST_DEV, &p.switch, port)?;
            p.switch.set_mtu(port, port_mtu)?;
            p.switch.ip(&["link", "set", port, "master", "br0"])?;
            host.set_mtu(Self::HOST_DEV, host_mtu)?;
        }
        p.switch.ip(&["link", "set", "br0", "up"])?;
        p.a.addr(Self::HOST_DEV, p.a_addr(), 24)?;
        p.b.addr(Self::HOST_DEV, p.b_addr(), 24)?;
        for ns in [&p.a, &p.b, &p.switch] {
            ns.assert_isolated()?;
        }
        Ok(p)
    }
    pub fn a_addr(&self) -> Ipv4Addr {
        self.subnet.addr(1)
    }
    pub fn b_addr(&self) -> Ipv4Addr {
        self.subnet.addr(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_range() {
        assert!(is_lab_addr("198.18.0.1".parse().unwrap()));
        assert!(is_lab_addr("198.19.255.254".parse().unwrap()));
        assert!(!is_lab_addr("198.20.0.1".parse().unwrap()));
        assert!(!is_lab_addr("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn ss_rtt_parsing() {
        let t = "ESTAB 0 0 198.18.0.1:33086 198.18.0.2:5201\n\t bbr wscale:10,10 rto:204 \
                 rtt:0.079/0.048 ato:40 mss:8948 minrtt:0.014\nESTAB 0 0 a b\n\t rtt:1.5/0.2 x\n";
        assert_eq!(ss_rtts(t), [0.079, 1.5]);
    }

    #[test]
    fn snmp_parsing() {
        let t = "Ip: Forwarding X\nIp: 1 2\nTcp: RtoAlgorithm RetransSegs\nTcp: 1 42\n";
        assert_eq!(snmp_field(t, "Tcp:", "RetransSegs").unwrap(), 42);
        assert!(snmp_field(t, "Tcp:", "Nope").is_err());
    }
}
