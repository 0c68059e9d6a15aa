//! CephFS through `ceph-fuse`: an MDS on the mon host, a file system `labfs` (metadata and
//! data pools of 8 placement groups), and a FUSE mount made from the client host's network
//! namespace but visible to the whole machine, so that a program that takes a file (loadgen,
//! fio) runs against Ceph. The kernel's own CephFS and RBD clients are not built into this
//! lab's host kernel; FUSE is.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::cli::wait;
use super::daemon::{Daemon, in_host};
use super::{CephLab, MON_HOST};
use crate::agent::AgentProcess;

/// The file system's name.
pub const FS: &str = "labfs";

impl CephLab {
    /// Starts an MDS on the mon host and creates the file system; waits until its MDS is
    /// active (60 s at most).
    pub fn start_cephfs(&mut self) -> Result<()> {
        let data = self.dir.data("mds", "a");
        std::fs::create_dir_all(&data)?;
        let keyring = data.join("keyring").to_string_lossy().into_owned();
        let c = &self.cli;
        c.ceph(&[
            "auth",
            "get-or-create",
            "mds.a",
            "mon",
            "allow profile mds",
            "osd",
            "allow rwx",
            "mds",
            "allow",
            "mgr",
            "allow profile mds",
            "-o",
            &keyring,
        ])?;
        let conf = self.dir.conf().to_string_lossy().into_owned();
        let cmd = in_host(
            &self.mon_host().ns,
            MON_HOST,
            "ceph-mds",
            &["-f", "-c", &conf, "-i", "a"],
        );
        self.mds = Some(Daemon::spawn(
            "mds.a",
            cmd,
            self.dir.log("mds.a"),
            self.dir.stderr("mds.a"),
        )?);
        let c = &self.cli;
        for pool in ["labfs_meta", "labfs_data"] {
            c.ceph(&["osd", "pool", "create", pool, "8", "8", "replicated"])?;
        }
        c.ceph(&["fs", "new", FS, "labfs_meta", "labfs_data"])?;
        wait(
            "the MDS of labfs is active",
            Duration::from_secs(60),
            || Ok(c.ceph(&["mds", "stat"])?.contains("up:active")),
            || {
                format!(
                    "{}\n{}",
                    self.cli.health_detail(),
                    self.mds.as_ref().map(|d| d.tail(30)).unwrap_or_default()
                )
            },
        )
    }

    /// Mounts the file system with `ceph-fuse` from the client host's network namespace
    /// (only that namespace: the mount is the machine's).
    pub fn mount_cephfs(&self) -> Result<FuseMount<'_>> {
        let dir = std::env::temp_dir().join(format!("stornet-mnt-cephfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", self.client_host().ns.path()))
            .args(["ceph-fuse", "-f", "-c"])
            .arg(self.dir.conf())
            .args(["--client_fs", FS])
            .arg(&dir);
        let daemon = Daemon::spawn(
            "ceph-fuse",
            cmd,
            self.dir.path.join("log/ceph-fuse.log"),
            self.dir.stderr("ceph-fuse"),
        )?;
        let mut m = FuseMount {
            daemon,
            dir,
            _lab: PhantomData,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !m.mounted() {
            if !m.daemon.running() || Instant::now() > deadline {
                bail!("ceph-fuse did not mount {FS}:\n{}", m.daemon.tail(20));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(m)
    }
}

impl CephLab {
    /// A stornet-agent on the client host, as beside an application that uses the mount:
    /// it also watches the switch's namespace (its ports' MTUs and counters, as a switch's
    /// would be read), not the OSD hosts', whose sockets would count as the client's; and
    /// it reports no block device, since every disk of this machine is an OSD's (all hosts
    /// share one kernel) and the client's IO reaches none of its own.
    pub fn client_agent(&self) -> Result<AgentProcess> {
        let client = self.client_host();
        let config = format!(
            "[block]\ndevices_exclude = [\"*\"]\n\n[net]\nmax_peers = 4096\nnamespaces = [{:?}]\n",
            self.lab.switch.name
        );
        AgentProcess::in_netns(&client.ns, &config)
    }
}

/// A CephFS mount; unmounted (and its directory removed) on drop, before its cluster.
pub struct FuseMount<'a> {
    daemon: Daemon,
    pub dir: PathBuf,
    _lab: PhantomData<&'a CephLab>,
}

impl FuseMount<'_> {
    fn mounted(&self) -> bool {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let dir = self.dir.to_string_lossy();
        mounts
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(&dir) && l.contains("fuse"))
    }

    /// `f_type` of the mount as statfs reports it (FUSE's 0x65735546).
    pub fn fs_type(&self) -> Result<i64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.dir.as_os_str().as_bytes())?;
        // SAFETY: an all-zero statfs is a valid value of the plain C struct.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: statfs writes one struct through a valid pointer; the path is NUL-terminated.
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
            return Err(std::io::Error::last_os_error()).context("statfs of the CephFS mount");
        }
        Ok(st.f_type as i64)
    }
}

impl Drop for FuseMount<'_> {
    fn drop(&mut self) {
        if self.mounted() {
            let ok = Command::new("umount")
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            }
        }
        super::daemon::stop_all(&mut [&mut self.daemon], Duration::from_secs(3));
        let _ = std::fs::remove_dir(&self.dir);
    }
}
