//! The agent's life cycle as a service: stopping detaches everything (SIGTERM exits 0 within
//! 2 s; SIGKILL leaves nothing either), bad settings attach nothing, and without eBPF
//! permission it keeps serving in degraded mode.

use std::process::Command;
use std::time::Duration;

use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::bins;
use stornet_lab::bpf::{self, PROGRAM_PREFIX};
use stornet_lab::metrics::sum;
use stornet_lab::privilege::{require_root, require_tool};

/// Starts an agent and returns it with the program and link ids it holds, checking that
/// every one of its programs carries stornet's name prefix.
fn started_agent() -> (
    AgentProcess,
    std::collections::BTreeSet<u32>,
    std::collections::BTreeSet<u32>,
) {
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let samples = agent.scrape().unwrap();
    assert_eq!(
        sum(
            &samples,
            "stornet_probe_up",
            &[("probe", "block_completion")]
        ),
        1.0
    );
    let (progs, links) = bpf::held_by(agent.pid()).unwrap();
    assert!(!progs.is_empty(), "the agent holds no BPF program");
    assert!(!links.is_empty(), "the agent holds no BPF link");
    let loaded = bpf::loaded_programs();
    for id in &progs {
        let name = loaded
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, n)| n.as_str())
            .unwrap_or("<gone>");
        assert!(
            name.starts_with(PROGRAM_PREFIX),
            "program {id} is named {name:?}, not {PROGRAM_PREFIX}*"
        );
    }
    (agent, progs, links)
}

#[test]
fn service_sigterm_exits_0_within_2s_and_detaches_everything() {
    if !require_root("service_sigterm_exits_0_within_2s_and_detaches_everything") {
        return;
    }
    let (mut agent, progs, links) = started_agent();
    let status = agent
        .terminate(Duration::from_secs(2))
        .expect("exit within 2 s of SIGTERM");
    assert_eq!(status.code(), Some(0), "log:\n{}", agent.log());
    assert!(agent.log().contains("probes detached"), "{}", agent.log());
    let (p, l) = bpf::wait_gone(&progs, &links, Duration::from_secs(2));
    assert!(
        p.is_empty() && l.is_empty(),
        "left behind: programs {p:?}, links {l:?}"
    );
}

#[test]
fn service_sigkill_leaves_no_programs() {
    if !require_root("service_sigkill_leaves_no_programs") {
        return;
    }
    let (mut agent, progs, links) = started_agent();
    agent.kill9().unwrap();
    let (p, l) = bpf::wait_gone(&progs, &links, Duration::from_secs(5));
    assert!(
        p.is_empty() && l.is_empty(),
        "left behind: programs {p:?}, links {l:?}"
    );
}

