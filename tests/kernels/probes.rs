//! Every probe attaches on this kernel, `stornet-agent check` finds nothing wrong, and the
//! agent reports the kernel and its lockdown mode as the guest booted it.

use std::process::Command;

use stornet_lab::bins;
use stornet_lab::metrics::sum;

use stornet_lab::guest;

/// The probes of the agent, as `stornet_probe_up` names them.
const PROBES: [&str; 10] = [
    "block_issue",
    "block_completion",
    "block_requeue",
    "block_bio_queue",
    "block_bio_completion",
    "tcp_retransmit",
    "tcp_retransmit_synack",
    "skb_drop",
    "sock_exceed_buf_limit",
    "sock_rcvqueue_full",
];

#[test]
fn every_probe_is_up() {
    let agent = crate::shared::agent();
    let samples = agent.scrape().unwrap();
    let listed = samples
        .iter()
        .filter(|s| s.name == "stornet_probe_up")
        .count();
    assert_eq!(listed, PROBES.len(), "probes in stornet_probe_up");
    for p in PROBES {
        let up = sum(&samples, "stornet_probe_up", &[("probe", p)]);
        assert_eq!(up, 1.0, "probe {p} is down; agent log:\n{}", agent.log());
    }
}

#[test]
fn check_is_clean() {
    let out = Command::new(bins::path("stornet-agent"))
        .arg("check")
        .output()
        .expect("stornet-agent check runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check failed:\n{table}");
    let failing: Vec<&str> = table.lines().filter(|l| l.contains(" FAIL ")).collect();
    assert!(
        failing.is_empty(),
        "check rows failing:\n{}",
        failing.join("\n")
    );
    let lockdown = table
        .lines()
        .find(|l| l.starts_with("kernel lockdown"))
        .unwrap_or_else(|| panic!("no lockdown row:\n{table}"));
    assert!(
        lockdown.contains(&guest::lockdown()),
        "the guest booted with lockdown={}, check says: {lockdown}",
        guest::lockdown()
    );
    // `check` also loads the issuer probe, which the agent attaches only with `[cgroups]`.
    let checked = PROBES.len() + 1;
    assert!(
        table.contains(&format!("{checked} of {checked} probes can run"))
            && table
                .lines()
                .any(|l| l.starts_with("probe block_issuer") && l.contains(" ok ")),
        "{table}"
    );
}

#[test]
fn kernel_info_names_release_and_lockdown() {
    let agent = crate::shared::agent();
    let samples = agent.scrape().unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let lockdown = guest::lockdown();
    let labels = [("release", release.trim()), ("lockdown", lockdown.as_str())];
    assert_eq!(
        sum(&samples, "stornet_kernel_info", &labels),
        1.0,
        "stornet_kernel_info{labels:?}"
    );
}
