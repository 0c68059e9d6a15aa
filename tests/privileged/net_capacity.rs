//! What a link can carry and what it carried: the driver's link speed (ethtool), a shaper's
//! rate (tbf's rate, htb's ceilings) and the bytes and packets the interface and the qdisc
//! let out, against `ethtool`, `tc` and `ip -s link`. A link's utilisation is the rate of
//! its bytes over the smaller of the two capacities.

use std::time::{Duration, Instant};

use stornet_lab::metrics::{Sample, around, sum};
use stornet_lab::netns::{HostPair, Netns, tbf};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::BulkTransfer;

use crate::net_support::{agent_watching, ethtool_speed, settle};

/// tbf on host a's link: 40 Mbit/s, the deep-buffer link.
const TBF_BYTES_PER_SECOND: f64 = 40e6 / 8.0;
const BURST: f64 = 32.0 * 1024.0;

/// The ceilings of the top htb classes of `dev` (`root` in `tc class show`), bytes per
/// second, as tc prints them (`ceil 50Mbit`).
fn htb_top_ceilings(ns: &Netns, dev: &str) -> Vec<f64> {
    let out = ns.tc(&["class", "show", "dev", dev]).expect("tc class");
    out.lines()
        .filter(|l| l.starts_with("class htb") && l.contains(" root "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let ceil = w[w.iter().position(|x| *x == "ceil").expect("ceil") + 1];
            let (num, unit) = ceil.split_at(ceil.find(|c: char| c.is_alphabetic()).unwrap());
            let scale = match unit {
                "bit" => 1.0,
                "Kbit" => 1e3,
                "Mbit" => 1e6,
                "Gbit" => 1e9,
                u => panic!("unit {u} in {l}"),
            };
            num.parse::<f64>().unwrap() * scale / 8.0
        })
        .collect()
}

fn qdisc<'a>(s: &'a [Sample], ns: &str, dev: &str, kind: &str) -> impl Fn(&str) -> f64 + 'a {
    let (ns, dev, kind) = (ns.to_string(), dev.to_string(), kind.to_string());
    move |name| {
        sum(
            s,
            name,
            &[("netns", &ns), ("interface", &dev), ("qdisc", &kind)],
        )
    }
}

#[test]
fn link_capacity_and_bytes_match_ethtool_tc_and_ip() {
    let test = "link_capacity_and_bytes_match_ethtool_tc_and_ip";
    if !require_root(test) || !require_tool(test, "tc") || !require_tool(test, "ethtool") {
        return;
    }
    let p = HostPair::new("cap").expect("host pair");
    tbf(&p.a, p.a_dev, "40mbit", "32kb", "4mb").expect("tbf");
    // Host b shapes with htb: two top classes (ceilings 50 and 20 Mbit/s), one below.
    let dev = p.b_dev;
    p.b.tc(&[
        "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10",
    ])
    .expect("htb");
    for (parent, class, rate, ceil) in [
        ("1:", "1:10", "30mbit", "50mbit"),
        ("1:", "1:20", "10mbit", "20mbit"),
        ("1:10", "1:11", "10mbit", "50mbit"),
    ] {
        p.b.tc(&[
            "class", "add", "dev", dev, "parent", parent, "classid", class, "htb", "rate", rate,
            "ceil", ceil,
        ])
        .expect("htb class");
    }
    let agent = agent_watching(&[&p.a.name, &p.b.name]);
    let (a, a_dev) = (p.a.name.as_str(), p.a_dev);

    let start = Instant::now();
    let first = agent.scrape().unwrap();
    BulkTransfer::start(&p.a, &p.b, p.b_addr(), 2, Duration::from_secs(1))
        .expect("transfer starts")
        .finish()
        .expect("transfer completes");
    settle();
    let kernel = || {
        let tc = p.a.tc_qdiscs(a_dev).expect("tc -j");
        [
            p.a.ip_link_stat(a_dev, "tx", "bytes").unwrap(),
            p.a.ip_link_stat(a_dev, "tx", "packets").unwrap(),
            p.a.ip_link_stat(a_dev, "rx", "bytes").unwrap(),
            tc[0]["bytes"].as_u64().expect("tc bytes"),
            tc[0]["packets"].as_u64().expect("tc packets"),
        ]
    };
    let (k, s) = around(kernel, || agent.scrape().unwrap());
    let elapsed = start.elapsed().as_secs_f64();
    let labels = [("netns", a), ("interface", a_dev)];
    let tbf_stat = qdisc(&s, a, a_dev, "tbf");
    let agent_counts = [
        sum(&s, "stornet_interface_transmit_bytes_total", &labels),
        sum(&s, "stornet_interface_transmit_packets_total", &labels),
        sum(&s, "stornet_interface_receive_bytes_total", &labels),
        tbf_stat("stornet_qdisc_sent_bytes_total"),
        tbf_stat("stornet_qdisc_sent_packets_total"),
    ];
    let what = [
        "ip tx bytes",
        "ip tx packets",
        "ip rx bytes",
        "tc sent bytes",
        "tc sent packets",
    ];
    for ((name, got), k) in what.iter().zip(agent_counts).zip(k) {
        eprintln!("{name}: agent {got}, kernel [{}, {}]", k.before, k.after);
        assert!(
            got >= k.before as f64 && got <= k.after as f64,
            "{name}: agent {got} vs [{}, {}]",
            k.before,
            k.after
        );
    }
    assert!(agent_counts[0] > 1e6, "the transfer went out of host a");

    // Capacities.
    let speed = sum(&s, "stornet_interface_speed_bytes_per_second", &labels);
    assert_eq!(speed, ethtool_speed(&p.a, a_dev), "speed vs ethtool");
    let tc_rate = p.a.tc_qdiscs(a_dev).unwrap()[0]["options"]["rate"]
        .as_f64()
        .expect("tc -j tbf rate");
    let rate = tbf_stat("stornet_qdisc_rate_bytes_per_second");
    assert_eq!(rate, tc_rate, "tbf rate vs tc -j");
    assert_eq!(rate, TBF_BYTES_PER_SECOND);
    let ceilings = htb_top_ceilings(&p.b, p.b_dev);
    assert_eq!(ceilings.len(), 2, "two top htb classes");
    let htb_rate = qdisc(&s, &p.b.name, p.b_dev, "htb")("stornet_qdisc_rate_bytes_per_second");
    assert_eq!(
        htb_rate,
        ceilings.iter().sum::<f64>(),
        "htb rate vs tc class"
    );
    assert_eq!(htb_rate, (50e6 + 20e6) / 8.0);
    // Unshaped qdiscs have no rate.
    assert!(
        !s.iter()
            .any(|x| x.name == "stornet_qdisc_rate_bytes_per_second"
                && x.label("netns") == Some("host")),
        "no rate where nothing shapes"
    );

    // Utilisation over the transfer: a tbf lets out at most its rate and one burst.
    let sent = tbf_stat("stornet_qdisc_sent_bytes_total")
        - qdisc(&first, a, a_dev, "tbf")("stornet_qdisc_sent_bytes_total");
    let utilisation = sent / elapsed / rate;
    eprintln!(
        "sent {sent} bytes in {elapsed:.2} s: {:.1} Mbit/s, {:.0}% of the tbf's rate, {:.2}% of the link's speed",
        sent * 8.0 / elapsed / 1e6,
        utilisation * 100.0,
        sent / elapsed / speed * 100.0
    );
    assert!(
        sent <= rate * elapsed + BURST + 65536.0,
        "{sent} bytes through a {rate} B/s tbf in {elapsed} s"
    );
}
