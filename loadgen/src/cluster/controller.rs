//! `loadgen run --client …`: the job on every host at one instant. Every host is reached,
//! its version and token checked and its clock measured before any job is sent; every job
//! is checked and laid out on its host before any starts; a host that fails mid-run stops
//! the others, and what was measured is still written, marked incomplete.
//!
//! A host cannot hang or exhaust the controller: each exchange has one deadline however
//! the bytes trickle, writes give up, a host's result is capped, and a host that keeps
//! running past its job's planned end is stopped and then given up.

use std::io::BufReader;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::args::{self, HostJob};
use super::clock::{self, Estimate, Exchange};
use super::merge::{self, Outcome};
use super::protocol::{self, Deadline, JobFile, Msg};
use crate::console::plain;
use crate::error::Failure;
use crate::options::Plan;
use crate::options::parse::{JobFiles, Parsed, parse_args_from};
use crate::results::report::{self, fio_json};
use record::Record;

/// Exchanges per host for its clock estimate.
const CLOCK_EXCHANGES: usize = 8;
/// Default silence after which a host has failed.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Laying out a job's files can take long: the wait for `ready`.
const PREPARE: Duration = Duration::from_secs(600);

/// Extra time a message gets for each MiB it holds (a large result on a slow link).
const PER_MIB: Duration = Duration::from_secs(1);

struct Conn {
    s: Arc<TcpStream>,
    r: BufReader<Deadline>,
    /// The time each exchange has, in all.
    within: Duration,
}

impl Conn {
    /// Sends `m` and reads the answer, both within the exchange's time.
    fn ask(&mut self, m: &Msg) -> Result<Msg, String> {
        self.send(m)?;
        self.next()
    }
    fn send(&self, m: &Msg) -> Result<(), String> {
        protocol::send_within(&self.s, m, self.within)
    }
    /// The next message, whole within the exchange's time (and a second per MiB).
    fn next(&mut self) -> Result<Msg, String> {
        self.r.get_mut().within(Some(self.within));
        match protocol::receive(&mut self.r, protocol::MAX_RESULT)? {
            Some(Msg::Error { message }) => Err(plain(&message, 400)),
            Some(m) => Ok(m),
            None => Err("the host closed the connection".into()),
        }
    }
    fn timeout(&mut self, t: Duration) {
        self.within = t;
    }
}

/// Reaches a host: connect, hello, clock.
fn reach(h: &HostJob, token: &[u8], timeout: Duration) -> Result<(Conn, String, Estimate), String> {
    let addrs: Vec<_> = h
        .address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve: {e}"))?
        .collect();
    let mut last = String::from("no address");
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("cannot connect: {e}"),
        }
    }
    let s = Arc::new(stream.ok_or(last)?);
    protocol::tune(&s, protocol::GONE_WHILE_RUNNING);
    let mut r = BufReader::new(Deadline::new(Arc::clone(&s)));
    r.get_mut().per_mib(PER_MIB);
    let mut c = Conn {
        s,
        r,
        within: timeout,
    };
    let ours = env!("CARGO_PKG_VERSION");
    let hostname = match c.ask(&Msg::Hello {
        version: ours.into(),
        token: protocol::hex(token),
    })? {
        Msg::Welcome { version, hostname } if version == ours => plain(&hostname, 64),
        Msg::Welcome { version, .. } => {
            return Err(format!(
                "version mismatch: the controller runs loadgen {ours}, the host {}",
                plain(&version, 40)
            ));
        }
        m => return Err(format!("expected welcome, got {}", m.kind())),
    };
    let mut exchanges = Vec::with_capacity(CLOCK_EXCHANGES);
    for _ in 0..CLOCK_EXCHANGES {
        let sent_ns = clock::unix_ns();
        let Msg::Time { unix_ns } = c.ask(&Msg::Clock)? else {
            return Err("expected its clock".into());
        };
        exchanges.push(Exchange {
            sent_ns,
            host_ns: unix_ns,
            received_ns: clock::unix_ns(),
        });
    }
    let est = Estimate::of(&exchanges).ok_or("its clock answers went back in time")?;
    Ok((c, hostname, est))
}

