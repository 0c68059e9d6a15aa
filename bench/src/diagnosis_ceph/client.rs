//! The cases judged from a client's own latency: loadgen writing a file on CephFS (through
//! `ceph-fuse`) with an agent beside it, on a jumbo-frame network (every host, port and the
//! bridge at MTU 9000). An MTU mismatch at the switch port toward h1 stalls the client's
//! writes to osd.0 but reaches no OSD's op latency (the ops never arrive), so only the
//! client's record shows it (as in Ceph scenario 4). `stornet analyze RECORD` judges it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use stornet_lab::agent::AgentProcess;
use stornet_lab::ceph::CephLab;
use stornet_lab::ceph::cephfs::FuseMount;
use stornet_lab::lab::Workload;
use stornet_lab::lab::run::{Outcome, device_run};

/// Seconds of the client's run before the fault, with it, and after it: the stalled writes
/// complete when the port is restored, and the run records them.
const HEALTHY_S: u64 = 16;
const FAULT_S: u64 = 12;
const AFTER_S: u64 = 10;
/// The MTU of the network, which the port toward h1 is set below.
const JUMBO: u32 = 9000;

/// The mount and the agent the client cases share; unmounted on drop, before the cluster.
pub struct Client<'a> {
    mount: FuseMount<'a>,
    agent: AgentProcess,
}

/// What the client saw in one case.
pub struct ClientRun {
    pub outcome: Outcome,
    /// Ceph's health at the end of the fault (or of the run, without one).
    pub health: String,
}

impl<'a> Client<'a> {
    /// Jumbo frames everywhere, then the mount and the agent (the file system must exist:
    /// [`CephLab::start_cephfs`]). Connections open before keep the segment size they
    /// agreed; the client's, made now, agree on jumbo segments.
    pub fn start(c: &'a CephLab) -> Result<Client<'a>> {
        c.set_mtu(JUMBO)?;
        let mount = c.mount_cephfs()?;
        let agent = c.client_agent()?;
        Ok(Client { mount, agent })
    }

    /// One run of 64 KiB random writes, 4 in flight, on one file of the mount; with
    /// `port_mtu`, the switch port toward `host` is at that MTU for [`FAULT_S`] after
    /// [`HEALTHY_S`] measured seconds, and back at 9000 after, whatever happened.
    pub fn run(
        &self,
        c: &CephLab,
        host: &str,
        port_mtu: Option<u32>,
        out: &Path,
        name: &str,
    ) -> Result<ClientRun> {
        let w = Workload::file_writes(&format!("{}s", HEALTHY_S + FAULT_S + AFTER_S));
        // One file for every case: laid out once, by the first.
        let file = self.mount.dir.join("lg");
        let client = c.client_host();
        let (outcome, fault) = std::thread::scope(|s| {
            let run = s.spawn(|| device_run(&c.lab, client, &self.agent, &file, &w, out, name));
            let deadline = Instant::now() + Duration::from_secs(60);
            while !file.exists() && !run.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
            }
            std::thread::sleep(Duration::from_secs(HEALTHY_S + 2));
            // The bridge drops the frames too large for the port without counting them:
            // the client's retransmits are the independent count.
            let fault = port_mtu.map(|mtu| -> Result<String> {
                let set = c.set_port_mtu(host, mtu);
                std::thread::sleep(Duration::from_secs(FAULT_S));
                let health = c.health().unwrap_or_else(|e| format!("{e:#}"));
                let restored = c.set_port_mtu(host, JUMBO);
                set.and(restored)?;
                Ok(health)
            });
            let outcome = run.join().expect("the loadgen thread");
            (outcome, fault)
        });
        let health = match fault {
            Some(f) => f.context("setting the port's MTU")?,
            None => c.health().unwrap_or_else(|e| format!("{e:#}")),
        };
        Ok(ClientRun {
            outcome: outcome?,
            health,
        })
    }
}
