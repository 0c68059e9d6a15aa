//! `cargo xtask lab ceph`: a Ceph cluster in the lab for a person to try, until Ctrl-C.
//! `cargo xtask lab clean`: removes what killed lab runs and tests left behind (namespaces,
//! loop devices, cgroups, files in /dev/shm, processes in them) and nothing else: only
//! things named by the harness whose creating process is gone (see
//! `stornet_lab::lab::leftovers`).

use anyhow::{Result, bail};
use stornet_lab::ceph::{CephLab, CephSpec};
use stornet_lab::lab::{interrupt, leftovers};

pub fn clean() -> Result<()> {
    if !crate::cmd::is_root() {
        bail!("removing namespaces, loop devices and cgroups needs root");
    }
    let found = leftovers::find();
    if found.is_empty() {
        println!("no lab leftovers: nothing to remove");
        return Ok(());
    }
    let (done, failed) = found.remove();
    for d in &done {
        println!("{d}");
    }
    for f in &failed {
        eprintln!("could not remove: {f}");
    }
    if !failed.is_empty() {
        bail!("{} leftover(s) could not be removed", failed.len());
    }
    println!("removed {} leftover(s)", done.len());
    Ok(())
}

/// `cargo xtask lab ceph`: a Ceph cluster on lab hosts for a person to try, until Ctrl-C.
pub fn ceph(osds: usize, skip_setup: bool) -> Result<()> {
    if !crate::cmd::is_root() {
        bail!("the Ceph lab builds namespaces, loop devices and cgroups: run it as root");
    }
    if !skip_setup {
        crate::setup::setup()?;
    }
    crate::cmd::step("build stornet-agent, loadgen and stornet", || {
        crate::cmd::run(crate::cmd::cargo().args(["build", "--release", "--bins"]))
    })?;
    interrupt::install()?;
    let spec = CephSpec {
        osds,
        ..CephSpec::default()
    };
    let c = crate::cmd::step("bring up the Ceph lab", || CephLab::new("lab", spec))?;
    print!("{}", describe(&c));
    println!("\nCtrl-C removes the cluster and everything it made.");
    while !interrupt::interrupted() {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    println!("removing the Ceph lab");
    let t = std::time::Instant::now();
    drop(c);
    println!("removed in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// What a person needs to use the cluster.
fn describe(c: &CephLab) -> String {
    let mon = c.mon_host();
    let mut s = format!(
        "\nCeph {} is {} (HEALTH_OK after {:.0} s)\n  mon.a and mgr.x on host {} ({})\n",
        c.fsid,
        c.health().unwrap_or_else(|e| format!("{e:#}")),
        c.bringup_s,
        mon.name,
        mon.addr
    );
    for o in &c.osds {
        let h = c.lab.host(&o.host);
        s.push_str(&format!(
            "  {} on host {} ({}), disk /dev/{}\n",
            o.name(),
            h.name,
            h.addr,
            o.disk.name()
        ));
    }
    s.push_str("\nScrape targets (reachable from the lab's namespaces only):\n");
    for (host, addr) in c.agent_targets() {
        s.push_str(&format!(
            "  stornet-agent on {host}: http://{addr}/metrics\n"
        ));
    }
    s.push_str(&format!(
        "  the mgr's exporter: http://{}/metrics\n",
        c.mgr_metrics_addr()
    ));
    if let Some(p) = &c.prometheus {
        s.push_str(&format!(
            "  Prometheus (scraping them all): http://{}\n",
            p.addr
        ));
        s.push_str(&format!(
            "\nAnalyse the last 5 minutes (from the mon host's namespace, where Prometheus runs):\n  ip netns exec {} {} analyze --prometheus http://{} --start now-5m --end now\n",
            mon.ns.name,
            crate::cmd::workspace_root()
                .join("target/release/stornet")
                .display(),
            p.addr
        ));
    }
    s.push_str(&format!(
        "\nA shell on the client host (ceph, rados, rbd, fio --ioengine=rbd):\n  {}\n  e.g. ceph -s; rados -p rbd bench 10 write --no-cleanup; rados -p rbd cleanup\n       fio --name=w --ioengine=rbd --clientname=admin --pool=rbd --rbdname=lab --rw=randwrite --bs=4k --iodepth=16 --runtime=10 --time_based\n",
        c.client_shell()
    ));
    s
}
