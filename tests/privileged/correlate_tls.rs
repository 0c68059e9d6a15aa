//! `loadgen run --agent https://…`: an agent set up as docs/operations.md recommends (TLS and
//! basic auth in its web config, a CA made here) is sampled through its CA; the record holds
//! what the agent's own counter says. A CA that did not sign the agent's certificate stops
//! the run before any IO with one line naming the agent, its URL and the cause; the explicit
//! insecure flag accepts the certificate. All traffic is on loopback.

use record::Record;
use stornet_lab::agent::{AgentProcess, Launch};
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::loadgen::run;
use stornet_lab::metrics::{basic_auth, parse, sum};
use stornet_lab::privilege::require_root;
use stornet_lab::tls::{TestPki, https_get};

fn record_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("stornet-tls-{tag}-{}.json", std::process::id()))
}

/// Writes loadgen issued to the device, as the agent counted them (over https).
fn agent_writes(agent: &AgentProcess, ca: &str, auth: &str, device: &str) -> f64 {
    let (code, body) = https_get(agent.addr, "/metrics", ca, &[("Authorization", auth)])
        .expect("the agent answers over https");
    assert_eq!(code, 200, "{body}");
    sum(
        &parse(&body).unwrap(),
        "stornet_block_io_size_bytes_count",
        &[("device", device), ("op", "write")],
    )
}

#[test]
fn correlate_tls_agent_sampled_through_its_ca() {
    if !require_root("correlate_tls_agent_sampled_through_its_ca") {
        return;
    }
    let pki = TestPki::generate("loadgen").unwrap();
    let other = TestPki::generate("loadgen-other").unwrap();
    let hash = bcrypt::hash("sample-pw", 4).unwrap();
    let web = pki.dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  loadgen: '{hash}'\n"
        ),
    )
    .unwrap();
    let web_flag = format!("--web.config.file={}", web.display());
    let mut agent = AgentProcess::launch(&Launch {
        args: &[&web_flag],
        ..Default::default()
    })
    .unwrap();
    let (addr, ca) = (agent.addr, pki.ca_pem.clone());
    agent
        .wait_until(|| https_get(addr, "/-/healthy", &ca, &[]).is_ok())
        .unwrap();
    let auth = basic_auth("loadgen", "sample-pw");
    let disk = LoopDevice::new("tlsrec", 32 << 20).expect("loop device");
    disk.set_queue_attr("nomerges", "2").unwrap();
    let url = format!("https://loadgen:sample-pw@{addr}");
    let shown = format!("https://{addr}/metrics");
    let filename = format!("--filename={}", disk.dev.display());
    let loadgen = |tag: &str, extra: &[&str]| {
        let rec = record_path(tag);
        let agent_flag = format!("--agent=h1={url}");
        let record_flag = format!("--record={}", rec.display());
        let mut args = vec![
            "--name=tls",
            filename.as_str(),
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=4",
            "--rate_iops=500",
            "--time_based",
            "--runtime=2",
            "--interval=250ms",
            "--output-format=json",
            agent_flag.as_str(),
            record_flag.as_str(),
        ];
        args.extend_from_slice(extra);
        (run(&args).unwrap(), rec)
    };

    // Trusting the agent's CA: every boundary sampled, the record's writes the agent's.
    let ca_flag = format!("--agent-ca-file={}", pki.ca_file.display());
    let before = agent_writes(&agent, &ca, &auth, &disk.name);
    let (r, rec) = loadgen("ca", &[&ca_flag]);
    let after = agent_writes(&agent, &ca, &auth, &disk.name);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let record = Record::read(&rec).expect("the record reads back");
    let _ = std::fs::remove_file(&rec);
    assert_eq!(record.agents[0].url, shown, "no password in the record");
    let p = &record.points[0];
    assert_eq!(p.sampling[0].missing, 0, "{:?}", p.sampling[0]);
    let recorded: f64 =
        p.run.host("h1").expect("the agent's host").devices[&disk.name].ops["write"]
            .ios
            .iter()
            .flatten()
            .sum();
    println!(
        "over https: record {recorded} writes, the agent's counter {}",
        after - before
    );
    assert!(recorded > 500.0, "{recorded} writes recorded");
    assert_eq!(
        recorded,
        after - before,
        "the record holds the agent's count"
    );

    // A CA that did not sign the agent's certificate: a usage error before any IO.
    let wrong = format!("--agent-ca-file={}", other.ca_file.display());
    let before = agent_writes(&agent, &ca, &auth, &disk.name);
    let (r, rec) = loadgen("wrong-ca", &[&wrong]);
    let err = r.stderr.trim_end();
    assert_eq!(r.code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        // Both test CAs carry rcgen's default name, so rustls finds the other one as the
        // issuer and rejects its signature (BadSignature) rather than not finding it.
        err.contains(&format!(
            "--agent h1 ({shown}): TLS handshake failed: invalid peer certificate: "
        )),
        "{err}"
    );
    assert!(!rec.exists(), "no record");
    assert_eq!(
        agent_writes(&agent, &ca, &auth, &disk.name),
        before,
        "no IO ran"
    );
    // Without a CA file the Mozilla roots do not know the test CA either.
    let (r, _) = loadgen("no-ca", &[]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("TLS handshake failed"), "{}", r.stderr);

    // The insecure flag, given explicitly, accepts the certificate.
    let (r, rec) = loadgen("insecure", &["--agent-insecure-skip-verify"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let record = Record::read(&rec).expect("the record reads back");
    let _ = std::fs::remove_file(&rec);
    assert_eq!(record.points[0].sampling[0].missing, 0);
}