/// One line per failed host, then the error that names them.
fn named(failures: &[(String, String)], what: &str) -> String {
    for (name, e) in failures {
        crate::note!("loadgen: host {name}: {}", plain(e, 400));
    }
    let names: Vec<&str> = failures.iter().map(|(n, _)| n.as_str()).collect();
    format!(
        "{what}: host {} ({})",
        names.join(", host "),
        plain(&failures[0].1, 400)
    )
}

/// How long a host's job runs when every job of it is bounded by `--runtime` (ramp
/// included, each sweep point in turn); `None` when its end is not known ahead (a job that
/// ends when its bytes are done, or reads everything back with `--verify`).
fn planned(h: &HostJob, files: &[JobFile]) -> Option<Duration> {
    let given: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.arg.clone(), f.text.clone()))
        .collect();
    let Ok(Parsed::Plan(plan)) = parse_args_from(&h.args, JobFiles::Given(&given)) else {
        return None;
    };
    let mut per_point = 0;
    for j in &plan.jobs {
        if j.verify {
            return None;
        }
        per_point = per_point.max(j.ramp_time_ns.checked_add(j.runtime_ns?)?);
    }
    let points = crate::options::sweep::points(&plan).ok()?.len() as u64;
    Some(Duration::from_nanos(per_point.checked_mul(points)?))
}

pub fn run(args: &[String], plan: &Plan) -> Result<u8, Failure> {
    let s = &plan.settings;
    check_options(s)?;
    let hosts = args::split(args).map_err(Failure::Usage)?;
    if hosts.is_empty() {
        return Err(Failure::Usage("--client names no host".into()));
    }
    let token = match &s.client_token_file {
        Some(p) => crate::files::read_token(p)
            .map_err(|e| Failure::Usage(e.replace("--token-file", "--client-token-file")))?,
        None => Vec::new(),
    };
    let timeout = s
        .client_timeout_ns
        .map_or(DEFAULT_TIMEOUT, Duration::from_nanos);
    for h in &hosts {
        protocol::check_name(&h.name).map_err(|e| {
            Failure::Usage(format!(
                "--client: {} (name the host with NAME=HOST)",
                e.trim_start_matches("refused: ")
            ))
        })?;
    }
    let jobs = read_job_files(&hosts)?;
    // Where the report and record go is checked before any host is asked to do anything.
    let mut output = report::Output::new(s.output.as_deref())
        .map_err(|e| Failure::Usage(format!("--output: {e}")))?;
    let record_out = s
        .record
        .as_deref()
        .map(crate::results::outfile::OutFile::create)
        .transpose()
        .map_err(|e| Failure::Usage(format!("--record: {e}")))?;

    let mut conns = reach_all(&hosts, &token, timeout)?;
    prepare(&hosts, &jobs, &mut conns, timeout)?;
    start_together(&mut conns, timeout);
    let outcomes = collect(&hosts, &jobs, conns, timeout);

    let all = merge::all_clients(&outcomes, plan);
    let mut text = String::new();
    let f = s.output_format;
    if f.json {
        text.push_str(&fio_json::to_string(&merge::fio_json(
            &outcomes,
            &all,
            f.json_plus,
        )));
    }
    if f.normal {
        text.push_str(&merge::text_report(&outcomes, &all));
    }
    output
        .write(&text)
        .and_then(|()| output.finish())
        .map_err(|e| Failure::Runtime(anyhow::anyhow!("{e}")))?;
    if let Some(out) = record_out {
        let record = merge::record(&outcomes, &all, &crate::recording::system::hostname());
        out.commit(|w| record.write_json(w))
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("the run record: {e}")))?;
        if let Some(p) = &s.record {
            crate::note!("loadgen: run record written to {}", p.display());
        }
    }
    let failed: Vec<(String, String)> = outcomes
        .iter()
        .filter_map(|o| o.error.clone().map(|e| (o.name.clone(), e)))
        .collect();
    if !failed.is_empty() {
        return Err(Failure::Runtime(anyhow::anyhow!(named(
            &failed,
            "the run is incomplete, the others were stopped"
        ))));
    }
    Ok(0)
}

