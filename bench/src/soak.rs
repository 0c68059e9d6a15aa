//! `cargo xtask bench soak [--minutes N]`: the agent scraped once a second for N minutes (30
//! by default) while peers and devices churn: every 10 s a wave of 100 new TCP peers (SYNs
//! retransmitted to addresses nothing answers; about 1,000 distinct ones, cycled) and 10 loop
//! devices attached, used and detached. Targets: resident memory after the run within 5% of
//! where it was after the first minute, open files back where they were, per-peer series
//! within the cap plus `other`, no failed scrape.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_reads, direct_writes};
use stornet_lab::churn::{PeerSpace, Pending, footprint};
use stornet_lab::metrics::http_get;

use crate::cmd;

const PEER_CAP: usize = 64;
const WAVE_EVERY: u64 = 10;
const PEERS_PER_WAVE: usize = 100;
const DEVICES_PER_WAVE: usize = 10;

pub fn run(minutes: u64) -> Result<()> {
    if !cmd::is_root() {
        bail!("soak needs root (loop devices, namespaces, eBPF)");
    }
    if minutes < 2 {
        bail!("--minutes must be at least 2 (the first minute warms the agent up)");
    }
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let space = PeerSpace::new("soak")?;
    let agent = AgentProcess::with_config(
        &format!(
            "[net]\nmax_peers = {PEER_CAP}\nnamespaces = [{:?}]\n\
             [block]\ndevices_include = [\"loop*\"]\nmax_devices = 64\n",
            space.pair.a.name
        ),
        &[],
    )?;
    println!(
        "soak: {minutes} min, a scrape a second, every {WAVE_EVERY} s {PEERS_PER_WAVE} peers and \
         {DEVICES_PER_WAVE} loop devices"
    );
    let start = Instant::now();
    let mut warm = None;
    let (mut scrapes, mut failed, mut peers, mut devices, mut most_peers) = (0u64, 0u64, 0, 0, 0);
    let mut times = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut next_addr = 0;
    let mut tick = 0u64;
    while start.elapsed() < Duration::from_secs(minutes * 60) {
        let t = Instant::now();
        match http_get(agent.addr, "/metrics") {
            Ok((200, body)) => {
                times.push(t.elapsed().as_secs_f64());
                most_peers = most_peers.max(peer_labels(&body));
            }
            _ => failed += 1,
        }
        scrapes += 1;
        if tick.is_multiple_of(WAVE_EVERY) {
            pending.clear();
            let wave: Vec<_> = (0..PEERS_PER_WAVE)
                .map(|i| space.addrs[(next_addr + i) % space.addrs.len()])
                .collect();
            next_addr += PEERS_PER_WAVE;
            pending = space.connect(&wave)?;
            peers += PEERS_PER_WAVE;
            let wave: Vec<LoopDevice> = (0..DEVICES_PER_WAVE)
                .map(|i| LoopDevice::new(&format!("soak{i}"), 1 << 20))
                .collect::<Result<_>>()?;
            for d in &wave {
                direct_writes(&d.dev, 10, 4096)?;
                direct_reads(&d.dev, 10, 4096)?;
            }
            devices += wave.len();
        }
        if warm.is_none() && start.elapsed() >= Duration::from_secs(60) {
            warm = Some(footprint(agent.pid())?);
        }
        tick += 1;
        std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    }
    drop(pending);
    // One more scrape after the last devices went, so that their entries are dropped.
    std::thread::sleep(Duration::from_secs(2));
    http_get(agent.addr, "/metrics")?;
    let end = footprint(agent.pid())?;
    let warm = warm.unwrap_or(end);
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((p * times.len() as f64) as usize).min(times.len() - 1)] * 1e3;
    let growth = end.0 as f64 / warm.0 as f64 - 1.0;
    println!();
    println!("{scrapes} scrapes ({failed} failed), {peers} peers, {devices} loop devices");
    println!(
        "scrape time p50 {:.2} ms, p99 {:.2} ms; at most {most_peers} peer labels (cap {PEER_CAP} + other)",
        pct(0.50),
        pct(0.99)
    );
    println!(
        "RSS after the first minute {:.1} MiB, at the end {:.1} MiB: {:+.1}%",
        warm.0 as f64 / 1048576.0,
        end.0 as f64 / 1048576.0,
        growth * 100.0
    );
    println!(
        "open files after the first minute {}, at the end {}",
        warm.1, end.1
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "targets: RSS growth < 5% {}, open files not grown {}, peer labels <= {} {}, no failed scrape {}",
        verdict(growth < 0.05),
        verdict(end.1 <= warm.1),
        PEER_CAP + 1,
        verdict(most_peers <= PEER_CAP + 1),
        verdict(failed == 0)
    );
    Ok(())
}

/// Distinct `peer` labels of the retransmit counter in a scrape's text.
fn peer_labels(body: &str) -> usize {
    let mut seen: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("stornet_tcp_retransmits_total{"))
        .filter_map(|l| l.split("peer=\"").nth(1)?.split('"').next())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}
