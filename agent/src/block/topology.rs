//! Block device topology from sysfs: what each device is (`kind`), which devices it sits on
//! (`parent`), and for network block devices how it reaches its storage (`transport`,
//! `peer`). Exported as `stornet_block_device_info`, so that host totals can count only the
//! bottom devices and a remote device's latency can be put next to its peer's network.
//!
//! The reading is a pure function of a sysfs root ([`read`]), tested on fake trees; a file
//! that cannot be read makes a label `unknown` or empty, never a failed scrape.

use std::path::{Path, PathBuf};

use crate::host::devices::{DeviceFilter, DeviceLabels, OTHER};
use crate::model::{Collector, MetricFamily};
use metric_names::block;
use metric_names::labels::{DEVICE, KIND, PARENT, PEER, TRANSPORT};

/// `transport` of a device whose transport should be readable but is not.
pub const UNKNOWN: &str = "unknown";

/// One block device as sysfs describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    /// `MAJ:MIN` as the kernel encodes a `dev_t` (major << 20 | minor).
    pub dev: u32,
    /// `disk`, `partition`, `loop`, `md`, `dm` (or `dm-crypt`, `dm-lvm`, `dm-mpath`), `nvme`
    /// or `nbd`.
    pub kind: &'static str,
    /// The devices this one sends its IO to, by kernel name, sorted; empty for a bottom device.
    pub parents: Vec<String>,
    /// `pcie`, `tcp`, `rdma`, `fc`, `loop` (NVMe), `iscsi`, `nbd`, `unknown`, or empty for a
    /// local device.
    pub transport: String,
    /// The remote end (`198.18.0.2:4420`) where sysfs gives it (for NBD, the client process's
    /// socket), else empty.
    pub peer: String,
}

fn read_trim(path: &Path) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim().to_string())
}

/// The entries' names of a directory, sorted; none if it cannot be read.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `MAJ:MIN` → the kernel's `dev_t` encoding.
fn parse_dev(text: &str) -> Option<u32> {
    let (major, minor) = text.trim().split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    (major < (1 << 12) && minor < (1 << 20)).then_some((major << 20) | minor)
}

/// `kind` of a dm device from its `dm/uuid`, whose prefix the tool that made it sets.
fn dm_kind(uuid: &str) -> &'static str {
    [
        ("CRYPT-", "dm-crypt"),
        ("LVM-", "dm-lvm"),
        ("mpath-", "dm-mpath"),
    ]
    .iter()
    .find(|(prefix, _)| uuid.starts_with(prefix))
    .map_or("dm", |(_, kind)| kind)
}

/// `peer` from an NVMe controller's `address` (`traddr=198.18.0.2,trsvcid=4420,src_addr=…`):
/// `traddr:trsvcid` (an IPv6 address in brackets), `traddr` alone without a service id.
/// A PCIe controller's address is a PCI slot, not a peer.
pub fn nvme_peer(address: &str) -> String {
    let field = |key: &str| {
        address
            .split(',')
            .find_map(|f| f.trim().strip_prefix(key)?.strip_prefix('='))
            .filter(|v| !v.is_empty())
    };
    match (field("traddr"), field("trsvcid")) {
        (Some(a), Some(p)) if a.contains(':') && !a.contains('-') => format!("[{a}]:{p}"),
        (Some(a), Some(p)) => format!("{a}:{p}"),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    }
}

