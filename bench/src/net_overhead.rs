//! `cargo xtask bench net-overhead`: iperf3 between two lab namespaces over an unshaped veth,
//! without and with stornet-agent (watching both namespaces, scraped every second). Each
//! round runs without, with, without the agent and compares the run with the agent to the
//! mean of the two around it, which cancels slow drifts of a shared machine; the median of
//! the rounds' ratios is the result.

use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use stornet_lab::agent::AgentProcess;
use stornet_lab::netns::HostPair;

use crate::cmd;

const ROUNDS: usize = 7;
const SECONDS: u32 = 3;
const TARGET: f64 = 0.99;

/// An iperf3 server inside a namespace, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sum_received.bits_per_second` of iperf3's JSON report.
fn received_bps(json: &str) -> Result<f64> {
    let at = json
        .find("\"sum_received\"")
        .context("iperf3 report has no sum_received")?;
    let rest = &json[at..];
    let v = rest
        .find("\"bits_per_second\"")
        .map(|i| &rest[i + "\"bits_per_second\"".len()..])
        .context("iperf3 report has no bits_per_second")?;
    let num: String = v
        .trim_start_matches([':', ' ', '\t'])
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        .collect();
    num.parse()
        .with_context(|| format!("unreadable bits_per_second {num:?}"))
}

fn iperf(p: &HostPair) -> Result<f64> {
    let out =
        p.a.command("iperf3")
            .args([
                "-c",
                &p.b_addr().to_string(),
                "-t",
                &SECONDS.to_string(),
                "-J",
            ])
            .output()
            .context("running iperf3")?;
    if !out.status.success() {
        bail!("iperf3 failed: {}", String::from_utf8_lossy(&out.stdout));
    }
    received_bps(&String::from_utf8_lossy(&out.stdout))
}

/// One run with the agent up, scraped every second.
fn with_agent(p: &HostPair, config: &std::path::Path) -> Result<f64> {
    let agent = AgentProcess::start(&[&format!("--config.file={}", config.display())])?;
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let _ = agent.scrape();
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let r = iperf(p);
        done.store(true, Ordering::Relaxed);
        r
    })
}

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("net-overhead needs root (network namespaces, eBPF)");
    }
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let p = HostPair::new("bench")?;
    let config =
        std::env::temp_dir().join(format!("stornet-bench-net-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        format!("[net]\nnamespaces = [{:?}, {:?}]\n", p.a.name, p.b.name),
    )?;
    let _server = Server(
        p.b.command("iperf3")
            .args(["-s", "-B", &p.b_addr().to_string()])
            .stdout(Stdio::null())
            .spawn()
            .context("starting the iperf3 server")?,
    );
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "iperf3 {} -> {} over veth, {SECONDS} s per run, {ROUNDS} rounds of without/with/without",
        p.a.name,
        p.b_addr()
    );
    println!("round  without (Gbit/s)  with agent (Gbit/s)  without (Gbit/s)  ratio");
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        let before = iperf(&p)?;
        let with = with_agent(&p, &config)?;
        let after = iperf(&p)?;
        let ratio = with / ((before + after) / 2.0);
        ratios.push(ratio);
        println!(
            "{:>5}  {:>16.2}  {:>19.2}  {:>16.2}  {ratio:.4}",
            round + 1,
            before / 1e9,
            with / 1e9,
            after / 1e9
        );
    }
    let _ = std::fs::remove_file(&config);
    let median = super::median(&ratios);
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    println!(
        "median throughput ratio with/without agent: {median:.4} (rounds {lo:.3}..{hi:.3}; \
         target >= {TARGET}) {}",
        if median >= TARGET {
            "ok"
        } else {
            "BELOW TARGET"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iperf3_json() {
        let j = r#"{"end":{"sum_sent":{"bits_per_second":2.5e10},
                   "sum_received":{"seconds":5,"bits_per_second": 24123456789.5}}}"#;
        assert_eq!(received_bps(j).unwrap(), 24123456789.5);
        assert!(received_bps("{}").is_err());
    }
}
