//! Per-peer socket statistics from sock_diag, against `ss -ti` on the same sockets; and the
//! namespace configuration.

use std::process::Command;

use stornet_lab::metrics::sum;
use stornet_lab::netns::HostPair;
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::traffic::IdleConnections;

use crate::net_support::agent_watching;

#[test]
fn srtt_matches_ss() {
    if !require_root("srtt_matches_ss") || !require_tool("srtt_matches_ss", "ss") {
        return;
    }
    const N: usize = 4;
    let p = HostPair::new("srtt").expect("host pair");
    let conns = IdleConnections::open(&p.a, &p.b, p.b_addr(), N).expect("connections");
    let missing = format!("stn-absent-{}", std::process::id());
    let agent = agent_watching(&[&p.a.name, &missing]);

    let ss_before = p.a.ss_rtts_ms(p.b_addr()).unwrap();
    let s = agent.scrape().unwrap();
    let ss_after = p.a.ss_rtts_ms(p.b_addr()).unwrap();
    let peer = p.b_addr().to_string();
    let labels = [("peer", peer.as_str())];

    assert_eq!(ss_before.len(), N, "ss sees the connections");
    assert_eq!(sum(&s, "stornet_tcp_sockets", &labels), N as f64);
    let all: Vec<f64> = ss_before.iter().chain(&ss_after).copied().collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    // ss prints milliseconds with at most 3 decimals, i.e. whole microseconds.
    let tol = 0.0005;
    let mean_ms = sum(&s, "stornet_tcp_srtt_seconds", &labels) * 1e3;
    let max_ms = sum(&s, "stornet_tcp_srtt_max_seconds", &labels) * 1e3;
    eprintln!("srtt agent mean {mean_ms} ms max {max_ms} ms; ss {all:?}");
    assert!(
        mean_ms >= lo - tol && mean_ms <= hi + tol,
        "mean srtt {mean_ms} ms outside ss's [{lo}, {hi}]"
    );
    assert!(
        max_ms >= lo - tol && max_ms <= hi + tol,
        "max srtt {max_ms} ms outside ss's [{lo}, {hi}]"
    );
    assert!(max_ms >= mean_ms);

    // The configured namespaces: ours read, the absent one reported down, the host read.
    let up = |ns: &str| sum(&s, "stornet_net_namespace_up", &[("netns", ns)]);
    assert_eq!(up(&p.a.name), 1.0);
    assert_eq!(up(&missing), 0.0);
    assert_eq!(up("host"), 1.0);
    drop(conns);
}

/// A namespace entry that is neither a name nor `pid:N` is a configuration error: exit 2 and
/// a one-line message naming it.
#[test]
fn bad_namespace_entry_is_a_config_error() {
    let path = std::env::temp_dir().join(format!("stornet-bad-ns-{}.toml", std::process::id()));
    std::fs::write(&path, "[net]\nnamespaces = [\"../etc\"]\n").unwrap();
    let out = Command::new(stornet_lab::bins::path("stornet-agent"))
        .arg(format!("--config.file={}", path.display()))
        .arg("--web.listen-address=127.0.0.1:0")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("../etc") && err.lines().count() == 1, "{err}");
}
