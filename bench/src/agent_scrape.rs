//! `cargo xtask bench agent-scrape`: how long a scrape of /metrics takes and how much memory
//! the agent holds with 16 busy loop devices and 64 TCP peers. Each /metrics scrape is
//! alternated with a scrape of /-/healthy, the HTTP round trip without any collection, as the
//! reference. Targets: p99 of /metrics < 5 ms, RSS < 50 MiB.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, open_direct};
use stornet_lab::metrics::http_get;
use stornet_lab::netns::{HostPair, Netns};

use stornet_lab::cmd;

const DEVICES: usize = 16;
const PEERS: u8 = 64;
const SCRAPES: usize = 100;
const PORT: u16 = 5201;

pub fn run() -> Result<()> {
    if !cmd::is_root() {
        bail!("agent-scrape needs root (loop devices, namespaces, eBPF)");
    }
    cmd::step("build stornet-agent", || {
        cmd::run(cmd::cargo().args(["build", "--release", "-p", "stornet-agent"]))
    })?;
    let stop = Arc::new(AtomicBool::new(false));

    println!("setting up {DEVICES} loop devices with IO and {PEERS} TCP peers");
    let disks: Vec<LoopDevice> = (0..DEVICES)
        .map(|i| LoopDevice::new(&format!("scrape{i}"), 32 << 20))
        .collect::<Result<_>>()?;
    let ios = Arc::new(AtomicU64::new(0));
    let mut workers: Vec<JoinHandle<()>> = disks
        .iter()
        .map(|d| disk_load(d, stop.clone(), ios.clone()))
        .collect::<Result<_>>()?;

    let pair = HostPair::new("scrape")?;
    let peers: Vec<Ipv4Addr> = (0..PEERS).map(|i| pair.subnet.addr(10 + i)).collect();
    for p in &peers {
        pair.b
            .ip(&["addr", "add", &format!("{p}/32"), "dev", pair.b_dev])?;
    }
    pair.b.assert_isolated()?;
    let sent = Arc::new(AtomicU64::new(0));
    workers.extend(tcp_peers(&pair, &peers, stop.clone(), sent.clone())?);

    // The peers' sockets live in namespace a: the agent reads them there, as it would a
    // storage daemon's in a container.
    let agent =
        AgentProcess::with_config(&format!("[net]\nnamespaces = [\"{}\"]\n", pair.a.name), &[])?;
    let result = measure(&agent, &ios, &sent);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    result
}

fn measure(agent: &AgentProcess, ios: &AtomicU64, sent: &AtomicU64) -> Result<()> {
    std::thread::sleep(Duration::from_secs(1));
    for _ in 0..5 {
        http_get(agent.addr, "/metrics")?;
    }
    let (ios0, sent0, t0) = (
        ios.load(Ordering::Relaxed),
        sent.load(Ordering::Relaxed),
        Instant::now(),
    );
    let mut metrics = Vec::with_capacity(SCRAPES);
    let mut healthy = Vec::with_capacity(SCRAPES);
    let mut body = String::new();
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let (code, b) = http_get(agent.addr, "/metrics")?;
        metrics.push(t.elapsed().as_secs_f64());
        if code != 200 {
            bail!("/metrics answered {code}");
        }
        body = b;
        let t = Instant::now();
        http_get(agent.addr, "/-/healthy")?;
        healthy.push(t.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_millis(20));
    }
    let secs = t0.elapsed().as_secs_f64();
    let iops = (ios.load(Ordering::Relaxed) - ios0) as f64 / secs;
    let tcp = (sent.load(Ordering::Relaxed) - sent0) as f64 / secs;
    let series = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    let devices = distinct(&body, "stornet_block_io_size_bytes_count", "device");
    let peers = distinct(&body, "", "peer");
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid()))?;
    let kib = |key: &str| -> Result<f64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {key} in /proc/PID/status"))
    };
    let (rss, hwm) = (kib("VmRSS:")? / 1024.0, kib("VmHWM:")? / 1024.0);

    let (m50, m99) = (pct(&metrics, 50.0) * 1e3, pct(&metrics, 99.0) * 1e3);
    let (h50, h99) = (pct(&healthy, 50.0) * 1e3, pct(&healthy, 99.0) * 1e3);
    println!();
    println!(
        "load during the scrapes: {iops:.0} IOPS on {DEVICES} loop devices, {tcp:.0} TCP writes/s to {PEERS} peers"
    );
    println!(
        "agent output: {series} series, {} bytes, {devices} devices, {peers} peers{}",
        body.len(),
        if peers == 0 {
            " (no per-peer metrics in this agent build)"
        } else {
            ""
        }
    );
    println!("{SCRAPES} scrapes each, alternating       p50 ms    p99 ms");
    println!("  /metrics                          {m50:8.2}  {m99:8.2}");
    println!("  /-/healthy (reference)            {h50:8.2}  {h99:8.2}");
    println!(
        "  ratio /metrics : /-/healthy       {:8.1}x {:8.1}x",
        m50 / h50,
        m99 / h99
    );
    if let Some(ms) = render_mean_ms(&body) {
        println!("  the agent's own time per scrape (collect and encode), mean: {ms:.2} ms");
    }
    println!("agent RSS: {rss:.1} MiB (peak {hwm:.1} MiB)");
    println!("the last scrape's readers, slowest first:");
    for (collector, ms) in collector_times(&body) {
        println!("  {collector:<32}  {ms:8.2} ms");
    }
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "targets: p99 < 5 ms {}, RSS < 50 MiB {}",
        verdict(m99 < 5.0),
        verdict(hwm < 50.0)
    );
    Ok(())
}

