//! A replicated-write run in the lab, end to end: stornet-agent on the client host (watching
//! every lab namespace), `loadgen serve` on each replica host, `loadgen run --replica … --agent
//! … --record` on the client host (inside its disk's cgroup), then `stornet analyze` of the
//! record. What the scenario tests and the demo run; [`device_run`] runs the same on a device
//! that no replica backs (one served over NVMe/TCP).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{Disk, Host, Lab, Node, interrupt};
use crate::agent::AgentProcess;
use crate::replica::ServeProcess;

/// A loadgen workload, in fio's option names.
#[derive(Clone, Debug)]
pub struct Workload {
    /// `randwrite`, `randrw`, …
    pub rw: String,
    pub rwmixread: Option<u32>,
    /// One size, or a list (`4k,64k`) for a sweep.
    pub bs: String,
    pub iodepth: u32,
    pub numjobs: u32,
    /// Per job; none for a closed loop.
    pub rate_iops: Option<u32>,
    /// Bytes of the disk the run uses (`256m`).
    pub size: String,
    pub runtime: String,
    pub ramp_time: Option<String>,
    /// Timeline and agent sampling interval.
    pub interval: String,
    /// More loadgen options (`--replica_timeout=30s`).
    pub extra: Vec<String>,
}

impl Workload {
    /// The replicated workload of the buffer scenarios and the diagnosis bench: 64 KiB random
    /// writes at 100 per second on a fixed schedule (open loop), 4 in flight, after a 1 s
    /// ramp, with 1 s intervals: a quarter of a 200 Mbit/s port, in bursts a shallow buffer
    /// cannot hold.
    pub fn paced_writes(runtime: &str) -> Workload {
        Workload {
            rw: "randwrite".into(),
            rwmixread: None,
            bs: "64k".into(),
            iodepth: 4,
            numjobs: 1,
            rate_iops: Some(100),
            size: "256m".into(),
            runtime: runtime.into(),
            ramp_time: Some("1s".into()),
            interval: "1s".into(),
            extra: Vec::new(),
        }
    }

    /// A client's writes on a network file system (CephFS in the Ceph lab): 64 KiB random
    /// writes, 4 in flight as fast as they complete, on a 64 MiB file, after a 1 s ramp,
    /// with 1 s intervals.
    pub fn file_writes(runtime: &str) -> Workload {
        Workload {
            rate_iops: None,
            size: "64m".into(),
            ..Workload::paced_writes(runtime)
        }
    }

    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            format!("--rw={}", self.rw),
            // The scenarios measure the device, not the page cache.
            "--direct=1".into(),
            format!("--bs={}", self.bs),
            format!("--iodepth={}", self.iodepth),
            format!("--numjobs={}", self.numjobs),
            format!("--size={}", self.size),
            format!("--runtime={}", self.runtime),
            "--time_based".into(),
            "--group_reporting".into(),
            format!("--interval={}", self.interval),
        ];
        if let Some(m) = self.rwmixread {
            a.push(format!("--rwmixread={m}"));
        }
        if let Some(r) = self.rate_iops {
            a.push(format!("--rate_iops={r}"));
        }
        if let Some(r) = &self.ramp_time {
            a.push(format!("--ramp_time={r}"));
        }
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// A directory in /dev/shm for a replica's files, removed on drop.
struct ReplicaDir(PathBuf);

impl ReplicaDir {
    fn new() -> Result<ReplicaDir> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let p = PathBuf::from(format!(
            "{}/stornet-lab-replica-n{}-{}",
            super::leftovers::SHM,
            SEQ.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        ));
        std::fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(ReplicaDir(p))
    }
}

impl Drop for ReplicaDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The agent on the client host and a replica on each of the others named; dropped before
/// the lab.
pub struct ReplicatedRun<'a> {
    pub lab: &'a Lab,
    pub client: &'a Host,
    pub replicas: Vec<&'a Host>,
    pub agent: AgentProcess,
    /// One `loadgen serve` per replica host, in the same order.
    pub serves: Vec<ServeProcess>,
    /// With [`ReplicatedRun::start_nodes`]: each replica host as a node, in the same order
    /// (dropped after the servers in them).
    pub nodes: Vec<Node>,
    _dirs: Vec<ReplicaDir>,
}

