//! Bounded interface series: a thousand veth pairs appear in a watched namespace (their other
//! ends in a second namespace, as a pod's are) and go with it. While they exist the series
//! stay within the interface cap plus `other`, with `other` holding the rest (its summed
//! link speed equals that of the interfaces beyond the cap); veths named the way container
//! runtimes name them have no series at all; one scrape after they are gone the namespace's
//! series are those it had before, and the agent's memory and open files are where they were.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::churn;
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::netns::Netns;
use stornet_lab::privilege::{require_root, require_tool};

use crate::net_support::ethtool_speed;

const CAP: usize = 16;
const PAIRS: usize = 1000;
/// veths named as Docker names a container's (`veth` and seven hex digits): left out by the
/// default `interfaces_exclude`.
const RUNTIME_VETHS: usize = 10;
/// Series one interface can have: 9 interface counters, MTU, speed, two standard pause
/// counters; 7 statistics and a rate per root qdisc.
const SERIES_PER_INTERFACE: usize = 13 + 8;
/// Slack over the footprint before the churn.
const RSS_SLACK: u64 = 5 << 20;
const FD_SLACK: usize = 8;

/// How long before the scrape the network snapshot it shows began.
fn snapshot_age(s: &[Sample]) -> f64 {
    s.iter()
        .find(|x| {
            x.name == "stornet_scrape_collector_age_seconds"
                && x.label("collector") == Some("network_snapshots")
        })
        .expect("the network snapshots are read in the background")
        .value
}

/// The series of namespace `ns` that name an interface.
fn interface_series<'a>(s: &'a [Sample], ns: &'a str) -> impl Iterator<Item = &'a Sample> {
    s.iter()
        .filter(move |x| x.label("netns") == Some(ns) && x.label("interface").is_some())
}

fn interfaces(s: &[Sample], ns: &str) -> BTreeSet<String> {
    interface_series(s, ns)
        .filter_map(|x| x.label("interface").map(str::to_string))
        .collect()
}

/// Interfaces with a label of their own, in any namespace.
fn named(s: &[Sample]) -> BTreeSet<(String, String)> {
    s.iter()
        .filter_map(|x| Some((x.label("netns")?, x.label("interface")?)))
        .filter(|(_, i)| *i != "other")
        .map(|(n, i)| (n.to_string(), i.to_string()))
        .collect()
}