/// Distinct values of `label` in lines of `metric` (any metric when empty).
fn distinct(body: &str, metric: &str, label: &str) -> usize {
    let key = format!("{label}=\"");
    let mut seen: Vec<&str> = body
        .lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(metric))
        .filter_map(|l| l.split(&key).nth(1)?.split('"').next())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// Each reader's time in a scrape (`stornet_scrape_collector_duration_seconds`), in ms,
/// slowest first.
fn collector_times(body: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = body
        .lines()
        .filter_map(|l| l.strip_prefix("stornet_scrape_collector_duration_seconds{collector=\""))
        .filter_map(|l| {
            let (name, rest) = l.split_once('"')?;
            let v: f64 = rest.rsplit(' ').next()?.parse().ok()?;
            Some((name.to_string(), v * 1e3))
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// The mean of the agent's own scrape duration histogram, in ms: the time from the request
/// to the encoded answer, without the HTTP exchange around it.
fn render_mean_ms(body: &str) -> Option<f64> {
    let value = |name: &str| -> Option<f64> {
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    };
    let sum = value("stornet_agent_scrape_duration_seconds_sum")?;
    let count = value("stornet_agent_scrape_duration_seconds_count")?;
    (count > 0.0).then(|| sum / count * 1e3)
}

/// Percentile by nearest rank.
fn pct(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// A thread doing 4 KiB O_DIRECT writes and reads on the device, about 1000 per second.
fn disk_load(d: &LoopDevice, stop: Arc<AtomicBool>, ios: Arc<AtomicU64>) -> Result<JoinHandle<()>> {
    let f = open_direct(&d.dev, true)?;
    Ok(std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        let mut buf = stornet_lab::blockdev::AlignedBuf::new(4096, 0x5a);
        let mut i: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let off = (i * 7919 % 8192) * 4096;
            let r = if i.is_multiple_of(2) {
                f.write_all_at(buf.as_slice(), off)
            } else {
                f.read_exact_at(buf.as_mut_slice(), off)
            };
            if r.is_err() {
                return;
            }
            ios.fetch_add(1, Ordering::Relaxed);
            i += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
    }))
}

/// Runs `f` on a new thread that has entered network namespace `ns`.
fn in_netns<T: Send + 'static>(
    ns: &Netns,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<Result<T>>> {
    let file = File::open(format!("/run/netns/{}", ns.name))?;
    Ok(std::thread::spawn(move || {
        // SAFETY: setns on an fd we own; affects only this thread.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!("setns: {}", std::io::Error::last_os_error());
        }
        Ok(f())
    }))
}

/// A listener in `b` on every peer address and one connection from `a` to each; a writer
/// thread keeps sending to all of them. Returns the threads (they end when `stop` is set).
fn tcp_peers(
    pair: &HostPair,
    peers: &[Ipv4Addr],
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> Result<Vec<JoinHandle<()>>> {
    let listener = in_netns(&pair.b, || TcpListener::bind(("0.0.0.0", PORT)))?
        .join()
        .map_err(|_| anyhow::anyhow!("listener thread"))???;
    listener.set_nonblocking(true)?;
    let n = peers.len();
    let server_stop = stop.clone();
    let server = std::thread::spawn(move || {
        let mut conns: Vec<TcpStream> = Vec::new();
        let mut buf = [0u8; 4096];
        while !server_stop.load(Ordering::Relaxed) {
            if conns.len() < n
                && let Ok((c, _)) = listener.accept()
            {
                let _ = c.set_nonblocking(true);
                conns.push(c);
            }
            for c in &mut conns {
                while matches!(c.read(&mut buf), Ok(k) if k > 0) {}
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let addrs: Vec<SocketAddr> = peers.iter().map(|p| SocketAddr::from((*p, PORT))).collect();
    let clients = in_netns(&pair.a, move || -> Result<Vec<TcpStream>> {
        addrs
            .iter()
            .map(|a| {
                TcpStream::connect_timeout(a, Duration::from_secs(2))
                    .with_context(|| format!("connecting to {a}"))
            })
            .collect()
    })?
    .join()
    .map_err(|_| anyhow::anyhow!("client thread"))???;
    let writer = std::thread::spawn(move || {
        let mut clients = clients;
        let msg = [0x42u8; 512];
        while !stop.load(Ordering::Relaxed) {
            for c in &mut clients {
                if c.write_all(&msg).is_ok() {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    Ok(vec![server, writer])
}

#[cfg(test)]
mod tests {
    use super::{collector_times, distinct, pct};

    #[test]
    fn reads_collector_times_slowest_first() {
        let body = "# TYPE x gauge\nstornet_scrape_collector_duration_seconds{collector=\"a\"} 0.001\nstornet_scrape_collector_duration_seconds{collector=\"b\"} 0.004\n";
        assert_eq!(
            collector_times(body),
            vec![("b".to_string(), 4.0), ("a".to_string(), 1.0)]
        );
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(pct(&xs, 50.0), 50.0);
        assert_eq!(pct(&xs, 99.0), 99.0);
        assert_eq!(pct(&[3.0], 99.0), 3.0);
    }

    #[test]
    fn counts_distinct_labels() {
        let body = "a{device=\"x\",op=\"r\"} 1\na{device=\"x\",op=\"w\"} 1\na{device=\"y\"} 1\nb{peer=\"p\"} 1\n";
        assert_eq!(distinct(body, "a", "device"), 2);
        assert_eq!(distinct(body, "", "peer"), 1);
    }
}