/// Each usage and configuration error exits 2 with one line, and no stornet program was
/// loaded meanwhile.
#[test]
fn service_bad_settings_attach_nothing() {
    if !require_root("service_bad_settings_attach_nothing") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("stornet-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        format!("{}", p.display())
    };
    let unknown = write("unknown.toml", "[net]\nmax_peer = 1\n");
    let wrong_type = write("type.toml", "[net]\nmax_peers = \"x\"\n");
    let glob = write("glob.toml", "[block]\ndevices_include = [\"nvme[\"]\n");
    let web = write("web.yml", "tls_server_config:\n  cert_file: /nonexistent\n");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec![format!("--config.file={unknown}")],
        vec![format!("--config.file={wrong_type}")],
        vec![format!("--config.file={glob}")],
        vec![format!("--web.config.file={web}")],
        vec!["--web.listen-address=nonsense".into()],
        vec![format!(
            "--web.listen-address={}",
            taken.local_addr().unwrap()
        )],
        vec!["--log.level=loud".into()],
        vec!["snapshot".into(), format!("--config.file={glob}")],
        vec!["check".into(), format!("--config.file={unknown}")],
    ];
    for args in cases {
        // Program ids only grow, so an unchanged highest id proves nothing was loaded, even a
        // program freed again at exit. Another process loading one meanwhile also moves it:
        // a case passes when one of three runs leaves the id where it was.
        let mut moved = Vec::new();
        for _ in 0..3 {
            let before = bpf::max_program_id();
            let out = Command::new(bins::path("stornet-agent"))
                .args(&args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            // Only the error line: loading a probe would have logged a line of its own.
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            let after = bpf::max_program_id();
            if after == before {
                moved.clear();
                break;
            }
            moved.push((before, after, bpf::stornet_programs_since(before)));
        }
        assert!(
            moved.is_empty(),
            "{args:?}: programs were loaded: {moved:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without any capability (an unprivileged user) no probe can load: each reports down with
/// the reason in the log, and the agent serves its procfs-based metrics all the same.
#[test]
fn service_degraded_without_bpf_permission_keeps_serving() {
    if !require_root("service_degraded_without_bpf_permission_keeps_serving")
        || !require_tool("service_degraded", "setpriv")
    {
        return;
    }
    let wrapper = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
    ];
    let mut agent = AgentProcess::launch(&Launch {
        wrapper: &wrapper,
        ..Default::default()
    })
    .unwrap();
    agent.wait_healthy().unwrap();
    let samples = agent.scrape().unwrap();
    assert_eq!(
        sum(
            &samples,
            "stornet_probe_up",
            &[("probe", "block_completion")]
        ),
        0.0,
        "probe must be down without permission"
    );
    assert!(sum(&samples, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(
        samples
            .iter()
            .any(|s| s.name == "process_cpu_seconds_total")
    );
    let log = agent.log();
    assert!(
        log.lines().any(|l| l.contains("level=warn")
            && l.contains("no probe can run")
            && l.contains("reason=")),
        "no warning with a reason in:\n{log}"
    );
    let (code, page) = stornet_lab::metrics::http_get(agent.addr, "/").unwrap();
    assert_eq!(code, 200);
    assert!(
        page.contains("block_completion") && page.contains("down"),
        "{page}"
    );
    let status = agent.terminate(Duration::from_secs(2)).unwrap();
    assert_eq!(status.code(), Some(0));

    // `check` in the same situation: every probe row fails and the exit status says so.
    let out = Command::new(wrapper[0])
        .args(&wrapper[1..])
        .arg(bins::path("stornet-agent"))
        .arg("check")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("probe block_completion") && l.contains("FAIL")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("capability CAP_BPF") && l.contains("missing")),
        "{table}"
    );
}

/// The capabilities the systemd unit grants are enough: with only those (and
/// no_new_privs, as the unit sets), every probe attaches and BPF statistics are on.
#[test]
fn service_unit_capabilities_suffice() {
    if !require_root("service_unit_capabilities_suffice")
        || !require_tool("service_unit_capabilities_suffice", "setpriv")
    {
        return;
    }
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/stornet-agent.service"),
    )
    .unwrap();
    let caps: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("CapabilityBoundingSet in the unit")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase())
        .collect();
    let set = format!(
        "-all,{}",
        caps.iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let bounding = format!("--bounding-set={set}");
    let inh = format!("--inh-caps={set}");
    let wrapper = ["setpriv", &bounding, &inh, "--no-new-privs"];
    // Statistics kept on: turning them on (also for the default's sampling windows) is
    // what needs CAP_SYS_ADMIN.
    let config = std::env::temp_dir().join(format!("stornet-caps-{}.toml", std::process::id()));
    std::fs::write(&config, "[probes]\nrun_statistics = true\n").unwrap();
    let config_flag = format!("--config.file={}", config.display());
    let mut agent = AgentProcess::launch(&Launch {
        wrapper: &wrapper,
        args: &[&config_flag],
        ..Default::default()
    })
    .unwrap();
    agent.wait_healthy().unwrap();
    let _ = std::fs::remove_file(&config);
    // The agent really runs with no more than the unit's capabilities.
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(
        eff.count_ones() as usize,
        caps.len(),
        "CapEff {eff:x} for {caps:?}"
    );
    let samples = agent.scrape().unwrap();
    assert_eq!(
        sum(
            &samples,
            "stornet_probe_up",
            &[("probe", "block_completion")]
        ),
        1.0,
        "log:\n{}",
        agent.log()
    );
    assert_eq!(sum(&samples, "stornet_agent_bpf_stats_enabled", &[]), 1.0);
}