/// The options a cluster run does not take.
fn check_options(s: &crate::options::RunSettings) -> Result<(), Failure> {
    if !s.agents.is_empty() {
        return Err(Failure::Usage(
            "--agent with --client: each host samples its own agent (`loadgen serve --agent URL`)"
                .into(),
        ));
    }
    for (given, what) in [
        (s.metrics_address.is_some(), "--metrics-address"),
        (s.status_interval_ns.is_some(), "--status-interval"),
        (s.output_format.terse, "--output-format=terse"),
    ] {
        if given {
            return Err(Failure::Usage(format!(
                "{what} is not taken with --client (a cluster run reports in json or normal, at its end)"
            )));
        }
    }
    Ok(())
}

/// Each host's job files, read here: a job order carries them.
fn read_job_files(hosts: &[HostJob]) -> Result<Vec<Vec<JobFile>>, Failure> {
    let mut jobs: Vec<Vec<JobFile>> = Vec::new();
    for h in hosts {
        let mut files = Vec::new();
        for f in args::job_files(&h.args) {
            let text = crate::files::read_text(f.as_ref(), crate::files::MAX_JOB_FILE)
                .map_err(|e| Failure::Usage(format!("cannot read job file {f}: {e}")))?;
            files.push(JobFile { arg: f, text });
        }
        let total: usize = files.iter().map(|f| f.text.len()).sum();
        if total as u64 > protocol::MAX_ORDER / 2 {
            return Err(Failure::Usage(format!(
                "host {}: its job files hold {total} bytes, more than a job order carries ({})",
                h.name,
                protocol::size_name(protocol::MAX_ORDER / 2)
            )));
        }
        jobs.push(files);
    }
    Ok(jobs)
}

/// Every host reached, in parallel; the run fails naming each host that was not.
fn reach_all(
    hosts: &[HostJob],
    token: &[u8],
    timeout: Duration,
) -> Result<Vec<(Conn, String, Estimate)>, Failure> {
    let reached: Vec<Result<(Conn, String, Estimate), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = hosts
            .iter()
            .map(|h| sc.spawn(|| reach(h, token, timeout)))
            .collect();
        hs.into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    let failures: Vec<(String, String)> = hosts
        .iter()
        .zip(&reached)
        .filter_map(|(h, r)| {
            r.as_ref()
                .err()
                .map(|e| (h.name.clone(), format!("{} ({})", e, h.address)))
        })
        .collect();
    if !failures.is_empty() {
        return Err(Failure::Runtime(anyhow::anyhow!(named(
            &failures,
            "cannot start"
        ))));
    }
    Ok(reached.into_iter().map(Result::unwrap).collect())
}

/// Every job checked and laid out before any starts; if one is refused, all are called off.
fn prepare(
    hosts: &[HostJob],
    jobs: &[Vec<JobFile>],
    conns: &mut [(Conn, String, Estimate)],
    timeout: Duration,
) -> Result<(), Failure> {
    let mut failures = Vec::new();
    for ((h, files), (c, _, _)) in hosts.iter().zip(jobs).zip(conns.iter_mut()) {
        let job = Msg::Job {
            name: h.name.clone(),
            args: h.args.clone(),
            files: files.clone(),
        };
        if let Err(e) = c.send(&job) {
            failures.push((h.name.clone(), e));
        }
        c.timeout(PREPARE);
    }
    for (h, (c, _, _)) in hosts.iter().zip(conns.iter_mut()) {
        if failures.iter().any(|(n, _)| n == &h.name) {
            continue;
        }
        match c.next() {
            Ok(Msg::Ready) => {}
            Ok(m) => failures.push((h.name.clone(), format!("expected ready, got {}", m.kind()))),
            Err(e) => failures.push((h.name.clone(), e)),
        }
    }
    if !failures.is_empty() {
        for (c, _, _) in conns.iter_mut() {
            c.timeout(timeout);
            let _ = c.send(&Msg::Abort);
        }
        return Err(Failure::Usage(named(
            &failures,
            "the job was refused, nothing ran",
        )));
    }
    Ok(())
}

/// One instant for all, far enough ahead for every start message to arrive, each told it
/// on its own clock.
fn start_together(conns: &mut [(Conn, String, Estimate)], timeout: Duration) {
    let slowest = conns.iter().map(|(_, _, e)| e.rtt_ns).max().unwrap_or(0);
    let at = clock::unix_ns() + 4 * slowest + 200_000_000;
    for (c, _, e) in conns.iter_mut() {
        c.timeout(timeout);
        let _ = c.send(&Msg::Start {
            unix_ns: e.to_host(at),
        });
    }
    crate::note!("loadgen: {} hosts start together", conns.len());
}

