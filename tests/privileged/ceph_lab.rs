//! A real Ceph cluster (Debian's packages) in the lab: it comes to HEALTH_OK, clients
//! stornet did not write (`rados bench`, fio's rbd engine) do IO, the agents on the OSD hosts
//! count the OSDs' writes and their TCP connections as the kernel does, Prometheus scrapes
//! the agents and the mgr, the mgr exports the metrics stornet reads, each lab fault moves
//! its independent count, and nothing is left once the lab is dropped.

use std::time::Instant;

use stornet_lab::blockdev::DiskStat;
use stornet_lab::ceph::{CephLab, CephSpec, RadosBench};
use stornet_lab::privilege::{require_root, require_tool};

/// Fails under CI, skips otherwise, when the machine cannot run the lab.
fn can_run(test: &str) -> bool {
    require_root(test)
        && ["ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados", "rbd", "fio", "prometheus"]
            .iter()
            .all(|t| require_tool(test, t))
}

#[test]
fn ceph_lab_explore() {
    if !can_run("ceph_lab_explore") {
        return;
    }
    let t = Instant::now();
    let c = CephLab::new("cephx", CephSpec::default()).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("up in {:.1} s ({:.1})", c.bringup_s, t.elapsed().as_secs_f64());
    eprintln!("{}", c.health().unwrap());
    let loops: Vec<String> = c.osds.iter().map(|o| o.disk.name().to_string()).collect();
    let s0: Vec<DiskStat> = loops.iter().map(|l| DiskStat::read(l).unwrap()).collect();
    let r = c.rados_bench(&RadosBench::writes(10)).unwrap();
    eprintln!("{r:?}");
    let s1: Vec<DiskStat> = loops.iter().map(|l| DiskStat::read(l).unwrap()).collect();
    for i in 0..loops.len() {
        eprintln!("{} writes {}", loops[i], s1[i].write_ios - s0[i].write_ios);
    }
    let m = c.mgr_scrape().unwrap();
    let mut names: Vec<String> = m.iter().map(|s| {
        let mut l: Vec<String> = s.labels.iter().map(|(k, _)| k.clone()).collect();
        l.sort();
        format!("{} {{{}}}", s.name, l.join(","))
    }).collect();
    names.sort();
    names.dedup();
    std::fs::write("/tmp/ceph-mgr-names.txt", names.join("\n")).unwrap();
    let body: Vec<String> = m.iter().filter(|s| s.name.contains("metadata") || s.name.contains("occupation")).map(|s| format!("{} {:?}", s.name, s.labels)).collect();
    eprintln!("{}", body.join("\n"));
    eprintln!("{}", c.client_shell());
    let t = Instant::now();
    drop(c);
    eprintln!("down in {:.1} s", t.elapsed().as_secs_f64());
}
