//! The agent as Prometheus sees it: `promtool check metrics` accepts a real scrape, and a real
//! Prometheus server scrapes it, over plain HTTP and over TLS with basic auth configured the
//! way any exporter's scrape job is.

use std::time::Duration;

use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::blockdev::{LoopDevice, direct_writes};
use stornet_lab::metrics::http_get;
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::promserver::{PromConfig, PromServer};
use stornet_lab::tls::{TestPki, https_get};

#[test]
fn service_promtool_accepts_a_real_scrape() {
    if !require_root("service_promtool_accepts_a_real_scrape")
        || !require_tool("service_promtool_accepts_a_real_scrape", "promtool")
    {
        return;
    }
    let agent = AgentProcess::start(&[]).unwrap();
    let disk = LoopDevice::new("promtool", 16 << 20).unwrap();
    direct_writes(&disk.dev, 100, 4096).unwrap();
    // Two scrapes, so the scrape-duration histogram has data too.
    http_get(agent.addr, "/metrics").unwrap();
    let (code, body) = http_get(agent.addr, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(
        body.contains(&format!("device=\"{}\"", disk.name)),
        "{body}"
    );
    let report = stornet_repo_checks::prom_rules::check_metrics(&body).unwrap();
    assert!(
        report.trim().is_empty(),
        "promtool found problems: {report}"
    );
}

#[test]
fn service_prometheus_scrapes_plain_and_tls_with_basic_auth() {
    if !require_root("service_prometheus_scrapes_plain_and_tls_with_basic_auth")
        || !require_tool("service_prometheus_scrapes", "prometheus")
    {
        return;
    }
    let plain = AgentProcess::start(&[]).unwrap();

    let pki = TestPki::generate("prom").unwrap();
    let hash = bcrypt::hash("scrape-pw", 4).unwrap();
    let web = pki.dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    )
    .unwrap();
    let web_flag = format!("--web.config.file={}", web.display());
    let mut tls = AgentProcess::launch(&Launch {
        args: &[&web_flag],
        ..Default::default()
    })
    .unwrap();
    let (addr, ca) = (tls.addr, pki.ca_pem.clone());
    tls.wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();

    // Block IO, so that block series exist whatever else the host does.
    let disk = LoopDevice::new("prom", 16 << 20).unwrap();
    direct_writes(&disk.dev, 200, 4096).unwrap();

    let prom = PromServer::start(&PromConfig::scrape(
        "scrape",
        &format!(
            "  - job_name: stornet\n    static_configs:\n      - targets: ['{}']\n\
             \x20 - job_name: stornet-tls\n    scheme: https\n    tls_config:\n      ca_file: {}\n\
             \x20   basic_auth:\n      username: prometheus\n      password: scrape-pw\n\
             \x20   static_configs:\n      - targets: ['{}']\n",
            plain.addr,
            pki.ca_file.display(),
            tls.addr
        ),
    ))
    .unwrap();
    let timeout = Duration::from_secs(30);
    for job in ["stornet", "stornet-tls"] {
        prom.wait_for(&format!("up{{job=\"{job}\"}}"), timeout, |r| {
            r.len() == 1 && r[0].value() == 1.0
        })
        .unwrap();
        let r = prom
            .wait_for(
                &format!("count({{__name__=~\"stornet_block_.+\",job=\"{job}\"}})"),
                timeout,
                |r| r.first().is_some_and(|s| s.value() >= 1.0),
            )
            .unwrap();
        println!("{job}: up == 1, {} stornet_block_* series", r[0].value());
        let r = prom
            .wait_for(
                &format!(
                    "stornet_block_io_size_bytes_count{{job=\"{job}\",device=\"{}\",op=\"write\"}}",
                    disk.name
                ),
                timeout,
                |r| r.len() == 1,
            )
            .unwrap();
        assert!(r[0].value() >= 200.0, "{job}: {r:?}");
    }
}
