//! What every scenario shares: the two-host lab behind a switch, a run directory kept when
//! a scenario fails (with the run record, for `loadgen analyze`), and printing the numbers.

use std::path::PathBuf;

use stornet_lab::lab::run::Latency;
use stornet_lab::lab::{Disk, DiskSpec, HostSpec, Lab, Outcome, ReplicatedRun, Shaping, Workload};

/// The client (loadgen and the agent) and the replica (`loadgen serve`).
pub const CLIENT: &str = "a";
pub const REPLICA: &str = "b";

/// Disks are 1 GiB files in /dev/shm; the runs use their first 256 MiB.
pub const DISK_BYTES: u64 = 1 << 30;

/// A directory for the run records, removed when the scenario passes and kept (and named)
/// when it fails.
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    pub fn new(scenario: &str) -> RunDir {
        let path = std::env::temp_dir().join(format!(
            "stornet-scenario-{scenario}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).expect("creating the run directory");
        RunDir { path }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("STORNET_KEEP_RUNS").is_some() {
            eprintln!(
                "the run records are kept in {} (stornet analyze FILE explains each)",
                self.path.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Two hosts whose switch ports are shaped and sized as given.
pub fn two_hosts(tag: &str, client: HostSpec, replica: HostSpec) -> Lab {
    Lab::new(tag, &[client, replica]).expect("building the lab")
}

/// The client, replica b behind a deep port and a second replica (`second`) behind a port
/// shaped by `shaping`.
pub fn client_and_two_replicas(tag: &str, second: &str, shaping: Shaping) -> Lab {
    Lab::new(
        tag,
        &[
            HostSpec::new(CLIENT).shaped(Shaping::deep()),
            HostSpec::new(REPLICA).shaped(Shaping::deep()),
            HostSpec::new(second).shaped(shaping),
        ],
    )
    .expect("building the lab")
}

pub fn disk(tag: &str, spec: DiskSpec) -> Disk {
    Disk::new(tag, spec).expect("creating the disk")
}

/// Runs `w` once on `lab` (agent on the client, replica on the other host) and prints the
/// key numbers.
pub fn run(lab: &Lab, disk: &Disk, w: &Workload, dir: &RunDir, name: &str) -> Outcome {
    let rr = ReplicatedRun::start(lab, CLIENT, REPLICA).expect("starting the agent and replica");
    let o = rr
        .run(disk, w, &dir.path, name, None)
        .unwrap_or_else(|e| panic!("{name}: {e:#}\nagent log:\n{}", rr.agent.log()));
    print_outcome(name, &o);
    check_live_verdicts(name, &o);
    o
}

/// The verdicts loadgen reached row by row while the run went on (the JSON report's
/// timeline): each is the analysis of the record's first `intervals` intervals, which the
/// agent's samples had closed by that row, and most rows carry one.
pub fn check_live_verdicts(name: &str, o: &Outcome) {
    let rows = o.report["loadgen"]["points"][0]["timeline"]
        .as_array()
        .expect("the report's timeline");
    let record = record::Record::read(&o.record).expect("the run record");
    let run = &record.points[0].run;
    let mut causes: Vec<String> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let v = &row["verdict"];
        if v.is_null() {
            continue;
        }
        let k = v["intervals"].as_u64().expect("intervals") as usize;
        assert!(
            (1..=i + 1).contains(&k),
            "{name}: row {i} has a verdict on {k} intervals"
        );
        let cause = v["cause"].as_str().expect("a cause").to_string();
        // The last interval's values may still grow after the run (the closing scrape).
        if k < run.len() {
            let again = analysis::analyze(&run.first(k)).expect("the record's first intervals");
            assert_eq!(
                (cause.as_str(), v["location"].as_str()),
                (
                    again.verdict.cause.name(),
                    again.verdict.location.as_deref()
                ),
                "{name}: the live verdict at row {i} on {k} intervals"
            );
            let confidence = v["confidence"].as_f64().expect("a confidence");
            assert!((confidence - again.verdict.confidence).abs() < 1e-9);
        }
        causes.push(cause);
    }
    assert!(
        causes.len() * 2 >= rows.len(),
        "{name}: live verdicts on only {} of {} rows",
        causes.len(),
        rows.len()
    );
    let first = causes.iter().position(|c| c == o.cause());
    println!(
        "    live: {} verdicts over {} rows, the run's verdict {} first at verdict {}",
        causes.len(),
        rows.len(),
        o.cause(),
        first.map_or("never".into(), |f| (f + 1).to_string())
    );
}

pub fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1e3)
}

pub fn print_outcome(name: &str, o: &Outcome) {
    let w: Latency = o.latency(0, "write");
    let writes = match &o.failure {
        None => format!(
            "writes {:.0} IOPS, mean {}, p95 {}, p99 {}",
            w.iops,
            ms(w.mean_s),
            ms(w.p95_s),
            ms(w.p99_s)
        ),
        Some(_) => "the run failed (no report; its record is analysed)".into(),
    };
    println!(
        "{name}: verdict {} | {writes} | retransmits {}, switch qdisc drops {}, switch port \
         rx drops {} | {:.0} s",
        o.cause(),
        o.retransmits,
        o.qdisc_drops,
        o.port_rx_drops,
        o.seconds
    );
    for e in o.evidence() {
        println!("    {e}");
    }
}

/// The verdict is `cause`, placed where `place` says (`location` contains it).
pub fn assert_verdict(o: &Outcome, cause: &str, place: &str) {
    assert_eq!(o.cause(), cause, "{:#}", o.analysis["verdict"]);
    let location = o.analysis["verdict"]["location"].as_str().unwrap_or("");
    assert!(
        location.contains(place),
        "the cause is placed at {place}: {location}"
    );
}

/// The replica's address as the agent labels it.
pub fn replica_ip(lab: &Lab) -> String {
    lab.host(REPLICA).addr.to_string()
}

/// The sum of a series of the client host in the record (`["peers", ip, "retransmits"]`),
/// as the agent counted it.
pub fn recorded(o: &Outcome, path: &[&str]) -> f64 {
    o.record_sum(0, CLIENT, path)
        .unwrap_or_else(|e| panic!("reading {path:?} from the record: {e:#}"))
}

/// Names of the candidates whose requirement is met, for messages.
pub fn confirmed(o: &Outcome) -> Vec<String> {
    o.candidates()
        .filter(|c| c["requirement_met"] == true)
        .map(|c| format!("{} at {}", c["cause"], c["location"]))
        .collect()
}

/// The verdict's evidence names replica `addr` as healthy.
pub fn assert_named_healthy(o: &Outcome, addr: &str) {
    let evidence = o.evidence();
    assert!(
        evidence
            .iter()
            .any(|e| e.contains(&format!("replica {addr}")) && e.contains("healthy")),
        "the evidence names {addr} as healthy: {evidence:#?}"
    );
}
