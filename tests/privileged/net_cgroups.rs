//! Retransmits per cgroup (`[cgroups]`): each socket's retransmits counted for the cgroup v2
//! group that opened it. Two groups send in turn through a shallow buffer; in each phase the
//! sending group's count is all the peer's, the other group's is zero, and the namespace's
//! RetransSegs saw them. A group that goes away leaves the export.

use std::collections::BTreeSet;
use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::cgroup::{Cgroup, UNIFIED_ROOT};
use stornet_lab::metrics::Sample;
use stornet_lab::netns::{HostPair, tbf};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::listen;

use crate::net_support::{assert_up, delta, settle};

const BY_CGROUP: &str = "stornet_tcp_cgroup_retransmits_total";
const BY_PEER: &str = "stornet_tcp_retransmits_total";

fn cgroup_labels(s: &[Sample], peer: &str) -> BTreeSet<String> {
    s.iter()
        .filter(|x| x.name == BY_CGROUP && x.label("peer") == Some(peer))
        .filter_map(|x| x.label("cgroup").map(str::to_string))
        .collect()
}

/// `streams` senders of `bytes` each, from shell processes in the child group `child` of
/// `parent` inside `p.a`, to a listener in `p.b`; returns once all arrived.
fn send_from(parent: &Cgroup, child: &str, p: &HostPair, streams: usize, bytes: u64) {
    let listener = listen(&p.b, p.b_addr()).expect("listener");
    let to = listener.local_addr().unwrap();
    let mut senders = Vec::new();
    for _ in 0..streams {
        let mut cmd = p.a.command("bash");
        cmd.args([
            "-c",
            &format!(
                "head -c {bytes} /dev/zero > /dev/tcp/{}/{}",
                to.ip(),
                to.port()
            ),
        ]);
        parent.enter_child_on_spawn(child, &mut cmd).unwrap();
        senders.push(cmd.spawn().expect("bash starts"));
    }
    let mut receivers = Vec::new();
    for _ in 0..streams {
        let (mut s, _) = listener.accept().expect("accept");
        receivers.push(std::thread::spawn(move || {
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            std::io::copy(&mut s, &mut std::io::sink()).expect("receiving")
        }));
    }
    for mut s in senders {
        assert!(s.wait().unwrap().success(), "a sender in {child} failed");
    }
    for r in receivers {
        assert_eq!(r.join().unwrap(), bytes, "bytes received from {child}");
    }
}

#[test]
fn retransmits_count_for_the_cgroup_of_the_socket() {
    let test = "retransmits_count_for_the_cgroup_of_the_socket";
    if !require_root(test) || !require_tool(test, "tc") || !require_tool(test, "bash") {
        return;
    }
    let parent = Cgroup::new(UNIFIED_ROOT, "cgroup.procs", "cgnet").expect("a v2 cgroup");
    parent.child("x").unwrap();
    parent.child("y").unwrap();
    let name = parent.name();
    let p = HostPair::new("cgrt").expect("host pair");
    // A shallow buffer: hundreds of retransmits per second.
    tbf(&p.a, p.a_dev, "200mbit", "32kb", "64kb").expect("tbf");
    let config =
        format!("[net]\nmax_peers = 4096\n[cgroups]\npaths = [\"{name}/*\"]\nmax_cgroups = 4\n");
    let agent = AgentProcess::with_config(&config, &[]).expect("agent starts");
    let peer = p.b_addr().to_string();
    let (x, y) = (format!("{name}/x"), format!("{name}/y"));
    let mut before = agent.scrape().unwrap();
    assert_up(&before, &["tcp_retransmit", "tcp_retransmit_synack"]);
    for (sender, idle) in [(&x, &y), (&y, &x)] {
        let snmp0 = p.a.snmp_tcp("RetransSegs").unwrap();
        send_from(&parent, sender.rsplit('/').next().unwrap(), &p, 2, 25 << 20);
        settle();
        let after = agent.scrape().unwrap();
        let snmp = p.a.snmp_tcp("RetransSegs").unwrap() - snmp0;
        let d = |labels: &[(&str, &str)], name: &str| delta(&before, &after, name, labels);
        let to_peer = d(&[("peer", &peer)], BY_PEER);
        let mine = d(&[("peer", &peer), ("cgroup", sender)], BY_CGROUP);
        let theirs = d(&[("peer", &peer), ("cgroup", idle)], BY_CGROUP);
        let all = d(&[("peer", &peer)], BY_CGROUP);
        eprintln!(
            "{sender} sending: RetransSegs {snmp}, to the peer {to_peer}, {sender} {mine}, \
             {idle} {theirs}, all groups {all}"
        );
        assert!(
            to_peer >= 20.0,
            "only {to_peer} retransmits: the link was not lossy"
        );
        assert!(
            to_peer <= snmp as f64,
            "{to_peer} counted, RetransSegs {snmp}"
        );
        assert_eq!(
            mine, to_peer,
            "{sender} opened every socket that retransmitted"
        );
        assert_eq!(theirs, 0.0, "{idle} sent nothing");
        assert_eq!(
            all, to_peer,
            "per peer, the groups add up to the peer's count"
        );
        before = after;
    }
    // A group that goes away leaves the export at the next scrape.
    std::fs::remove_dir(parent.path.join("x")).expect("removing group x");
    let seen = cgroup_labels(&agent.scrape().unwrap(), &peer);
    assert!(!seen.contains(&x), "{x} still exported: {seen:?}");
    assert!(seen.contains(&y), "{y} gone: {seen:?}");
}

/// Off by default: no per-cgroup series, and the retransmit probes load without reading
/// sockets' cgroups.
#[test]
fn retransmits_are_not_split_by_cgroup_unless_asked() {
    let test = "retransmits_are_not_split_by_cgroup_unless_asked";
    if !require_root(test) {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let s = agent.scrape().unwrap();
    assert_up(&s, &["tcp_retransmit", "tcp_retransmit_synack"]);
    assert!(
        !s.iter().any(|x| x.name == BY_CGROUP),
        "per-cgroup retransmits without [cgroups]"
    );
}
