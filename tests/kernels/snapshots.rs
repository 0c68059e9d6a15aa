//! A kernel that lacks one netlink family loses that one snapshot, not the namespace: the
//! guest of this test boots without the inet_diag module (sock_diag for TCP), so the
//! agent's socket snapshot fails while links and qdiscs are still read.

use std::net::{TcpListener, TcpStream};
use std::path::Path;

use stornet_lab::metrics::sum;

#[test]
fn without_sock_diag_only_that_snapshot_is_lost() {
    assert!(
        !Path::new("/sys/module/inet_diag").exists(),
        "this test needs a guest booted without inet_diag"
    );
    let agent = crate::shared::agent();
    // A TCP connection the socket snapshot would show.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let _server = listener.accept().unwrap();
    let first = agent.scrape().unwrap();
    let second = agent.scrape().unwrap();
    let host = [("netns", "host")];
    assert_eq!(sum(&second, "stornet_net_namespace_up", &host), 1.0);
    assert_eq!(
        sum(
            &second,
            "stornet_interface_mtu",
            &[("netns", "host"), ("interface", "lo")]
        ),
        65536.0,
        "links are still read"
    );
    let errors = |s: &[_]| {
        sum(
            s,
            "stornet_net_snapshot_errors_total",
            &[("netns", "host"), ("snapshot", "sock_diag")],
        )
    };
    assert!(
        errors(&first) >= 1.0,
        "the failed socket snapshot is counted"
    );
    assert!(errors(&second) > errors(&first), "at every scrape");
    assert_eq!(
        sum(
            &second,
            "stornet_net_snapshot_errors_total",
            &[("netns", "host"), ("snapshot", "namespace")]
        ),
        0.0,
        "the namespace itself was read"
    );
    assert!(
        !second.iter().any(|s| s.name == "stornet_tcp_sockets"),
        "no socket series without sock_diag"
    );
    let log = agent.log();
    let warnings = log
        .lines()
        .filter(|l| l.contains("network snapshot unreadable") && l.contains("sock_diag"))
        .count();
    assert_eq!(warnings, 1, "logged once, not per scrape:\n{log}");
}
