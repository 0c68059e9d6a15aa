use std::time::{Duration, Instant};

use stornet_lab::agent::free_port;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::{Run, command, num};
use stornet_lab::metrics::{http_get, parse, sum};
use stornet_lab::privilege::{require_root, require_tool};

/// --metrics-address serves the run's live metrics: counters grow during the run, the last
/// interval's latency is a summary with quantiles, the text passes `promtool check metrics`,
/// and the last scrape never exceeds the final report.
#[test]
fn loadgen_serves_live_metrics() {
    if !require_root("loadgen_serves_live_metrics")
        || !require_tool("loadgen_serves_live_metrics", "promtool")
    {
        return;
    }
    let disk = LoopDevice::new("lgmetrics", 64 << 20).expect("loop device");
    let addr = format!("127.0.0.1:{}", free_port().unwrap());
    let child = command(&[
        "--filename",
        disk.dev.to_str().unwrap(),
        "--rw=randread",
        "--bs=4k",
        "--iodepth=4",
        "--rate_iops=2000",
        "--time_based",
        "--runtime=4",
        "--interval=500ms",
        "--output-format=json",
        &format!("--metrics-address={addr}"),
    ])
    .spawn()
    .expect("loadgen starts");
    let sock = addr.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut scrapes = Vec::new();
    while scrapes.len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1200));
        if let Ok((200, body)) = http_get(sock, "/metrics") {
            scrapes.push(body);
        }
    }
    let out = child.wait_with_output().expect("loadgen exits");
    let r = Run::from_output(out);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(scrapes.len(), 2, "two scrapes during the run");
    let read = |body: &str| {
        sum(
            &parse(body).unwrap(),
            "stornet_loadgen_ios_total",
            &[("op", "read")],
        )
    };
    let (a, b) = (read(&scrapes[0]), read(&scrapes[1]));
    assert!(a > 0.0 && b > a, "read IOs {a} then {b}");
    let last = parse(&scrapes[1]).unwrap();
    assert!(
        sum(
            &last,
            "stornet_loadgen_latency_seconds_count",
            &[("op", "read")]
        ) > 0.0
    );
    assert!(sum(&last, "stornet_loadgen_interval_iops", &[("op", "read")]) > 0.0);
    // The last interval's latency is a summary: quantiles in order, counted as the histogram.
    let q = |q: &str| {
        sum(
            &last,
            "stornet_loadgen_interval_latency_seconds",
            &[("op", "read"), ("quantile", q)],
        )
    };
    let qs = [q("0.5"), q("0.9"), q("0.99"), q("0.999"), q("1")];
    assert!(qs[0] > 0.0 && qs.windows(2).all(|w| w[0] <= w[1]), "{qs:?}");
    assert_eq!(
        sum(
            &last,
            "stornet_loadgen_interval_latency_seconds_count",
            &[("op", "read")]
        ),
        sum(
            &last,
            "stornet_loadgen_latency_seconds_count",
            &[("op", "read")]
        )
    );
    let total = num(&r.json().unwrap(), "jobs/0/read/total_ios");
    assert!(b <= total, "scraped {b} > reported {total}");

    stornet_repo_checks::prom_rules::check_metrics(&scrapes[1]).unwrap();
}
