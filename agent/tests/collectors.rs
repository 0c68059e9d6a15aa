//! Collector flags in node_exporter's form, against the config file and what the agent then
//! exports: a disabled collector exports nothing, an enabled one reports what the kernel
//! shows (/sys/class/net). None of this needs root.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_stornet-agent");

/// The families of `snapshot --format=json` with `args`: name → series (labels, value).
fn snapshot(args: &[&str]) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let out = Command::new(BIN)
        .args(["snapshot", "--interval=100ms", "--format=json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["series"].as_array().unwrap().clone(),
            )
        })
        .collect()
}

fn labelled<'a>(
    series: &'a [serde_json::Value],
    key: &str,
    value: &str,
) -> Option<&'a serde_json::Value> {
    series.iter().find(|s| {
        s["labels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|kv| kv[0] == key && kv[1] == value)
    })
}

fn series<'a>(
    f: &'a std::collections::BTreeMap<String, Vec<serde_json::Value>>,
    name: &str,
) -> &'a [serde_json::Value] {
    f.get(name).map(Vec::as_slice).unwrap_or(&[])
}

#[test]
fn only_the_collectors_asked_for_run() {
    let lo_mtu: f64 = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let f = snapshot(&["--collector.disable-defaults", "--collector.netlink"]);
    let mtu = labelled(series(&f, "stornet_interface_mtu"), "interface", "lo").expect("lo mtu");
    assert_eq!(mtu["value"].as_f64(), Some(lo_mtu));
    assert!(labelled(series(&f, "stornet_interface_mtu"), "netns", "host").is_some());
    // No probe was attached, so none reports up or down; sockets and ethtool stay empty.
    assert!(series(&f, "stornet_probe_up").is_empty());
    assert!(series(&f, "stornet_tcp_sockets").is_empty());
    assert!(series(&f, "stornet_interface_speed_bytes_per_second").is_empty());
    assert!(f.contains_key("process_cpu_seconds_total"));

    let f = snapshot(&["--no-collector.netlink", "--no-collector.block_issue"]);
    assert!(series(&f, "stornet_interface_mtu").is_empty());
    assert!(series(&f, "stornet_qdisc_drops_total").is_empty());
    let up = series(&f, "stornet_probe_up");
    assert!(labelled(up, "probe", "block_issue").is_none(), "{up:?}");
    assert!(
        labelled(up, "probe", "block_completion").is_some(),
        "{up:?}"
    );
    // The namespace is still read for sock_diag.
    assert!(labelled(series(&f, "stornet_net_namespace_up"), "netns", "host").is_some());

    let f = snapshot(&["--collector.disable-defaults", "--no-collector.block_issue"]);
    assert!(
        series(&f, "stornet_net_namespace_up").is_empty(),
        "no snapshot collector runs"
    );
}

#[test]
fn flags_win_over_the_config_file() {
    let dir = std::env::temp_dir().join(format!("stornet-collectors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("agent.toml");
    std::fs::write(&file, "[collectors]\nnetlink = false\nsock_diag = false\n").unwrap();
    let flag = format!("--config.file={}", file.display());
    let f = snapshot(&[&flag]);
    assert!(series(&f, "stornet_interface_mtu").is_empty());
    let f = snapshot(&[&flag, "--collector.netlink"]);
    assert!(labelled(series(&f, "stornet_interface_mtu"), "interface", "lo").is_some());
    // An unknown collector in the file or on the command line: exit 2, one line.
    std::fs::write(&file, "\n[collectors]\nethtol = false\n").unwrap();
    for out in [
        Command::new(BIN).arg(&flag).output().unwrap(),
        Command::new(BIN)
            .arg("--no-collector.ethtol")
            .output()
            .unwrap(),
    ] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("ethtol"), "{err}");
    }
    let out = Command::new(BIN).arg(&flag).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 3") && err.contains("collectors.ethtol"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_reader_of_a_scrape_says_how_long_it_took_and_that_it_succeeded() {
    let f = snapshot(&[]);
    let success = series(&f, "stornet_scrape_collector_success");
    let took = series(&f, "stornet_scrape_collector_duration_seconds");
    let names: std::collections::BTreeSet<&str> = success
        .iter()
        .map(|s| s["labels"][0][1].as_str().unwrap())
        .collect();
    // One series per reader, each named once (the host's pressure and block topology are
    // read without root).
    assert_eq!(names.len(), success.len(), "{success:?}");
    for n in [
        "pressure",
        "block_topology",
        "network_snapshots",
        "probe_status",
    ] {
        assert!(names.contains(n), "{n} missing: {names:?}");
        let ok = labelled(success, "collector", n).unwrap();
        assert_eq!(ok["value"], 1.0, "{n}: {ok}");
        let t = labelled(took, "collector", n).unwrap()["value"]
            .as_f64()
            .unwrap();
        assert!((0.0..10.0).contains(&t), "{n} took {t} s");
    }
}
