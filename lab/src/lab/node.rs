//! A replica host as a storage node of its own: its replica directory on a disk of its own
//! (ext4 on a lab disk whose device behind can be slowed), its server in cgroups whose CPU
//! can be capped, and its own agent, listening on the host's lab address, that reports that
//! disk and the server's CPU pressure. With nodes, a run's record holds each replica's host,
//! and the analysis can name a replica's slow device or starved CPU.
//!
//! All hosts of a lab share one kernel: a node's agent is told which disk is its host's
//! (`block.devices_include`) and reads the pressure of the server's cgroup
//! (`pressure.cgroup`), as an agent beside a containerized storage daemon would. The
//! client's agent keeps watching every namespace's network, so node agents run the block and
//! pressure collectors only.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

use super::Host;
use super::disk::{Disk, DiskSpec, Throttle};
use crate::agent::AgentProcess;
use crate::blockdev::Mount;
use crate::cgroup::{Cgroup, CpuCgroup, UNIFIED_ROOT};

/// A limit the device behind never reaches: the throttle exists, to be tightened later.
const UNLIMITED: u64 = 1_000_000;

/// The collectors a node's agent runs.
const COLLECTORS: [&str; 5] = [
    "--collector.disable-defaults",
    "--collector.block_issue",
    "--collector.block_completion",
    "--collector.block_requeue",
    "--collector.pressure",
];

/// Dropped in field order: the agent, the file system, the disk, then the cgroups (removed
/// once the server, which the run owning this node kills first, has exited).
pub struct Node {
    pub agent: AgentProcess,
    pub name: String,
    /// Busy work inside the server's CPU limit while the CPU is starved.
    hog: Mutex<Option<Child>>,
    mount: Mount,
    pub disk: Disk,
    cpu: CpuCgroup,
    unified: Cgroup,
}

impl Node {
    /// Builds `host`'s disk, file system and cgroups and starts its agent.
    pub fn new(host: &Host) -> Result<Node> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        // Unique in this process (cgroup and mount names), as every lab name is.
        let tag = format!("node-{}{}", host.name, SEQ.fetch_add(1, Ordering::Relaxed));
        let disk = Disk::new(
            &tag,
            DiskSpec::new(2 << 30).slow_behind(Throttle::WriteIops(UNLIMITED)),
        )?;
        crate::fs::mkfs_ext4(disk.path())?;
        let mount = Mount::new(disk.path(), &tag)?;
        let cpu = CpuCgroup::new(&tag)?;
        let unified = Cgroup::new(UNIFIED_ROOT, "cpu.pressure", &tag)?;
        let config = format!(
            "[block]\ndevices_include = [{:?}]\n\n[pressure]\ncgroup = {:?}\n",
            disk.name(),
            unified.path.display().to_string(),
        );
        let addr = SocketAddr::from((host.addr, host.free_port()?));
        let agent = AgentProcess::host_agent(&host.ns, addr, &config, &COLLECTORS)?;
        Ok(Node {
            agent,
            name: host.name.clone(),
            hog: Mutex::new(None),
            mount,
            disk,
            cpu,
            unified,
        })
    }

    /// Where the replica server keeps its volumes.
    pub fn dir(&self) -> &Path {
        &self.mount.dir
    }

    /// Removes the volumes earlier runs left, so that the node's file system never fills
    /// up over many runs (each run writes volumes of its own name).
    pub fn clear_volumes(&self) -> Result<()> {
        for e in std::fs::read_dir(self.dir())? {
            let e = e?;
            if e.file_type()?.is_file() {
                std::fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }

    /// Puts the server in the node's cgroups (the disk's throttles, the CPU cap, the group
    /// whose pressure the agent reads) before it execs.
    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        self.disk.enter_on_spawn(cmd)?;
        self.cpu.0.enter_on_spawn(cmd)?;
        self.unified.enter_on_spawn(cmd)
    }

    /// `--agent NAME=URL` for loadgen.
    pub fn agent_flag(&self) -> String {
        format!("--agent={}=http://{}", self.name, self.agent.addr)
    }

    /// Starves the server of CPU now, as a storage daemon whose other work (recovery,
    /// compaction) uses up its container's CPU limit: a spinner joins the server's cgroups,
    /// capped at `per_mille` thousandths of a CPU. `None` stops the spinner, lifts the cap.
    pub fn starve_cpu(&self, per_mille: Option<u64>) -> Result<()> {
        let mut hog = self.hog.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut h) = hog.take() {
            let _ = h.kill();
            let _ = h.wait();
        }
        self.cpu.limit(per_mille)?;
        if per_mille.is_some() {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            self.cpu.0.enter_on_spawn(&mut cmd)?;
            self.unified.enter_on_spawn(&mut cmd)?;
            *hog = Some(cmd.spawn()?);
        }
        Ok(())
    }

    /// The time the server's CPU group has been throttled (its `cpu.stat`), in seconds.
    pub fn cpu_throttled_seconds(&self) -> Result<f64> {
        Ok(self.cpu.throttled()?.1)
    }

    /// The time some task of the server's group waited for a CPU (the `some` total of
    /// its `cpu.pressure`), in seconds.
    pub fn cpu_waited_seconds(&self) -> Result<f64> {
        let text = std::fs::read_to_string(self.unified.path.join("cpu.pressure"))?;
        let us = text
            .lines()
            .filter(|l| l.starts_with("some "))
            .find_map(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
            .context("no some total in cpu.pressure")?;
        Ok(us.parse::<f64>()? / 1e6)
    }

    /// Throttles writes of the device behind the node's disk now (its requests then take
    /// that long in service); `None` lifts it.
    pub fn slow_disk(&self, writes_per_second: Option<u64>) -> Result<()> {
        self.disk
            .throttle_behind_now(Throttle::WriteIops(writes_per_second.unwrap_or(UNLIMITED)))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.starve_cpu(None);
    }
}