/// The path devices of NVMe multipath head `nvmeXnY` among the block devices `names`: those
/// named `nvmeXcZnY`.
fn paths_by_name(names: &[String], head: &str) -> Vec<String> {
    let Some((subsystem, ns)) = head.strip_prefix("nvme").and_then(|r| r.split_once('n')) else {
        return Vec::new();
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(subsystem) || !digits(ns) {
        return Vec::new();
    }
    names
        .iter()
        .filter(|n| {
            n.strip_prefix(&format!("nvme{subsystem}c"))
                .and_then(|r| r.split_once('n'))
                .is_some_and(|(c, rest)| digits(c) && rest == ns)
        })
        .cloned()
        .collect()
}

/// An NVMe namespace's controller transport and peer (`<dir>/device` is the controller).
fn nvme_transport(dir: &Path) -> (String, String) {
    match read_trim(&dir.join("device/transport")) {
        Some(t) if !t.is_empty() => {
            let peer = read_trim(&dir.join("device/address"))
                .map(|a| nvme_peer(&a))
                .unwrap_or_default();
            (t, peer)
        }
        _ => (UNKNOWN.to_string(), String::new()),
    }
}

/// A SCSI disk's transport: `iscsi` with the session's portal as peer when its device sits
/// under an iSCSI session, empty (local) otherwise, `unknown` if its device is unreadable.
fn scsi_transport(root: &Path, dir: &Path) -> (String, String) {
    let Ok(device) = std::fs::canonicalize(dir.join("device")) else {
        return (UNKNOWN.to_string(), String::new());
    };
    let session = device.ancestors().find_map(|a| {
        let n = a.file_name()?.to_str()?;
        n.strip_prefix("session")
            .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
            .map(str::to_string)
    });
    let Some(id) = session else {
        return (String::new(), String::new());
    };
    let connections = root.join("class/iscsi_connection");
    let peer = names_in(&connections)
        .iter()
        .filter(|c| {
            c.strip_prefix("connection")
                .and_then(|r| r.split_once(':'))
                .is_some_and(|(s, _)| s == id)
        })
        .find_map(|c| {
            let conn = connections.join(c);
            let addr = read_trim(&conn.join("persistent_address")).filter(|a| !a.is_empty())?;
            let port = read_trim(&conn.join("persistent_port")).filter(|p| !p.is_empty());
            Some(match port {
                Some(p) if addr.contains(':') => format!("[{addr}]:{p}"),
                Some(p) => format!("{addr}:{p}"),
                None => addr,
            })
        })
        .unwrap_or_default();
    ("iscsi".to_string(), peer)
}

/// A loop device's parent: the block device it is set up over (`loop/backing_file` naming
/// `/dev/<name>` of a device in sysfs). A regular file is not a parent.
fn loop_parent(root: &Path, dir: &Path) -> Option<String> {
    let backing = read_trim(&dir.join("loop/backing_file"))?;
    let name = backing.strip_prefix("/dev/")?;
    (!name.contains('/') && root.join("class/block").join(name).exists()).then(|| name.to_string())
}

/// The device `name` under `<root>/class/block`, or None if it is gone or holds no sectors
/// (a detached loop device).
fn read_one(root: &Path, proc: &Path, names: &[String], name: &str) -> Option<DeviceInfo> {
    let dir = root.join("class/block").join(name);
    let size: u64 = read_trim(&dir.join("size"))?.parse().ok()?;
    if size == 0 {
        return None;
    }
    let dev = match read_trim(&dir.join("dev")) {
        Some(d) => parse_dev(&d)?,
        // A hidden disk (an NVMe multipath path) has no number of its own.
        None => crate::host::devices::hidden_number(&dir)?,
    };
    let mut info = DeviceInfo {
        name: name.to_string(),
        dev,
        kind: "disk",
        ..DeviceInfo::default()
    };
    if dir.join("partition").exists() {
        // /sys/class/block/<part> links to …/block/<disk>/<part>.
        let disk = std::fs::canonicalize(&dir)
            .ok()?
            .parent()?
            .file_name()?
            .to_str()?
            .to_string();
        let of_disk = read_one(root, proc, names, &disk);
        info.kind = "partition";
        if let Some(d) = of_disk {
            (info.transport, info.peer) = (d.transport, d.peer);
        }
        info.parents = vec![disk];
        return Some(info);
    }
    info.parents = names_in(&dir.join("slaves"));
    if dir.join("dm").is_dir() {
        info.kind = dm_kind(&read_trim(&dir.join("dm/uuid")).unwrap_or_default());
    } else if dir.join("md").is_dir() {
        info.kind = "md";
    } else if dir.join("loop").is_dir() || name.starts_with("loop") {
        info.kind = "loop";
        info.parents.extend(loop_parent(root, &dir));
    } else if name.starts_with("nbd") {
        info.kind = "nbd";
        info.transport = "nbd".to_string();
        info.peer = super::nbd::peer(&dir, proc);
    } else if name.starts_with("nvme") {
        info.kind = "nvme";
        let mut paths = names_in(&dir.join("multipath"));
        if paths.is_empty() {
            // Some kernels list no links in `multipath/`; a head's paths carry its name.
            paths = paths_by_name(names, name);
        }
        if paths.is_empty() {
            (info.transport, info.peer) = nvme_transport(&dir);
        } else {
            // A multipath head: its IO goes down its paths, which carry the peers.
            let mut transports: Vec<String> = paths
                .iter()
                .map(|p| nvme_transport(&root.join("class/block").join(p)).0)
                .collect();
            transports.dedup();
            info.transport = match transports.as_slice() {
                [one] => one.clone(),
                _ => UNKNOWN.to_string(),
            };
            info.parents.extend(paths);
        }
    } else if name.starts_with("sd") {
        (info.transport, info.peer) = scsi_transport(root, &dir);
    }
    info.parents.sort();
    info.parents.dedup();
    Some(info)
}

/// Every block device under `<root>/class/block` (disks and partitions) with sectors, by name;
/// `proc` is procfs, where an NBD device's server is found.
pub fn read(root: &Path, proc: &Path) -> Vec<DeviceInfo> {
    let names = names_in(&root.join("class/block"));
    names
        .iter()
        .filter_map(|n| read_one(root, proc, &names, n))
        .collect()
}

/// The `stornet_block_device_info` family: one series per (device, parent), `parent=""` for a
/// bottom device. Devices the filter refuses are left out; beyond the cap, one
/// `device="other"` series stands for the rest.
pub fn family(
    devices: &[DeviceInfo],
    filter: &DeviceFilter,
    labels: &DeviceLabels,
) -> MetricFamily {
    let mut f = MetricFamily::of(&block::DEVICE_INFO);
    let mut folded = false;
    for d in devices.iter().filter(|d| filter.allows(&d.name)) {
        if !labels.named(d.dev) {
            folded = true;
            continue;
        }
        let none = [String::new()];
        let parents = if d.parents.is_empty() {
            &none[..]
        } else {
            &d.parents[..]
        };
        for p in parents {
            f.scalar(
                &[
                    (DEVICE, &d.name),
                    (PARENT, p),
                    (KIND, d.kind),
                    (TRANSPORT, &d.transport),
                    (PEER, &d.peer),
                ],
                1.0,
            );
        }
    }
    if folded {
        let labels = [
            (DEVICE, OTHER),
            (PARENT, ""),
            (KIND, ""),
            (TRANSPORT, ""),
            (PEER, ""),
        ];
        f.scalar(&labels, 1.0);
    }
    f
}

/// Reads the topology at each scrape.
pub struct Topology {
    root: PathBuf,
    proc: PathBuf,
    filter: DeviceFilter,
    labels: DeviceLabels,
}

impl Topology {
    pub fn new(root: &Path, proc: &Path, filter: DeviceFilter, max_devices: usize) -> Topology {
        Topology {
            root: root.to_path_buf(),
            proc: proc.to_path_buf(),
            filter,
            labels: DeviceLabels::new(max_devices),
        }
    }
}

impl Collector for Topology {
    fn collect(&self, out: &mut Vec<MetricFamily>) -> anyhow::Result<()> {
        let devices = read(&self.root, &self.proc);
        self.labels
            .retain(|dev| devices.iter().any(|d| d.dev == dev));
        out.push(family(&devices, &self.filter, &self.labels));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake sysfs: `/sys/devices/...` holds the device directories, `/sys/class/block/<n>`
    /// links to them as the kernel's do.
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new(tag: &str) -> FakeSys {
            let dir =
                std::env::temp_dir().join(format!("stornet-topo-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("class/block")).unwrap();
            FakeSys(dir)
        }

        fn file(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }

        fn link(&self, rel: &str, target: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            symlink(target, p).unwrap();
        }

        /// A device directory at `devices/<path>` (its last component the name), linked from
        /// class/block.
        fn device(&self, path: &str, dev: &str) -> String {
            let name = path.rsplit('/').next().unwrap();
            self.file(&format!("devices/{path}/size"), "2048\n");
            self.file(&format!("devices/{path}/dev"), &format!("{dev}\n"));
            self.link(
                &format!("class/block/{name}"),
                &format!("../../devices/{path}"),
            );
            format!("devices/{path}")
        }

        /// The devices, with procfs at `proc/`.
        fn read(&self) -> Vec<DeviceInfo> {
            read(&self.0, &self.0.join("proc"))
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn by_name<'a>(all: &'a [DeviceInfo], name: &str) -> &'a DeviceInfo {
        all.iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("{name} in {all:?}"))
    }

    fn fake(tag: &str) -> FakeSys {
        let s = FakeSys::new(tag);
        // A virtio disk with two partitions.
        s.device("pci0000:00/virtio1/block/vda", "253:0");
        let p1 = s.device("pci0000:00/virtio1/block/vda/vda1", "253:1");
        s.file(&format!("{p1}/partition"), "1\n");
        let p2 = s.device("pci0000:00/virtio1/block/vda/vda2", "253:2");
        s.file(&format!("{p2}/partition"), "2\n");
        s.link(
            "devices/pci0000:00/virtio1/block/vda/device",
            "../../../virtio1",
        );
        // Two SCSI disks and a dm-crypt device over both, and a plain dm device.
        for (n, d) in [("sdb", "8:16"), ("sdc", "8:32")] {
            s.device(
                &format!("pci0000:00/ata1/host0/target0:0:0/0:0:0:0/block/{n}"),
                d,
            );
            s.link(
                &format!("devices/pci0000:00/ata1/host0/target0:0:0/0:0:0:0/block/{n}/device"),
                "../..",
            );
        }
        let dm0 = s.device("virtual/block/dm-0", "252:0");
        s.file(&format!("{dm0}/dm/uuid"), "CRYPT-LUKS2-abc-cr\n");
        s.file(&format!("{dm0}/slaves/sdc"), "");
        s.file(&format!("{dm0}/slaves/sdb"), "");
        let dm1 = s.device("virtual/block/dm-1", "252:1");
        s.file(&format!("{dm1}/dm/uuid"), "\n");
        s.file(&format!("{dm1}/slaves/dm-0"), "");
        // A loop over a file, a loop over that loop, a detached loop.
        let l0 = s.device("virtual/block/loop0", "7:0");
        s.file(&format!("{l0}/loop/backing_file"), "/dev/shm/disk.img\n");
        let l1 = s.device("virtual/block/loop1", "7:1");
        s.file(&format!("{l1}/loop/backing_file"), "/dev/loop0\n");
        let l2 = s.device("virtual/block/loop2", "7:2");
        s.file(&format!("{l2}/size"), "0\n");
        // An md mirror.
        let md = s.device("virtual/block/md0", "9:0");
        s.file(&format!("{md}/md/level"), "raid1\n");
        s.file(&format!("{md}/slaves/sdb"), "");
        // NVMe over TCP, a multipath head over two paths, a PCIe namespace, one whose
        // controller's transport is unreadable.
        let tcp = s.device("virtual/nvme-fabrics/ctl/nvme1/nvme1n1", "259:1");
        s.file("devices/virtual/nvme-fabrics/ctl/nvme1/transport", "tcp\n");
        s.file(
            "devices/virtual/nvme-fabrics/ctl/nvme1/address",
            "traddr=198.18.0.2,trsvcid=4420,src_addr=198.18.0.1\n",
        );
        s.link(&format!("{tcp}/device"), "..");
        let head = s.device("virtual/nvme-subsystem/nvme-subsys2/nvme2n1", "259:2");
        s.link(&format!("{head}/device"), "..");
        for (c, d, addr) in [
            ("nvme2", "259:3", "198.18.0.2"),
            ("nvme3", "259:4", "198.18.0.3"),
        ] {
            let ctl = format!("devices/virtual/nvme-fabrics/ctl/{c}");
            s.file(&format!("{ctl}/transport"), "tcp\n");
            s.file(
                &format!("{ctl}/address"),
                &format!("traddr={addr},trsvcid=4420\n"),
            );
            let path = s.device(
                &format!("virtual/nvme-fabrics/ctl/{c}/{c}c{}n1", &c[4..]),
                d,
            );
            s.link(&format!("{path}/device"), "..");
            if c == "nvme3" {
                // Hidden, as newer kernels register a path: no number, a sequence number.
                std::fs::remove_file(s.0.join(format!("{path}/dev"))).unwrap();
                s.file(&format!("{path}/diskseq"), "31\n");
            }
            s.link(
                &format!("{head}/multipath/{c}c{}n1", &c[4..]),
                &format!("../../../../nvme-fabrics/ctl/{c}/{c}c{}n1", &c[4..]),
            );
        }
        // A head that lists no paths in multipath/ (as 6.1 and 6.12 show one over TCP).
        let head4 = s.device("virtual/nvme-subsystem/nvme-subsys4/nvme4n1", "259:5");
        s.link(&format!("{head4}/device"), "..");
        let ctl7 = "devices/virtual/nvme-fabrics/ctl/nvme7";
        s.file(&format!("{ctl7}/transport"), "tcp\n");
        s.file(
            &format!("{ctl7}/address"),
            "traddr=198.18.0.4,trsvcid=4420\n",
        );
        let p7 = s.device("virtual/nvme-fabrics/ctl/nvme7/nvme4c7n1", "259:6");
        s.link(&format!("{p7}/device"), "..");
        let pcie = s.device("pci0000:00/nvme/nvme0/nvme0n1", "259:0");
        s.file("devices/pci0000:00/nvme/nvme0/transport", "pcie\n");
        s.file("devices/pci0000:00/nvme/nvme0/address", "0000:01:00.0\n");
        s.link(&format!("{pcie}/device"), "..");
        s.device("virtual/block/nvme9n1", "259:9");
        // NBD, and an iSCSI disk with its connection.
        s.device("virtual/block/nbd0", "43:0");
        // A connected one, whose client process (pid 42) holds its socket.
        s.device("virtual/block/nbd1", "43:32");
        s.file("devices/virtual/block/nbd1/pid", "42\n");
        s.link("proc/42/fd/5", "socket:[7001]");
        s.file(
            "proc/42/net/tcp",
            &format!(
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                 0: {:08X}:C350 {:08X}:2A39 01 00000000:00000000 00:00000000 00000000     0        0 7001 1\n",
                u32::from_ne_bytes([198, 18, 0, 1]),
                u32::from_ne_bytes([198, 18, 0, 5])
            ),
        );
        let lun = "platform/host5/session3/target5:0:0/5:0:0:0";
        s.device(&format!("{lun}/block/sdd"), "8:48");
        s.link(&format!("devices/{lun}/block/sdd/device"), "../..");
        s.file(
            "class/iscsi_connection/connection3:0/persistent_address",
            "198.18.0.9\n",
        );
        s.file(
            "class/iscsi_connection/connection3:0/persistent_port",
            "3260\n",
        );
        // A SCSI disk whose device link is gone.
        s.device("virtual/block/sde", "8:64");
        s
    }

    #[test]
    fn reads_kinds_parents_and_transports() {
        let s = fake("kinds");
        let all = s.read();
        let info = |n: &str| {
            let d = by_name(&all, n);
            (
                d.kind,
                d.parents.join(","),
                d.transport.as_str(),
                d.peer.as_str(),
            )
        };
        assert_eq!(info("vda"), ("disk", "".into(), "", ""));
        assert_eq!(info("vda1"), ("partition", "vda".into(), "", ""));
        assert_eq!(info("vda2"), ("partition", "vda".into(), "", ""));
        assert_eq!(info("sdb"), ("disk", "".into(), "", ""));
        assert_eq!(info("dm-0"), ("dm-crypt", "sdb,sdc".into(), "", ""));
        assert_eq!(info("dm-1"), ("dm", "dm-0".into(), "", ""));
        assert_eq!(info("md0"), ("md", "sdb".into(), "", ""));
        assert_eq!(
            info("loop0"),
            ("loop", "".into(), "", ""),
            "a file is no parent"
        );
        assert_eq!(info("loop1"), ("loop", "loop0".into(), "", ""));
        assert!(all.iter().all(|d| d.name != "loop2"), "detached");
        assert_eq!(
            info("nvme1n1"),
            ("nvme", "".into(), "tcp", "198.18.0.2:4420")
        );
        assert_eq!(
            info("nvme2n1"),
            ("nvme", "nvme2c2n1,nvme3c3n1".into(), "tcp", "")
        );
        assert_eq!(
            info("nvme3c3n1"),
            ("nvme", "".into(), "tcp", "198.18.0.3:4420")
        );
        assert_eq!(info("nvme4n1"), ("nvme", "nvme4c7n1".into(), "tcp", ""));
        assert_eq!(
            info("nvme4c7n1"),
            ("nvme", "".into(), "tcp", "198.18.0.4:4420")
        );
        assert_eq!(info("nvme0n1"), ("nvme", "".into(), "pcie", ""));
        assert_eq!(info("nvme9n1"), ("nvme", "".into(), "unknown", ""));
        assert_eq!(info("nbd0"), ("nbd", "".into(), "nbd", ""));
        assert_eq!(info("nbd1"), ("nbd", "".into(), "nbd", "198.18.0.5:10809"));
        assert_eq!(info("sdd"), ("disk", "".into(), "iscsi", "198.18.0.9:3260"));
        assert_eq!(info("sde"), ("disk", "".into(), "unknown", ""));
        assert_eq!(by_name(&all, "loop1").dev, (7 << 20) | 1);
        assert_eq!(
            by_name(&all, "nvme3c3n1").dev,
            crate::host::devices::hidden_dev(31)
        );
    }

    /// Before 5.15 a hidden path has neither a number nor a sequence number: it is named
    /// by its name, as the probes name it.
    #[test]
    fn a_hidden_path_without_a_sequence_number_is_read_by_name() {
        let s = FakeSys::new("hidden-old");
        let path = s.device("virtual/nvme-fabrics/ctl/nvme2/nvme2c2n1", "259:7");
        std::fs::remove_file(s.0.join(format!("{path}/dev"))).unwrap();
        let all = s.read();
        assert_eq!(
            by_name(&all, "nvme2c2n1").dev,
            (agent_common::block::HIDDEN_MAJOR << 20)
                | crate::host::devices::name_minor("nvme2c2n1")
        );
    }

    #[test]
    fn a_partition_takes_its_disks_transport() {
        let s = fake("part");
        let p = s.device("virtual/nvme-fabrics/ctl/nvme1/nvme1n1/nvme1n1p1", "259:10");
        s.file(&format!("{p}/partition"), "1\n");
        let all = s.read();
        let d = by_name(&all, "nvme1n1p1");
        assert_eq!(
            (d.kind, d.parents.as_slice()),
            ("partition", &["nvme1n1".to_string()][..])
        );
        assert_eq!(
            (d.transport.as_str(), d.peer.as_str()),
            ("tcp", "198.18.0.2:4420")
        );
    }

    #[test]
    fn nvme_addresses() {
        assert_eq!(
            nvme_peer("traddr=198.18.0.2,trsvcid=4420,src_addr=198.18.0.1"),
            "198.18.0.2:4420"
        );
        assert_eq!(nvme_peer("traddr=fd00::2,trsvcid=4420"), "[fd00::2]:4420");
        assert_eq!(
            nvme_peer("traddr=nn-0x1000:pn-0x2000,host_traddr=nn-0x3:pn-0x4"),
            "nn-0x1000:pn-0x2000"
        );
        assert_eq!(nvme_peer("0000:01:00.0"), "");
        assert_eq!(nvme_peer(""), "");
    }

    #[test]
    fn an_unreadable_tree_is_empty_not_an_error() {
        assert!(
            read(
                Path::new("/nonexistent/sys"),
                Path::new("/nonexistent/proc")
            )
            .is_empty()
        );
        let s = FakeSys::new("broken");
        // Neither size nor dev readable; a dangling link.
        s.link("class/block/sdz", "../../devices/gone/sdz");
        let bad = s.device("virtual/block/loop5", "7:5");
        s.file(&format!("{bad}/dev"), "garbage\n");
        assert!(s.read().is_empty());
    }

    fn series(f: &MetricFamily) -> Vec<String> {
        f.series
            .iter()
            .map(|s| {
                let l: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                l.join(",")
            })
            .collect()
    }

    #[test]
    fn one_series_per_parent_filtered_and_capped() {
        let s = fake("series");
        let all = s.read();
        let filter = DeviceFilter {
            include: vec!["vda*".into(), "dm-*".into()],
            exclude: vec!["vda2".into()],
        };
        let f = family(&all, &filter, &DeviceLabels::new(64));
        assert_eq!(
            series(&f),
            [
                "device=dm-0,parent=sdb,kind=dm-crypt,transport=,peer=",
                "device=dm-0,parent=sdc,kind=dm-crypt,transport=,peer=",
                "device=dm-1,parent=dm-0,kind=dm,transport=,peer=",
                "device=vda,parent=,kind=disk,transport=,peer=",
                "device=vda1,parent=vda,kind=partition,transport=,peer=",
            ]
        );
        let labels = DeviceLabels::new(2);
        let f = family(&all, &filter, &labels);
        assert_eq!(
            series(&f),
            [
                "device=dm-0,parent=sdb,kind=dm-crypt,transport=,peer=",
                "device=dm-0,parent=sdc,kind=dm-crypt,transport=,peer=",
                "device=dm-1,parent=dm-0,kind=dm,transport=,peer=",
                "device=other,parent=,kind=,transport=,peer=",
            ]
        );
        assert!(
            f.series
                .iter()
                .all(|s| matches!(s.value, crate::model::Value::Scalar(v) if v == 1.0))
        );
    }
}
