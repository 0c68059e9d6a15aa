//! The agent's exposition formats as a real Prometheus reads them: with native histograms on,
//! Prometheus 2.42 asks for protobuf and stores the agent's histograms as native histograms;
//! a second job asks for text (`?format=text`) and keeps the classic buckets, a third for
//! OpenMetrics. Over the same IO on a loop device, `histogram_quantile` of the native series
//! and of the classic buckets agree within a bucket (a factor of 2 at schema 0), and their
//! counts are equal.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_reads, direct_writes};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::promserver::{PromConfig, PromServer, now};
use stornet_repo_checks::repo;

const T: &str = "service_prometheus_stores_native_histograms_that_agree_with_the_classic";
const PROTOBUF: &str =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

/// One HTTP/1.1 GET of `/metrics` with `accept` and `accept_encoding`: (content type,
/// content encoding, body bytes). Raw, as the body may be binary.
fn scrape(addr: SocketAddr, accept: &str, accept_encoding: &str) -> (String, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: agent\r\nAccept: {accept}\r\n\
         Accept-Encoding: {accept_encoding}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_lowercase();
    let body = raw[split + 4..].to_vec();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        header("content-length"),
        body.len().to_string(),
        "a whole body, not chunked: {head}"
    );
    (header("content-type"), header("content-encoding"), body)
}

/// Some IO of several sizes, writes and reads, so that the histograms have spread.
fn io_round(dev: &std::path::Path) {
    direct_writes(dev, 64, 4096).unwrap();
    direct_writes(dev, 8, 256 << 10).unwrap();
    direct_reads(dev, 16, 1 << 20).unwrap();
}

