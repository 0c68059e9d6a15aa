//! An OSD host: one OSD with bluestore straight on a lab disk (`bluestore_block_path` by the
//! data directory's `block` link; no LVM, no device-mapper), the daemon in cgroups of its
//! own (blkio for its disk's throttle, a cpu group whose quota can starve it, a v2 group
//! whose CPU pressure its agent reads), and the host's own stornet-agent.
//!
//! The disk is a loop device over a second one whose writes can be throttled, as a lab
//! node's: a throttled OSD disk then holds its requests in flight, in service, where the
//! block layer (and the agent) see them, as a slow drive would.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::cli::Clients;
use super::config::StateDir;
use super::daemon::{Daemon, in_host};
use crate::agent::AgentProcess;
use crate::cgroup::{Cgroup, CpuCgroup, UNIFIED_ROOT};
use crate::lab::{Disk, DiskSpec, Host, Throttle};

/// A write limit the device behind never reaches: the throttle exists, to be tightened.
const UNLIMITED: u64 = 1_000_000;

/// Dropped in field order: the daemon, the agent, the disk, then the cgroups.
pub struct Osd {
    pub id: u32,
    /// The lab host it runs on (its namespace and hostname).
    pub host: String,
    pub daemon: Option<Daemon>,
    pub agent: Option<AgentProcess>,
    pub disk: Disk,
    cpu: CpuCgroup,
    unified: Cgroup,
    data: PathBuf,
}

impl Osd {
    /// The disk and cgroups of OSD `id` on `host`.
    pub fn prepare(tag: &str, id: u32, host: &Host, size: u64) -> Result<Osd> {
        let tag = format!("{tag}-osd{id}");
        let disk = Disk::new(
            &tag,
            DiskSpec::new(size).slow_behind(Throttle::WriteIops(UNLIMITED)),
        )?;
        Ok(Osd {
            id,
            host: host.name.clone(),
            daemon: None,
            agent: None,
            disk,
            cpu: CpuCgroup::new(&tag)?,
            unified: Cgroup::new(UNIFIED_ROOT, "cpu.pressure", &tag)?,
            data: PathBuf::new(),
        })
    }

    pub fn name(&self) -> String {
        format!("osd.{}", self.id)
    }

    /// Registers the OSD with the mon (`ceph osd new` with a fresh key) and writes its data
    /// directory: its keyring and the `block` link to its disk.
    pub fn register(&mut self, dir: &StateDir, cli: &Clients) -> Result<String> {
        let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid")?
            .trim()
            .to_string();
        let key = tool("ceph-authtool", &["--gen-print-key"])?
            .trim()
            .to_string();
        self.data = dir.data("osd", &self.id.to_string());
        std::fs::create_dir_all(&self.data)?;
        std::os::unix::fs::symlink(self.disk.path(), self.data.join("block"))?;
        std::fs::write(
            self.data.join("keyring"),
            format!("[osd.{}]\n\tkey = {key}\n", self.id),
        )?;
        let secret = self.data.join("new.json");
        std::fs::write(&secret, format!("{{\"cephx_secret\": \"{key}\"}}"))?;
        let id = self.id.to_string();
        let secret_path = secret.to_string_lossy().into_owned();
        let got = cli.ceph(&["osd", "new", &uuid, &id, "-i", &secret_path])?;
        std::fs::remove_file(&secret)?;
        if got.trim() != id {
            bail!("ceph osd new gave id {:?}, not {id}", got.trim());
        }
        Ok(uuid)
    }

    /// `ceph-osd --mkfs`: bluestore on the disk (in the host's namespace, as the daemon).
    pub fn mkfs(&self, dir: &StateDir, host: &Host, uuid: &str) -> Result<()> {
        let conf = dir.conf();
        let id = self.id.to_string();
        let out = in_host(
            &host.ns,
            &self.host,
            "timeout",
            &[
                "-k",
                "5",
                "120",
                "ceph-osd",
                "-c",
                &conf.to_string_lossy(),
                "-i",
                &id,
                "--mkfs",
                "--osd-uuid",
                uuid,
            ],
        )
        .output()
        .context("running ceph-osd --mkfs")?;
        if !out.status.success() {
            bail!(
                "ceph-osd --mkfs of osd.{id} failed: {}{}",
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok(())
    }

    /// Starts the daemon in its host's namespace and its cgroups.
    pub fn start(&mut self, dir: &StateDir, host: &Host) -> Result<()> {
        let conf = dir.conf();
        let id = self.id.to_string();
        let mut cmd = in_host(
            &host.ns,
            &self.host,
            "ceph-osd",
            &["-f", "-c", &conf.to_string_lossy(), "-i", &id],
        );
        self.enter_on_spawn(&mut cmd)?;
        let name = self.name();
        self.daemon = Some(Daemon::spawn(
            &name,
            cmd,
            dir.log(&name),
            dir.stderr(&name),
        )?);
        Ok(())
    }

    fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        self.disk.enter_on_spawn(cmd)?;
        self.cpu.0.enter_on_spawn(cmd)?;
        self.unified.enter_on_spawn(cmd)
    }

    /// Starts the host's agent on its lab address: every collector, its block devices
    /// limited to the OSD's disk (all hosts share one kernel), its pressure read from the
    /// daemon's v2 cgroup and its throttled time from its cpu group.
    pub fn start_agent(&mut self, host: &Host) -> Result<()> {
        let config = format!(
            "[block]\ndevices_include = [{:?}]\n\n[pressure]\ncgroup = {:?}\ncpu_cgroup = {:?}\n\n\
             [net]\nmax_peers = 4096\n",
            self.disk.name(),
            self.unified.path.display().to_string(),
            self.cpu.0.path.display().to_string(),
        );
        let addr = SocketAddr::from((host.addr, host.free_port()?));
        self.agent = Some(AgentProcess::host_agent(&host.ns, addr, &config, &[])?);
        Ok(())
    }

    /// The daemon's pid (0 when it is not running).
    pub fn pid(&self) -> u32 {
        self.daemon.as_ref().map_or(0, Daemon::pid)
    }

    /// Throttles writes of the device behind the OSD's disk (its requests then wait in
    /// service); `None` lifts it.
    pub fn slow_disk(&self, writes_per_second: Option<u64>) -> Result<()> {
        self.disk
            .throttle_behind_now(Throttle::WriteIops(writes_per_second.unwrap_or(UNLIMITED)))
    }

    /// Caps the daemon at `per_mille` thousandths of one CPU; `None` lifts the cap.
    pub fn starve_cpu(&self, per_mille: Option<u64>) -> Result<()> {
        self.cpu.limit(per_mille)
    }

    /// (periods throttled, seconds throttled) of the daemon's cpu group (`cpu.stat`).
    pub fn cpu_throttled(&self) -> Result<(u64, f64)> {
        self.cpu.throttled()
    }

    /// Seconds some task of the daemon's group waited for a CPU (`cpu.pressure` some total).
    pub fn cpu_waited_seconds(&self) -> Result<f64> {
        let text = std::fs::read_to_string(self.unified.path.join("cpu.pressure"))?;
        let us = text
            .lines()
            .filter(|l| l.starts_with("some "))
            .find_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
            .context("no some total in cpu.pressure")?;
        Ok(us.parse::<f64>()? / 1e6)
    }

    /// Stops the daemon (others go on without it).
    pub fn stop(&mut self) {
        self.daemon = None;
    }
}

/// Runs a Ceph tool that needs no network (key generation) and returns its stdout.
pub fn tool(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program} (apt-get install ceph-common)"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
