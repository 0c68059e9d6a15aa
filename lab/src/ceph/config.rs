//! The cluster's private directory and its `ceph.conf`. Everything a daemon or client of the
//! lab reads or writes (configuration, keyrings, the mon's store, the OSDs' data
//! directories, admin sockets, logs) lives in one directory named after the lab's process,
//! `/dev/shm/stornet-ceph-<tag>-<pid>`, so that nothing goes to /etc/ceph, /var/lib/ceph or
//! /var/log/ceph, and `cargo xtask lab clean` removes it after a `kill -9`.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::lab::leftovers::{FILE_PREFIX, SHM};

/// The cluster's directory, removed with its contents on drop.
pub struct StateDir {
    pub path: PathBuf,
}

impl StateDir {
    /// Creates `/dev/shm/stornet-ceph-<tag>-<pid>` and its subdirectories.
    pub fn new(tag: &str) -> Result<StateDir> {
        let path = PathBuf::from(format!(
            "{SHM}/{FILE_PREFIX}ceph-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        let dir = StateDir { path };
        for sub in ["sock", "log", "crash", "mon", "mgr", "osd"] {
            std::fs::create_dir(dir.path.join(sub))?;
        }
        Ok(dir)
    }

    pub fn conf(&self) -> PathBuf {
        self.path.join("ceph.conf")
    }

    pub fn admin_keyring(&self) -> PathBuf {
        self.path.join("ceph.client.admin.keyring")
    }

    /// The log file of daemon `name` (`mon.a`, `osd.0`) as the configuration names it.
    pub fn log(&self, name: &str) -> PathBuf {
        self.path.join("log").join(format!("ceph-{name}.log"))
    }

    /// What a daemon printed to stderr (errors before its log opens).
    pub fn stderr(&self, name: &str) -> PathBuf {
        self.path.join("log").join(format!("{name}.stderr"))
    }

    /// The data directory of daemon `kind.id` (`mon`, `a`).
    pub fn data(&self, kind: &str, id: &str) -> PathBuf {
        self.path.join(kind).join(format!("ceph-{id}"))
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What the configuration depends on.
pub struct Settings<'a> {
    pub fsid: &'a str,
    pub mon_addr: Ipv4Addr,
    /// The lab's /24, the public and the cluster network.
    pub network: Ipv4Addr,
    pub dir: &'a Path,
    pub pgs: u32,
    /// `osd_op_complaint_time`: how long an op runs before Ceph calls it slow (SLOW_OPS).
    pub complaint_s: u32,
    /// `osd_memory_target`, bytes.
    pub osd_memory: u64,
}

/// The subsystems whose logging is turned off.
const DEBUG_SUBSYSTEMS: [&str; 19] = [
    "ms",
    "mon",
    "paxos",
    "osd",
    "bluestore",
    "bluefs",
    "bdev",
    "rocksdb",
    "mgr",
    "mgrc",
    "monc",
    "auth",
    "objecter",
    "rados",
    "rbd",
    "filestore",
    "journal",
    "mds",
    "client",
];

/// The monitor's address vector (msgr2 and msgr1 ports).
pub fn mon_addrv(mon: Ipv4Addr) -> String {
    format!("[v2:{mon}:3300,v1:{mon}:6789]")
}

/// `ceph.conf` for the lab: every path in the private directory, addresses from the lab's
/// subnet only (IPv4, the mon at a lab address), cephx, pools of size 3 (min 2) with a fixed
/// number of placement groups, and every debug log off (on 2 CPUs the logging costs more
/// than the IO).
pub fn ceph_conf(s: &Settings) -> String {
    let d = s.dir.display();
    let mut c = String::new();
    let mut section = |name: &str, kv: &[(&str, String)]| {
        let _ = writeln!(c, "[{name}]");
        for (k, v) in kv {
            let _ = writeln!(c, "{k} = {v}");
        }
        c.push('\n');
    };
    let mut global = vec![
        ("fsid", s.fsid.to_string()),
        ("mon_host", mon_addrv(s.mon_addr)),
        ("mon_initial_members", "a".into()),
        ("public_network", format!("{}/24", s.network)),
        ("cluster_network", format!("{}/24", s.network)),
        ("ms_bind_ipv4", "true".into()),
        ("ms_bind_ipv6", "false".into()),
        ("auth_cluster_required", "cephx".into()),
        ("auth_service_required", "cephx".into()),
        ("auth_client_required", "cephx".into()),
        ("auth_allow_insecure_global_id_reclaim", "false".into()),
        ("run_dir", format!("{d}/sock")),
        ("admin_socket", format!("{d}/sock/$cluster-$name.asok")),
        ("pid_file", format!("{d}/sock/$cluster-$name.pid")),
        ("log_file", format!("{d}/log/$cluster-$name.log")),
        ("mon_cluster_log_file", format!("{d}/log/$cluster.log")),
        ("crash_dir", format!("{d}/crash")),
        ("log_to_stderr", "false".into()),
        ("err_to_stderr", "true".into()),
        ("osd_pool_default_size", "3".into()),
        ("osd_pool_default_min_size", "2".into()),
        ("osd_pool_default_pg_num", s.pgs.to_string()),
        ("osd_pool_default_pgp_num", s.pgs.to_string()),
        ("osd_pool_default_pg_autoscale_mode", "off".into()),
        // One OSD per host: replicas on distinct hosts.
        ("osd_crush_chooseleaf_type", "1".into()),
        ("mon_allow_pool_delete", "true".into()),
        ("mon_data_avail_warn", "5".into()),
        ("mon_warn_on_pool_no_redundancy", "false".into()),
        ("osd_op_complaint_time", s.complaint_s.to_string()),
        ("osd_op_history_duration", "30".into()),
    ];
    let debug: Vec<String> = DEBUG_SUBSYSTEMS
        .iter()
        .map(|sub| format!("debug_{sub}"))
        .collect();
    global.extend(debug.iter().map(|k| (k.as_str(), "0/0".to_string())));
    section("global", &global);
    section(
        "client",
        &[
            ("keyring", format!("{d}/ceph.client.admin.keyring")),
            ("admin_socket", String::new()),
            ("log_file", format!("{d}/log/client.$pid.log")),
        ],
    );
    section(
        "mon",
        &[
            ("mon_data", format!("{d}/mon/$cluster-$id")),
            ("keyring", format!("{d}/mon/$cluster-$id/keyring")),
            // The exporter from the start: enabling it later restarts the mgr.
            ("mgr_initial_modules", "prometheus".into()),
        ],
    );
    section(
        "mgr",
        &[
            ("mgr_data", format!("{d}/mgr/$cluster-$id")),
            ("keyring", format!("{d}/mgr/$cluster-$id/keyring")),
        ],
    );
    section(
        "osd",
        &[
            ("osd_data", format!("{d}/osd/$cluster-$id")),
            ("keyring", format!("{d}/osd/$cluster-$id/keyring")),
            ("osd_objectstore", "bluestore".into()),
            ("osd_memory_target", s.osd_memory.to_string()),
            ("bdev_enable_discard", "true".into()),
            ("bdev_async_discard", "true".into()),
        ],
    );
    section(
        "mds",
        &[
            ("mds_data", format!("{d}/mds/$cluster-$id")),
            ("keyring", format!("{d}/mds/$cluster-$id/keyring")),
        ],
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_in_the_private_directory_and_every_address_in_the_lab() {
        let conf = ceph_conf(&Settings {
            fsid: "f",
            mon_addr: "198.18.7.1".parse().unwrap(),
            network: "198.18.7.0".parse().unwrap(),
            dir: Path::new("/dev/shm/stornet-ceph-x-42"),
            pgs: 32,
            complaint_s: 30,
            osd_memory: 1 << 30,
        });
        assert!(conf.contains("mon_host = [v2:198.18.7.1:3300,v1:198.18.7.1:6789]"));
        assert!(conf.contains("public_network = 198.18.7.0/24"));
        assert!(conf.contains("cluster_network = 198.18.7.0/24"));
        for line in conf.lines() {
            if let Some((_, v)) = line.split_once(" = ")
                && v.starts_with('/')
            {
                assert!(v.starts_with("/dev/shm/stornet-ceph-x-42/"), "{line}");
            }
        }
        assert!(!conf.contains("/var/"), "{conf}");
        assert_eq!(conf.matches("[global]").count(), 1);
        assert!(conf.contains("debug_osd = 0/0") && conf.contains("debug_client = 0/0"));
    }
}