#[test]
fn service_prometheus_stores_native_histograms_that_agree_with_the_classic() {
    if !require_root(T) || !require_tool(T, "prometheus") {
        return;
    }
    let agent = AgentProcess::start(&[]).unwrap();
    let disk = LoopDevice::new("native", 64 << 20).unwrap();
    // The device's series exist before Prometheus starts.
    io_round(&disk.dev);

    let job = |name: &str, params: &str| {
        format!(
            "  - job_name: {name}\n{params}    static_configs:\n      - targets: ['{}']\n",
            agent.addr
        )
    };
    let mut cfg = PromConfig::scrape(
        "native",
        &[
            job("native", ""),
            job("classic", "    params:\n      format: [text]\n"),
            job("openmetrics", "    params:\n      format: [openmetrics]\n"),
        ]
        .concat(),
    );
    cfg.flags.push("--enable-feature=native-histograms".into());
    cfg.rule_files
        .push(repo::path("dashboards/prometheus/recording-rules.yml"));
    let prom = PromServer::start(&cfg).unwrap();
    let timeout = Duration::from_secs(30);
    for job in ["native", "classic", "openmetrics"] {
        prom.wait_for(&format!("up{{job=\"{job}\"}}"), timeout, |r| {
            r.len() == 1 && r[0].value() == 1.0
        })
        .unwrap();
    }

    let sel = |job: &str, op: &str| format!("job=\"{job}\",device=\"{}\",op=\"{op}\"", disk.name);
    let value = |expr: &str| {
        prom.query(expr, None)
            .unwrap()
            .first()
            .map_or(f64::NAN, |s| s.value())
    };
    // Every job's latest scrape holds the same counts (none is mid-way through the IO).
    let same_counts = || {
        let deadline = Instant::now() + timeout;
        loop {
            let got: Vec<[f64; 3]> = ["write", "read"]
                .iter()
                .map(|op| {
                    [
                        value(&format!(
                            "histogram_count(stornet_block_service_seconds{{{}}})",
                            sel("native", op)
                        )),
                        value(&format!(
                            "stornet_block_service_seconds_count{{{}}}",
                            sel("classic", op)
                        )),
                        value(&format!(
                            "stornet_block_service_seconds_count{{{}}}",
                            sel("openmetrics", op)
                        )),
                    ]
                })
                .collect();
            if got
                .iter()
                .all(|c| c[0] > 0.0 && c[0] == c[1] && c[1] == c[2])
            {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "native, classic and OpenMetrics counts differ: {got:?}; log:\n{}",
                prom.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    same_counts();
    let baseline = now();
    std::thread::sleep(Duration::from_secs(8));

    // The IO whose quantiles are compared: every scrape after `baseline` and before it has
    // the same counts in each job, so a 1m window starting in between holds the same IO.
    let io_start = now();
    while now() < io_start + 15.0 {
        io_round(&disk.dev);
    }
    let counts = same_counts();
    eprintln!("{T}: requests counted, (write, read) × (native, classic, OpenMetrics): {counts:?}");
    let native_buckets = value(&format!(
        "count(stornet_block_service_seconds_bucket{{{}}}) or vector(0)",
        sel("native", "write")
    ));
    eprintln!("{T}: classic _bucket series stored from the protobuf scrape: {native_buckets}");
    for job in ["native", "classic", "openmetrics"] {
        let all = value(&format!(
            "count({{job=\"{job}\",__name__=~\"stornet_.+\"}})"
        ));
        let created = value(&format!(
            "count({{job=\"{job}\",__name__=~\"stornet_.+_created\"}}) or vector(0)"
        ));
        eprintln!("{T}: {job}: {all} stornet_ series stored, {created} of them _created");
    }

    // Each format, plain and gzip: what it is called and what it weighs, now that the
    // series stand still.
    for (accept, want_type) in [
        ("text/plain;version=0.0.4", "text/plain; version=0.0.4"),
        (
            "application/openmetrics-text;version=1.0.0",
            "application/openmetrics-text; version=1.0.0",
        ),
        (
            PROTOBUF,
            "application/vnd.google.protobuf; proto=io.prometheus.client.metricfamily; encoding=delimited",
        ),
        ("application/x-unknown", "text/plain; version=0.0.4"),
    ] {
        let (ctype, encoding, body) = scrape(agent.addr, accept, "identity");
        assert!(ctype.starts_with(want_type), "{accept}: {ctype}");
        assert_eq!(encoding, "");
        let (gz_type, gz_encoding, gz) = scrape(agent.addr, accept, "gzip");
        assert_eq!(
            (gz_type.as_str(), gz_encoding.as_str()),
            (ctype.as_str(), "gzip")
        );
        assert_eq!(&gz[..2], [0x1f, 0x8b], "{accept}: a gzip stream");
        if want_type.starts_with("application/openmetrics") {
            assert!(body.ends_with(b"# EOF\n"));
        }
        eprintln!("{T}: {accept}: {} bytes, {} gzipped", body.len(), gz.len());
    }

    // Quantiles over 1m windows that start between `baseline` and `io_start`, at the same
    // times and step for both.
    let (from, to) = (baseline + 61.0, io_start + 59.0);
    std::thread::sleep(Duration::from_secs_f64((to + 2.0 - now()).max(0.0)));
    for (metric, op) in [
        ("stornet_block_service_seconds", "write"),
        ("stornet_block_service_seconds", "read"),
        ("stornet_block_io_size_bytes", "write"),
        ("stornet_block_io_size_bytes", "read"),
    ] {
        for q in [0.5, 0.9, 0.99] {
            let native = format!(
                "histogram_quantile({q}, rate({metric}{{{}}}[1m]))",
                sel("native", op)
            );
            let classic = format!(
                "histogram_quantile({q}, rate({metric}_bucket{{{}}}[1m]))",
                sel("classic", op)
            );
            let range = |expr: &str| {
                prom.query_range(expr, from, to, 1)
                    .unwrap()
                    .first()
                    .map(|s| s.samples.clone())
                    .unwrap_or_default()
            };
            let (nat, cla) = (range(&native), range(&classic));
            assert!(
                nat.len() >= 3 && nat.len() == cla.len(),
                "{metric} {op} q{q}: native {nat:?}, classic {cla:?}"
            );
            for (&(t, n), &(u, c)) in nat.iter().zip(&cla) {
                assert_eq!(t, u);
                let ratio = n / c;
                // One bucket is a factor of 2 at schema 0. Over the same IO the two differ
                // only by where the native boundaries lie: 2^-20 s is 0.954 µs, the bytes'
                // powers of two are the same.
                assert!(
                    (0.5..=2.0).contains(&ratio) && (0.9..=1.1).contains(&ratio),
                    "{metric} {op} q{q} at {t}: native {n}, classic {c}"
                );
            }
            let (n, c) = (nat.last().unwrap().1, cla.last().unwrap().1);
            eprintln!(
                "{T}: {metric} {op} q{q}: {} points, native {n:.7}, classic {c:.7}, ratio {:.4}",
                nat.len(),
                n / c
            );
        }
    }

    // The dashboards' p99 panels read recording rules, which take the classic buckets where
    // Prometheus has them and the native histogram where it has only that.
    let rule = |job: &str| {
        value(&format!(
            "instance_device_op:stornet_block_service_seconds:p99_5m{{{}}}",
            sel(job, "write")
        ))
    };
    let (n, c) = (rule("native"), rule("classic"));
    eprintln!("{T}: recorded p99 service time of writes: native {n:.7}, classic {c:.7}");
    assert!(
        (0.9..=1.1).contains(&(n / c)),
        "recorded p99: native {n}, classic {c}"
    );
}
