//! From nothing to HEALTH_OK: the lab's hosts, the configuration and keys, the mon, the mgr
//! with its exporter, the OSDs (registered one by one, bluestore made on all disks at once),
//! the `rbd` pool and image, then the agents and Prometheus. One deadline covers it all; a
//! wait that runs past it fails with the daemons' last log lines and Ceph's health detail.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use super::cli::{Clients, wait};
use super::config::{Settings, StateDir, ceph_conf, mon_addrv};
use super::daemon::{Daemon, in_host};
use super::osd::{Osd, tool};
use super::{CLIENT_HOST, CephLab, CephSpec, IMAGE, MGR_METRICS_PORT, MON_HOST, POOL};
use crate::lab::{HostSpec, Lab};
use crate::promserver::{PromConfig, PromServer};

/// The packages the lab runs (`cargo xtask setup` installs them).
pub const PROGRAMS: [&str; 6] = ["ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados", "rbd"];

/// The OSD hosts' names: `h1`, `h2`, …
pub fn osd_host_name(i: usize) -> String {
    format!("h{}", i + 1)
}

impl CephLab {
    /// Builds the cluster; `tag` names its namespaces and files.
    pub fn new(tag: &str, spec: CephSpec) -> Result<CephLab> {
        ensure!(
            (1..=16).contains(&spec.osds),
            "a lab cluster has 1 to 16 OSDs"
        );
        for p in PROGRAMS {
            ensure!(
                which(p),
                "{p} is missing (apt-get install ceph ceph-mon ceph-mgr ceph-osd ceph-common, or cargo xtask setup)"
            );
        }
        let started = Instant::now();
        let deadline = started + spec.health_timeout;
        let mut hosts = vec![HostSpec::new(MON_HOST)];
        hosts.extend((0..spec.osds).map(|i| HostSpec::new(&osd_host_name(i))));
        hosts.push(HostSpec::new(CLIENT_HOST));
        let lab = Lab::new(tag, &hosts)?;
        let dir = StateDir::new(tag)?;
        let fsid = std::fs::read_to_string("/proc/sys/kernel/random/uuid")?
            .trim()
            .to_string();
        let mon_addr = lab.host(MON_HOST).addr;
        let conf = ceph_conf(&Settings {
            fsid: &fsid,
            mon_addr,
            network: lab.subnet.addr(0),
            dir: &dir.path,
            pgs: spec.pgs,
            complaint_s: spec.complaint_s,
            osd_memory: spec.osd_memory,
        });
        std::fs::write(dir.conf(), conf)?;
        let cli = Clients::new(&lab.host(CLIENT_HOST).ns, dir.conf());
        let mut c = CephLab {
            prometheus: None,
            osds: Vec::new(),
            mgr: None,
            mon: None,
            mds: None,
            dir,
            cli,
            lab,
            fsid,
            spec,
            bringup_s: 0.0,
        };
        c.lab.wait_connected(c.mon_host())?;
        c.start_mon(deadline)?;
        c.start_mgr()?;
        c.start_osds(tag, deadline)?;
        c.create_pool()?;
        c.wait_healthy(deadline)?;
        c.bringup_s = started.elapsed().as_secs_f64();
        if c.spec.agents {
            for o in &mut c.osds {
                o.start_agent(c.lab.host(&o.host.clone()))?;
            }
        }
        if c.spec.prometheus {
            c.start_prometheus()?;
        }
        Ok(c)
    }