/// The interfaces of `ns` (`ip -o link`), by name.
fn links(ns: &Netns) -> Vec<String> {
    ns.ip(&["-o", "link", "show"])
        .expect("ip link")
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn net_interface_churn_stays_within_the_cap() {
    let test = "net_interface_churn_stays_within_the_cap";
    if !require_root(test) || !require_tool(test, "ethtool") {
        return;
    }
    let started = Instant::now();
    let watched = Netns::new("ifw").expect("namespace");
    let mut pods = Some(Netns::new("ifp").expect("namespace"));
    let agent = AgentProcess::with_config(
        &format!(
            "[net]\nmax_interfaces = {CAP}\nnamespaces = [{:?}]\n",
            watched.name
        ),
        &[],
    )
    .expect("agent starts");
    let ns = watched.name.as_str();
    agent.scrape().unwrap();
    let base = agent.scrape().unwrap();
    let base_interfaces = interfaces(&base, ns);
    let base_series = interface_series(&base, ns).count();
    let before = churn::footprint(agent.pid()).unwrap();
    assert!(!base_interfaces.is_empty(), "loopback of {ns} is reported");

    // One `ip -batch` for all pairs: the watched ends here, the others in the pods' namespace.
    let pods_name = pods.as_ref().unwrap().name.clone();
    let mut batch = String::new();
    for i in 0..PAIRS {
        batch += &format!("link add ifc{i} type veth peer name p{i} netns {pods_name}\n");
    }
    let runtime: Vec<String> = (0..RUNTIME_VETHS)
        .map(|i| format!("veth{:07x}", 0xa1b2c00 + i))
        .collect();
    for (i, name) in runtime.iter().enumerate() {
        batch += &format!("link add {name} type veth peer name r{i} netns {pods_name}\n");
    }
    let file = std::env::temp_dir().join(format!("stornet-ifchurn-{}.batch", std::process::id()));
    std::fs::write(&file, batch).unwrap();
    let created = Instant::now();
    let added = watched.ip(&["-batch", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    added.expect("ip -batch");
    let present = links(&watched);
    assert_eq!(present.len(), 1 + PAIRS + RUNTIME_VETHS, "links in {ns}");
    eprintln!(
        "{} veth pairs created in {:.1} s",
        PAIRS + RUNTIME_VETHS,
        created.elapsed().as_secs_f64()
    );

    let with = agent.scrape().unwrap();
    let labels = interfaces(&with, ns);
    let series = interface_series(&with, ns).count();
    let all_named = named(&with);
    eprintln!(
        "with {PAIRS} pairs: {} interface labels in {ns} ({} named over all namespaces, cap \
         {CAP}), {series} series (baseline {base_series})",
        labels.len(),
        all_named.len()
    );
    assert!(
        all_named.len() <= CAP,
        "{} named interfaces",
        all_named.len()
    );
    assert!(
        labels.contains("other"),
        "interfaces beyond the cap: {labels:?}"
    );
    assert!(labels.len() <= CAP + 1, "{labels:?}");
    assert!(
        series <= (CAP + 1) * SERIES_PER_INTERFACE,
        "{series} series for {} labels",
        labels.len()
    );
    for r in &runtime {
        assert!(!labels.contains(r), "{r} is a container runtime's veth");
    }
    // `other` holds every reported interface that has no label of its own: the link speeds
    // (ethtool, the same for every veth) add up to theirs.
    let speed = ethtool_speed(&watched, "ifc0");
    let folded = present
        .iter()
        .filter(|n| n.starts_with("ifc") && !labels.contains(*n))
        .count();
    let other_speed = sum(
        &with,
        "stornet_interface_speed_bytes_per_second",
        &[("netns", ns), ("interface", "other")],
    );
    assert_eq!(
        other_speed,
        folded as f64 * speed,
        "{folded} veths in other"
    );
    assert!(folded >= PAIRS - CAP);
    let qdiscs_other = sum(
        &with,
        "stornet_qdisc_backlog_packets",
        &[("netns", ns), ("interface", "other")],
    );
    assert_eq!(qdiscs_other, 0.0, "idle veths hold nothing");

    // The pods' namespace goes, and every pair with it.
    let removed = Instant::now();
    drop(pods.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    while links(&watched).len() > 1 {
        assert!(Instant::now() < deadline, "veths still in {ns} after 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("removed in {:.1} s", removed.elapsed().as_secs_f64());
    // The agent reads the namespaces in the background: scrapes show the last read, and the
    // first to show a read begun after the veths went has none of them.
    let gone = Instant::now();
    let without = loop {
        let since = gone.elapsed().as_secs_f64();
        let s = agent.scrape_once().unwrap();
        if snapshot_age(&s) <= since {
            break s;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(30),
            "no newer read in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "series gone {:.2} s after the veths (the agent reads every second)",
        gone.elapsed().as_secs_f64()
    );
    assert_eq!(
        interfaces(&without, ns),
        base_interfaces,
        "the first read after the veths went"
    );
    assert_eq!(interface_series(&without, ns).count(), base_series);
    // A few more scrapes, as Prometheus would make, then the footprint.
    for _ in 0..3 {
        agent.scrape().unwrap();
    }
    let after = churn::footprint(agent.pid()).unwrap();
    eprintln!(
        "RSS {} -> {} KiB, open files {} -> {}; {:.1} s in all",
        before.0 / 1024,
        after.0 / 1024,
        before.1,
        after.1,
        started.elapsed().as_secs_f64()
    );
    assert!(
        after.0 <= before.0 + RSS_SLACK,
        "RSS grew from {} to {} KiB",
        before.0 / 1024,
        after.0 / 1024
    );
    assert!(
        after.1 <= before.1 + FD_SLACK,
        "open files grew from {} to {}",
        before.1,
        after.1
    );
}