/// What one run gave.
pub struct Outcome {
    /// `loadgen run --output-format=json` (null when the run failed).
    pub report: Value,
    /// loadgen's error line when the run failed after writing its record.
    pub failure: Option<String>,
    /// `stornet analyze --format json`.
    pub analysis: Value,
    pub record: PathBuf,
    pub loadgen_stderr: String,
    /// Independent counts over the run: TCP segments the client retransmitted
    /// (/proc/net/snmp in its namespace), packets the switch ports' qdiscs dropped and
    /// frames the switch ports refused on receive (`tc -s`, `ip -s link`).
    pub retransmits: u64,
    pub qdisc_drops: u64,
    pub port_rx_drops: u64,
    pub seconds: f64,
}

impl<'a> ReplicatedRun<'a> {
    /// Starts the agent on `client` (watching the other lab namespaces) and `loadgen serve`
    /// on `replica`, and waits until `client` reaches every host.
    pub fn start(lab: &'a Lab, client: &str, replica: &str) -> Result<ReplicatedRun<'a>> {
        Self::start_many(lab, client, &[replica])
    }

    /// As [`ReplicatedRun::start`], with a replica on each of `replicas`: every write goes
    /// to all of them.
    pub fn start_many(lab: &'a Lab, client: &str, replicas: &[&str]) -> Result<ReplicatedRun<'a>> {
        Self::start_as(lab, client, replicas, false)
    }

    /// As [`ReplicatedRun::start_many`], with every replica host a [`Node`]: its own disk,
    /// cgroups and agent, which the runs sample too.
    pub fn start_nodes(lab: &'a Lab, client: &str, replicas: &[&str]) -> Result<ReplicatedRun<'a>> {
        Self::start_as(lab, client, replicas, true)
    }

    fn start_as(
        lab: &'a Lab,
        client: &str,
        replicas: &[&str],
        nodes: bool,
    ) -> Result<ReplicatedRun<'a>> {
        let client = lab.host(client);
        let agent = client_agent(lab, client)?;
        let (mut hosts, mut serves, mut dirs, mut made) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for name in replicas {
            let replica = lab.host(name);
            let addr = replica.socket(replica.free_port()?);
            if nodes {
                let node = Node::new(replica)?;
                let prepare = |cmd: &mut std::process::Command| node.enter_on_spawn(cmd);
                serves.push(ServeProcess::start_with(
                    &replica.ns,
                    addr,
                    node.dir(),
                    &[],
                    &prepare,
                )?);
                made.push(node);
            } else {
                let dir = ReplicaDir::new()?;
                serves.push(ServeProcess::start(&replica.ns, addr, &dir.0, &[])?);
                dirs.push(dir);
            }
            hosts.push(replica);
        }
        lab.wait_connected(client)?;
        Ok(ReplicatedRun {
            lab,
            client,
            replicas: hosts,
            agent,
            serves,
            nodes: made,
            _dirs: dirs,
        })
    }

    /// The replicas' addresses, in the order they were named.
    pub fn replica_addrs(&self) -> Vec<SocketAddr> {
        self.serves.iter().map(|s| s.addr).collect()
    }

    /// Runs `w` against `disk` with every write replicated, records it to
    /// `out_dir/<name>.json` and analyses the record (`html`: also write the HTML report).
    /// A failed run is an error.
    pub fn run(
        &self,
        disk: &Disk,
        w: &Workload,
        out_dir: &Path,
        name: &str,
        html: Option<&Path>,
    ) -> Result<Outcome> {
        let o = self.run_to_end(disk, w, out_dir, name, html)?;
        if let Some(f) = &o.failure {
            bail!("loadgen run in {} failed: {f}", self.client.ns.name);
        }
        Ok(o)
    }

    /// Like [`ReplicatedRun::run`], but a run that failed after writing its record (a
    /// replica that stopped answering) is analysed too, with the failure in the outcome.
    pub fn run_to_end(
        &self,
        disk: &Disk,
        w: &Workload,
        out_dir: &Path,
        name: &str,
        html: Option<&Path>,
    ) -> Result<Outcome> {
        let mut args: Vec<String> = vec![format!("--filename={}", disk.path().display())];
        args.extend(w.args());
        args.extend(
            self.replica_addrs()
                .iter()
                .map(|a| format!("--replica={a}")),
        );
        args.push(format!(
            "--agent={}=http://{}",
            self.client.name, self.agent.addr
        ));
        args.extend(self.nodes.iter().map(Node::agent_flag));
        for n in &self.nodes {
            n.clear_volumes()
                .with_context(|| format!("clearing the volumes of node {}", n.name))?;
        }
        let mut cmd = loadgen_run(self.client, &args, out_dir, name)?;
        disk.enter_on_spawn(&mut cmd)?;
        finish(self.lab, self.client, cmd, out_dir, name, html)
    }
}

/// stornet-agent on `client`, watching every other namespace of the lab (hosts and switch).
pub fn client_agent(lab: &Lab, client: &Host) -> Result<AgentProcess> {
    let watched: Vec<String> = lab
        .namespaces()
        .into_iter()
        .filter(|ns| ns.name != client.ns.name)
        .map(|ns| format!("{:?}", ns.name))
        .collect();
    // A high peer cap: other tests on the machine create peers too, and ours must keep
    // their own label.
    let config = format!(
        "[net]\nmax_peers = 4096\nnamespaces = [{}]\n",
        watched.join(", ")
    );
    AgentProcess::in_netns(&client.ns, &config)
}

/// Runs `w` from `client` on `device`, a block device of the host that no replica backs
/// (one served over NVMe/TCP, say), sampling `agent`; records it to `out_dir/<name>.json`
/// and analyses the record. A run that failed after writing its record is analysed too, with
/// the failure in the outcome.
pub fn device_run(
    lab: &Lab,
    client: &Host,
    agent: &AgentProcess,
    device: &Path,
    w: &Workload,
    out_dir: &Path,
    name: &str,
) -> Result<Outcome> {
    let mut args = vec![format!("--filename={}", device.display())];
    args.extend(w.args());
    args.push(format!("--agent={}=http://{}", client.name, agent.addr));
    let cmd = loadgen_run(client, &args, out_dir, name)?;
    finish(lab, client, cmd, out_dir, name, None)
}

/// `loadgen run --name=NAME ARGS --record=out_dir/NAME.json …` in `client`'s namespace.
fn loadgen_run(client: &Host, args: &[String], out_dir: &Path, name: &str) -> Result<Command> {
    let bin = crate::bins::path("loadgen");
    let mut cmd = client.ns.command(bin.to_str().context("binary path")?);
    cmd.arg("run")
        .arg(format!("--name={name}"))
        .args(args)
        .args([
            format!(
                "--record={}",
                out_dir.join(format!("{name}.json")).display()
            ),
            "--output-format=json".into(),
            "--eta=never".into(),
        ]);
    Ok(cmd)
}

/// Runs `cmd` (from [`loadgen_run`]) to its end, counts what the kernel saw meanwhile and
/// analyses the record.
fn finish(
    lab: &Lab,
    client: &Host,
    cmd: Command,
    out_dir: &Path,
    name: &str,
    html: Option<&Path>,
) -> Result<Outcome> {
    let record = out_dir.join(format!("{name}.json"));
    let _ = std::fs::remove_file(&record);
    let snmp0 = client.ns.snmp_tcp("RetransSegs")?;
    let qdisc0 = lab.port_qdisc_drops()?;
    let rx0 = lab.port_rx_drops()?;
    let start = Instant::now();
    let (code, stdout, stderr) = run_interruptible(cmd)?;
    let seconds = start.elapsed().as_secs_f64();
    let (report, failure) = match code {
        Some(0) => (
            serde_json::from_str(&stdout)
                .with_context(|| format!("loadgen's report is not JSON; stderr: {stderr}"))?,
            None,
        ),
        Some(1) if record.exists() => (
            Value::Null,
            Some(stderr.trim().lines().last().unwrap_or_default().to_string()),
        ),
        _ => bail!(
            "loadgen run in {} exited with {code:?}: {}",
            client.ns.name,
            stderr.trim()
        ),
    };
    let retransmits = client.ns.snmp_tcp("RetransSegs")? - snmp0;
    let qdisc_drops = lab.port_qdisc_drops()? - qdisc0;
    let port_rx_drops = lab.port_rx_drops()? - rx0;
    let analysis = analyze(&record, html)?;
    Ok(Outcome {
        report,
        failure,
        analysis,
        record,
        loadgen_stderr: stderr,
        retransmits,
        qdisc_drops,
        port_rx_drops,
        seconds,
    })
}

/// `stornet analyze RECORD --format json [--html FILE]`.
pub fn analyze(record: &Path, html: Option<&Path>) -> Result<Value> {
    let mut cmd = Command::new(crate::bins::path("stornet"));
    cmd.arg("analyze").arg(record).args(["--format", "json"]);
    if let Some(h) = html {
        cmd.arg("--html").arg(h);
    }
    let (code, stdout, stderr) = run_interruptible(cmd)?;
    if code != Some(0) {
        bail!(
            "stornet analyze {} exited with {code:?}: {}",
            record.display(),
            stderr.trim()
        );
    }
    serde_json::from_str(&stdout).context("stornet analyze printed no JSON")
}

/// Runs a command to its end, capturing stdout and stderr (through files, so neither pipe
/// can fill); on SIGINT or SIGTERM ([`interrupt`]) it stops the command first.
fn run_interruptible(mut cmd: Command) -> Result<(Option<i32>, String, String)> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir().join(format!(
        "stornet-lab-out-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let (out_path, err_path) = (base.with_extension("out"), base.with_extension("err"));
    let mut child: Child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let mut stopped = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if interrupt::interrupted() && !stopped {
            // loadgen ends its run on SIGINT as on Ctrl-C.
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            stopped = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| {
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let _ = std::fs::remove_file(p);
        s
    };
    let (out, err) = (read(&out_path), read(&err_path));
    interrupt::check()?;
    Ok((status.code(), out, err))
}

/// Latency of one direction of a point in loadgen's JSON report
/// (`loadgen.points[i].read|write`), from each IO's intended start.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    pub ios: f64,
    pub iops: f64,
    pub bytes_per_second: f64,
    pub mean_s: f64,
    pub p95_s: f64,
    pub p99_s: f64,
}

impl Outcome {
    /// Sweep points in the report.
    pub fn points(&self) -> usize {
        self.report["loadgen"]["points"]
            .as_array()
            .map_or(0, Vec::len)
    }

    /// `read` or `write` latency of point `i`.
    pub fn latency(&self, i: usize, dir: &str) -> Latency {
        let d = &self.report["loadgen"]["points"][i][dir];
        let lat = &d["intended_lat_ns"];
        let f = |v: &Value| v.as_f64().unwrap_or(0.0);
        Latency {
            ios: f(&d["ios"]),
            iops: f(&d["iops"]),
            bytes_per_second: f(&d["bw_bytes"]),
            mean_s: f(&lat["mean"]) / 1e9,
            p95_s: f(&lat["p95"]) / 1e9,
            p99_s: f(&lat["p99"]) / 1e9,
        }
    }

    /// CPU use over point `i`: loadgen's (percent of one CPU, microseconds per IO) and the
    /// whole machine's (percent of all CPUs).
    pub fn cpu(&self, i: usize) -> (f64, f64, f64) {
        let c = &self.report["loadgen"]["points"][i]["cpu"];
        let f = |k: &str| c[k].as_f64().unwrap_or(0.0);
        (f("process_pct"), f("per_io_us"), f("system_pct"))
    }

    /// The overall verdict's cause (`none`, `network_congestion`, …).
    pub fn cause(&self) -> &str {
        self.analysis["verdict"]["cause"].as_str().unwrap_or("")
    }

    /// The verdict of sweep point `i` (the overall one for a run without a sweep).
    pub fn point_verdict(&self, i: usize) -> &Value {
        match self.analysis["points"].as_array() {
            Some(p) if !p.is_empty() => &p[i]["verdict"],
            _ => &self.analysis["verdict"],
        }
    }

    pub fn evidence(&self) -> Vec<String> {
        self.analysis["verdict"]["evidence"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sum over point `i` of a series of a host in the record, such as
    /// `["peers", "198.18.0.2", "retransmits"]`, as the agent measured it.
    pub fn record_sum(&self, i: usize, host: &str, path: &[&str]) -> Result<f64> {
        let h = self.record_host(i, host)?;
        let mut v = &h;
        for seg in path {
            v = &v[*seg];
        }
        Ok(series_sum(v))
    }

    /// Host `host` of point `i` in the record, as the agent measured it.
    pub fn record_host(&self, i: usize, host: &str) -> Result<Value> {
        let mut rec: Value = serde_json::from_str(&std::fs::read_to_string(&self.record)?)?;
        let hosts = rec["points"][i]["run"]["hosts"]
            .as_array_mut()
            .context("no hosts in the record")?;
        let at = hosts
            .iter()
            .position(|h| h["name"] == host)
            .with_context(|| format!("no host {host} in the record"))?;
        Ok(hosts.swap_remove(at))
    }

    /// Every candidate the analysis weighed, of every host and direction.
    pub fn candidates(&self) -> impl Iterator<Item = &Value> {
        self.analysis["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|h| h["directions"].as_array().into_iter().flatten())
            .flat_map(|d| d["candidates"].as_array().into_iter().flatten())
    }
}

/// The sum of a recorded series (0 for none).
pub fn series_sum(v: &Value) -> f64 {
    v.as_array()
        .map_or(0.0, |a| a.iter().filter_map(Value::as_f64).sum())
}