    /// Keys, the monmap, `ceph-mon --mkfs` (inside the mon's namespace: outside it the mon
    /// finds none of its addresses), the daemon, and a first answer.
    fn start_mon(&mut self, deadline: Instant) -> Result<()> {
        let d = &self.dir;
        let mon_keyring = d.path.join("mon.keyring");
        let (mk, ak) = (
            mon_keyring.to_string_lossy().into_owned(),
            d.admin_keyring().to_string_lossy().into_owned(),
        );
        tool(
            "ceph-authtool",
            &[
                "--create-keyring",
                &mk,
                "--gen-key",
                "-n",
                "mon.",
                "--cap",
                "mon",
                "allow *",
            ],
        )?;
        tool(
            "ceph-authtool",
            &[
                "--create-keyring",
                &ak,
                "--gen-key",
                "-n",
                "client.admin",
                "--cap",
                "mon",
                "allow *",
                "--cap",
                "osd",
                "allow *",
                "--cap",
                "mds",
                "allow *",
                "--cap",
                "mgr",
                "allow *",
            ],
        )?;
        tool("ceph-authtool", &[&mk, "--import-keyring", &ak])?;
        let monmap = d.path.join("monmap").to_string_lossy().into_owned();
        let addrv = mon_addrv(self.mon_host().addr);
        tool(
            "monmaptool",
            &[
                "--create", "--fsid", &self.fsid, "--addv", "a", &addrv, &monmap,
            ],
        )?;
        let data = d.data("mon", "a");
        std::fs::create_dir_all(&data)?;
        let conf = d.conf().to_string_lossy().into_owned();
        let host = self.mon_host();
        let out = in_host(
            &host.ns,
            MON_HOST,
            "ceph-mon",
            &[
                "-c",
                &conf,
                "--mkfs",
                "-i",
                "a",
                "--monmap",
                &monmap,
                "--keyring",
                &mk,
            ],
        )
        .output()?;
        if !out.status.success() {
            bail!(
                "ceph-mon --mkfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::fs::copy(&mon_keyring, data.join("keyring"))?;
        let cmd = in_host(
            &host.ns,
            MON_HOST,
            "ceph-mon",
            &["-f", "-c", &conf, "-i", "a"],
        );
        self.mon = Some(Daemon::spawn(
            "mon.a",
            cmd,
            d.log("mon.a"),
            d.stderr("mon.a"),
        )?);
        let cli = self.cli.clone();
        wait(
            "the mon answers",
            remaining(deadline),
            || Ok(cli.ceph(&["mon", "stat"]).is_ok()),
            || self.logs(30),
        )
    }

    /// The mgr's key and its exporter's settings (before it starts: the module is enabled
    /// from the start, on the mon host's address only), then the daemon.
    fn start_mgr(&mut self) -> Result<()> {
        let data = self.dir.data("mgr", "x");
        std::fs::create_dir_all(&data)?;
        let keyring = data.join("keyring").to_string_lossy().into_owned();
        let mon = self.mon_host().addr.to_string();
        let port = MGR_METRICS_PORT.to_string();
        self.cli.ceph(&[
            "auth",
            "get-or-create",
            "mgr.x",
            "mon",
            "allow profile mgr",
            "osd",
            "allow *",
            "mds",
            "allow *",
            "-o",
            &keyring,
        ])?;
        for (k, v) in [
            ("mgr/prometheus/server_addr", mon.as_str()),
            ("mgr/prometheus/server_port", port.as_str()),
            ("mgr/prometheus/scrape_interval", "5"),
            ("mgr/devicehealth/enable_monitoring", "false"),
        ] {
            self.cli.ceph(&["config", "set", "mgr", k, v, "--force"])?;
        }
        let conf = self.dir.conf().to_string_lossy().into_owned();
        let cmd = in_host(
            &self.mon_host().ns,
            MON_HOST,
            "ceph-mgr",
            &["-f", "-c", &conf, "-i", "x"],
        );
        self.mgr = Some(Daemon::spawn(
            "mgr.x",
            cmd,
            self.dir.log("mgr.x"),
            self.dir.stderr("mgr.x"),
        )?);
        Ok(())
    }

    /// One OSD per OSD host: disks made one after the other (`losetup --find` races),
    /// registered with the mon, bluestore made on all of them at once, then started.
    fn start_osds(&mut self, tag: &str, deadline: Instant) -> Result<()> {
        for i in 0..self.spec.osds {
            let host = self.lab.host(&osd_host_name(i));
            let osd = Osd::prepare(tag, i as u32, host, self.spec.osd_size)?;
            self.osds.push(osd);
        }
        let mut uuids = Vec::new();
        for o in &mut self.osds {
            uuids.push(o.register(&self.dir, &self.cli)?);
        }
        std::thread::scope(|s| {
            let jobs: Vec<_> = self
                .osds
                .iter()
                .zip(&uuids)
                .map(|(o, uuid)| {
                    let host = self.lab.host(&o.host);
                    let dir = &self.dir;
                    s.spawn(move || o.mkfs(dir, host, uuid))
                })
                .collect();
            jobs.into_iter()
                .try_for_each(|j| j.join().map_err(|_| anyhow::anyhow!("mkfs panicked"))?)
        })?;
        for o in &mut self.osds {
            o.start(&self.dir, self.lab.host(&o.host.clone()))?;
        }
        let n = self.osds.len() as u64;
        let cli = self.cli.clone();
        wait(
            &format!("{n} OSDs up"),
            remaining(deadline),
            || Ok(cli.ceph_json(&["osd", "stat"])?["num_up_osds"].as_u64() == Some(n)),
            || self.logs(30),
        )
    }

    /// The `rbd` pool (size 3, min 2, or fewer with fewer OSDs; a fixed number of PGs) and
    /// the image the fio clients use.
    fn create_pool(&self) -> Result<()> {
        let pgs = self.spec.pgs.to_string();
        let size = self.spec.osds.min(3);
        let min = if size >= 3 { 2 } else { 1 };
        let (size, min) = (size.to_string(), min.to_string());
        let c = &self.cli;
        c.ceph(&["osd", "pool", "create", POOL, &pgs, &pgs, "replicated"])?;
        c.ceph(&[
            "osd",
            "pool",
            "set",
            POOL,
            "size",
            &size,
            "--yes-i-really-mean-it",
        ])?;
        c.ceph(&["osd", "pool", "set", POOL, "min_size", &min])?;
        c.ceph(&["osd", "pool", "application", "enable", POOL, "rbd"])?;
        let limit = Duration::from_secs(60);
        c.run(limit, "rbd", &["pool", "init", POOL])?;
        let mib = format!("{}M", self.spec.image_size >> 20);
        c.run(
            limit,
            "rbd",
            &["create", "--size", &mib, &format!("{POOL}/{IMAGE}")],
        )?;
        Ok(())
    }

    /// Waits for the mgr's exporter to answer and for HEALTH_OK.
    fn wait_healthy(&self, deadline: Instant) -> Result<()> {
        let addr = self.mgr_metrics_addr();
        let ns = self.mon_host().ns.path();
        wait(
            "the mgr's prometheus exporter answers",
            remaining(deadline),
            || {
                let get = || crate::metrics::http_get(addr, "/metrics");
                Ok(matches!(crate::netns::in_namespace(&ns, get), Ok((200, _))))
            },
            || self.logs(30),
        )?;
        wait(
            "HEALTH_OK",
            remaining(deadline),
            || Ok(self.cli.health()? == "HEALTH_OK"),
            || format!("{}\n{}", self.cli.health_detail(), self.logs(30)),
        )
    }

    /// Prometheus on the mon host: the agents every 2 s (each target labelled with its
    /// OSD host, as `hostname` names it in the mgr's metrics) and the mgr every 5 s (its
    /// module refreshes that often), with the mgr's own `instance` labels kept.
    fn start_prometheus(&mut self) -> Result<()> {
        let mut jobs = String::from(
            "  - job_name: stornet\n    scrape_interval: 2s\n    scrape_timeout: 2s\n    static_configs:\n",
        );
        for (host, addr) in self.agent_targets() {
            jobs.push_str(&format!(
                "      - targets: ['{addr}']\n        labels:\n          host: {host}\n"
            ));
        }
        jobs.push_str(&format!(
            "  - job_name: ceph\n    honor_labels: true\n    scrape_interval: 5s\n    scrape_timeout: 5s\n    static_configs:\n      - targets: ['{}']\n",
            self.mgr_metrics_addr()
        ));
        let mon = self.mon_host();
        let addr = SocketAddr::from((mon.addr, mon.free_port()?));
        let mut cfg = PromConfig::scrape(&format!("ceph-{}", self.lab.subnet.index), &jobs);
        cfg.interval_s = 2;
        let prom = PromServer::start_in(&cfg, &mon.ns, addr)?;
        let want = self.agent_targets().len() + 1;
        prom.wait_for("up == 1", Duration::from_secs(60), |r| r.len() == want)
            .context("Prometheus scrapes every agent and the mgr")?;
        self.prometheus = Some(prom);
        Ok(())
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}
