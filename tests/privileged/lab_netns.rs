use stornet_lab::netns::{HostPair, ip};
use stornet_lab::privilege::require_root;

/// Two namespaces joined by veth reach each other over TCP, hold only lab addresses, have no
/// default route, and are gone after drop.
#[test]
fn host_pair_is_isolated_connected_and_removed() {
    if !require_root("host_pair_is_isolated_connected_and_removed") {
        return;
    }
    let names;
    {
        let p = HostPair::new("pairtest").expect("host pair");
        names = [p.a.name.clone(), p.b.name.clone()];
        p.a.assert_isolated().unwrap();
        let ping =
            p.a.run("ping", &["-c", "1", "-W", "2", &p.b_addr().to_string()]);
        assert!(ping.is_ok(), "ping across the veth: {ping:?}");
        // Nothing outside the lab is reachable: there is no route.
        let out =
            p.a.command("ping")
                .args(["-c", "1", "-W", "1", "192.0.2.1"])
                .output()
                .unwrap();
        assert!(
            !out.status.success(),
            "an address outside the lab must be unreachable"
        );
    }
    let list = ip(&["netns", "list"]).unwrap();
    for n in names {
        assert!(!list.contains(&n), "{n} left behind");
    }
}
