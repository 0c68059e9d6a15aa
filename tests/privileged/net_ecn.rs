//! A path that marks congestion instead of dropping (ECN): the receiver's side marks 5% of
//! the ECN-capable packets Congestion Experienced and echoes each mark to the sender. The
//! agent's ECN echoes, per peer (`TCP_INFO`) and for the namespace (/proc/net/netstat),
//! against `ss -ti` and the namespace's `TCPDeliveredCE`; the per-peer count keeps its
//! value once the connection has closed.

use std::io::{Read, Write};
use std::time::Duration;

use stornet_lab::ecn;
use stornet_lab::metrics::{Sample, around, counted_between, sum};
use stornet_lab::netns::HostPair;
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::{connect, listen};

use crate::net_support::{agent_watching, settle};

const BYTES: usize = 16 << 20;

#[test]
fn ecn_echoes_match_netstat_and_ss() {
    let test = "ecn_echoes_match_netstat_and_ss";
    if !require_root(test) || !require_tool(test, "nft") || !require_tool(test, "ss") {
        return;
    }
    let p = HostPair::new("ecn").expect("host pair");
    for ns in [&p.a, &p.b] {
        ecn::enable(ns).expect("tcp_ecn");
    }
    ecn::mark_ce(&p.b, 50).expect("nft marking");
    let agent = agent_watching(&[&p.a.name]);
    let peer = p.b_addr().to_string();
    let per_peer = |s: &[Sample], name: &str| sum(s, name, &[("peer", &peer)]);
    let netns = |s: &[Sample]| {
        sum(
            s,
            "stornet_net_tcp_delivered_ce_segments_total",
            &[("netns", &p.a.name)],
        )
    };
    let netstat = || [p.a.netstat_tcp_ext("TCPDeliveredCE").unwrap()];
    let ([ce0], before) = around(netstat, || agent.scrape().unwrap());

    // One connection carries 16 MiB, then stays open and idle.
    let listener = listen(&p.b, p.b_addr()).expect("listener");
    let mut out = connect(&p.a, listener.local_addr().unwrap()).expect("connect");
    let (mut inp, _) = listener.accept().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; BYTES];
        inp.read_exact(&mut buf).map(|_| inp)
    });
    out.write_all(&vec![0x5a; BYTES]).unwrap();
    let inp = reader.join().unwrap().expect("the receiver reads it all");
    settle();
    let ss = p.a.ss_sockets(p.b_addr()).expect("ss");
    let ([ce1], open) = around(netstat, || agent.scrape().unwrap());
    let kernel = counted_between(ce0, ce1);
    let marked = ecn::marked(&p.b).unwrap();
    assert_eq!(ss.len(), 1, "one connection: {ss:?}");
    let ss = &ss[0];
    let echoed = per_peer(&open, "stornet_tcp_delivered_ce_segments_total");
    let namespace = netns(&open) - netns(&before);
    eprintln!(
        "{marked} packets marked CE at the receiver; echoed: TCPDeliveredCE {kernel:?}, \
         agent per namespace {namespace}, per peer {echoed}, ss delivered_ce {} of {} delivered",
        ss.delivered_ce, ss.delivered
    );
    assert!(marked > 0, "the receiver marked nothing");
    assert!(*kernel.start() > 0, "no ECN echo reached the sender");
    assert!(
        kernel.contains(&(namespace as u64)),
        "agent {namespace} vs TCPDeliveredCE {kernel:?}"
    );
    assert_eq!(
        echoed, ss.delivered_ce as f64,
        "per peer vs ss delivered_ce"
    );
    assert!(
        kernel.contains(&(echoed as u64)),
        "the connection's echoes {echoed} vs the namespace's {kernel:?}"
    );
    assert_eq!(
        per_peer(&open, "stornet_tcp_delivered_segments_total"),
        ss.delivered as f64,
        "delivered vs ss"
    );

    // Closed: the per-peer counter keeps what the socket counted.
    drop((out, inp));
    std::thread::sleep(Duration::from_millis(200));
    let closed = agent.scrape().unwrap();
    assert_eq!(
        per_peer(&closed, "stornet_tcp_sockets"),
        0.0,
        "the connection is gone"
    );
    assert_eq!(
        per_peer(&closed, "stornet_tcp_delivered_ce_segments_total"),
        echoed,
        "a closed connection's echoes stay counted"
    );
}