/// Results, with a heartbeat from each host every second. A host whose job should have
/// ended by now (with time to spare) is stopped, and given up if it still does not end; a
/// host that fails stops the others.
fn collect(
    hosts: &[HostJob],
    jobs: &[Vec<JobFile>],
    conns: Vec<(Conn, String, Estimate)>,
    timeout: Duration,
) -> Vec<Outcome> {
    let started = Instant::now();
    let ends: Vec<Option<Instant>> = hosts
        .iter()
        .zip(jobs)
        .map(|(h, files)| planned(h, files).map(|p| started + p + p / 10 + 3 * timeout))
        .collect();
    let (tx, rx) = mpsc::channel::<(usize, Result<Msg, String>)>();
    let mut sockets: Vec<Arc<TcpStream>> = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::new();
    std::thread::scope(|sc| {
        for (i, ((c, hostname, est), h)) in conns.into_iter().zip(hosts).enumerate() {
            sockets.push(Arc::clone(&c.s));
            outcomes.push(Outcome {
                name: h.name.clone(),
                address: h.address.clone(),
                hostname,
                clock: est,
                ..Outcome::default()
            });
            let tx = tx.clone();
            let mut c = c;
            sc.spawn(move || {
                loop {
                    let m = c.next();
                    let end = !matches!(m, Ok(Msg::Running { .. }));
                    if tx.send((i, m)).is_err() || end {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let stop = |i: usize| {
            let _ = protocol::send_within(&sockets[i], &Msg::Stop, timeout);
        };
        let mut stopping = false;
        let mut done = vec![false; outcomes.len()];
        // When each host was told to stop for running past its end.
        let mut overdue: Vec<Option<Instant>> = vec![None; outcomes.len()];
        loop {
            let got = rx.recv_timeout(Duration::from_millis(200));
            let now = Instant::now();
            for k in 0..outcomes.len() {
                if done[k] {
                    continue;
                }
                match (ends[k], overdue[k]) {
                    (Some(end), None) if now > end => {
                        overdue[k] = Some(now);
                        stop(k);
                    }
                    (_, Some(told)) if now > told + 2 * timeout => {
                        // Its reader ends with the connection.
                        outcomes[k].error = Some(format!(
                            "its job ran past its planned end and did not stop within {:.0} s",
                            (2 * timeout).as_secs_f64()
                        ));
                        done[k] = true;
                        let _ = sockets[k].shutdown(Shutdown::Both);
                    }
                    _ => {}
                }
            }
            if !stopping && outcomes.iter().any(|o| o.error.is_some()) {
                stopping = true;
                (0..outcomes.len()).filter(|&k| !done[k]).for_each(stop);
            }
            let (i, m) = match got {
                Ok(x) => x,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
            };
            if done[i] || matches!(m, Ok(Msg::Running { .. })) {
                continue;
            }
            let o = &mut outcomes[i];
            take_result(o, m, timeout);
            done[i] = true;
            if o.error.is_some() && !stopping {
                stopping = true;
                (0..done.len()).filter(|&k| !done[k]).for_each(stop);
            }
        }
    });
    outcomes
}

/// A host's last message (its result, or why there is none) into its outcome.
fn take_result(o: &mut Outcome, m: Result<Msg, String>, timeout: Duration) {
    match m {
        Ok(Msg::Result {
            exit,
            stopped,
            record,
            log,
        }) => {
            o.exit = Some(exit);
            o.stopped = stopped;
            match record.as_deref().map(Record::parse).transpose() {
                Ok(r) => o.record = r,
                Err(e) => o.error = Some(format!("its run record: {e}")),
            }
            if o.record.is_none() && o.error.is_none() && exit == 0 {
                o.error = Some("its job ended without a run record".into());
            }
            if exit != 0 && !stopped && o.error.is_none() {
                let last = log
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                o.error = Some(format!(
                    "its job failed (exit {exit}): {}",
                    plain(last.trim_start_matches("loadgen: error: "), 400)
                ));
            }
        }
        Ok(m) => o.error = Some(format!("unexpected {} message", m.kind())),
        Err(e) if e.contains("within the timeout") => {
            o.error = Some(format!("silent for {:.0} s: {e}", timeout.as_secs_f64()))
        }
        Err(e) => o.error = Some(e),
    }
}
