//! `--agent`: sampling stornet-agents during a run. Each agent gets its own thread, which
//! scrapes `/metrics` at every boundary of the run's timeline (the measured part of each
//! sweep point, interval by interval) and turns the scrapes into per-interval values
//! (`deltas`). A slow or dead agent costs only its own samples: a scrape that fails or
//! answers too late for its boundary is missing data, with a warning on stderr. The
//! intervals closed so far can be read while the point runs (the live verdict).

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use record::sampling::SampleStatus;

use super::deltas::Deltas;
use crate::clock;
use crate::options::values::AgentSpec;
use diagnose::signals::{self, Reading, Values};
use promclient::text as promtext;
use promclient::{self as http, Client, Url};

/// What a sampler hands back for a point.
pub struct PointSamples {
    pub values: Values,
    pub status: SampleStatus,
}

enum Cmd {
    /// Scrape now, before a point's IO starts, and acknowledge.
    Prepare,
    /// The point's timeline starts at `start_ns`; with `prepared`, the scrape taken at
    /// `Prepare` is its first boundary (no IO ran in between).
    Begin {
        start_ns: u64,
        interval_ns: u64,
        prepared: bool,
    },
    End {
        intervals: usize,
    },
}

/// Scrapes one agent once, now.
/// The largest /metrics answer read: an agent's is tens of kilobytes.
const MAX_SCRAPE: usize = 32 << 20;

pub fn scrape(client: &Client, url: &Url, timeout: Duration) -> Result<Reading, String> {
    fetch(client, url, timeout).map_err(String::from)
}

/// As `scrape`, with the kind of a failed GET kept (the start-up check tells TLS apart).
fn fetch(client: &Client, url: &Url, timeout: Duration) -> Result<Reading, http::Error> {
    let other = |message: String| http::Error {
        kind: http::ErrorKind::Other,
        message,
    };
    let r = client.get(url, "", &[], timeout, MAX_SCRAPE)?;
    if r.status != 200 {
        let first = r.body.lines().next().unwrap_or("").trim();
        return Err(other(format!("HTTP {} {first}", r.status)));
    }
    let samples = promtext::parse_filtered(&r.body, signals::wanted).map_err(other)?;
    Ok(signals::reading(&samples))
}

/// Why sampling could not start.
#[derive(Debug)]
pub enum StartError {
    /// No thread for an agent.
    Spawn(std::io::Error),
    /// An agent refused the TLS handshake, or loadgen refused its certificate: a setup
    /// mistake that would leave every sample of that agent missing. One line, naming the
    /// agent and its URL.
    Tls(String),
}

/// How long a scrape may take: most of an interval, so that a slow agent still gives its
/// boundary a sample, and never into the next boundary.
fn timeout_for(interval_ns: u64) -> Duration {
    Duration::from_nanos(interval_ns / 10 * 9)
        .clamp(Duration::from_millis(20), Duration::from_secs(10))
}

/// The sampling threads of all agents.
pub struct Samplers {
    agents: Vec<Sampler>,
}

struct Sampler {
    spec: AgentSpec,
    /// The running point's intervals so far, shared with the sampling thread.
    so_far: Shared,
    tx: Sender<Cmd>,
    rx: Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
}

enum Reply {
    /// The start-up check: the TLS failure, if that is how it failed.
    Checked(Option<String>),
    Prepared,
    Point(PointSamples),
}

impl Samplers {
    /// Starts one thread per agent; each checks once that its agent answers and warns if not.
    /// Returns when every check is done; a TLS failure is an error.
    pub fn start(specs: &[AgentSpec], client: &Client) -> Result<Samplers, StartError> {
        let mut agents = Vec::new();
        for spec in specs {
            let (tx, cmd_rx) = mpsc::channel();
            let (res_tx, rx) = mpsc::channel();
            let so_far = Shared::default();
            let (s, c, shared) = (spec.clone(), client.clone(), so_far.clone());
            let thread = std::thread::Builder::new()
                .name(format!("lg-agent-{}", agents.len()))
                .spawn(move || sampler(s, c, shared, cmd_rx, res_tx))
                .map_err(StartError::Spawn)?;
            agents.push(Sampler {
                spec: spec.clone(),
                so_far,
                tx,
                rx,
                thread: Some(thread),
            });
        }
        let samplers = Samplers { agents };
        for a in &samplers.agents {
            if let Ok(Reply::Checked(Some(e))) = a.rx.recv() {
                return Err(StartError::Tls(e));
            }
        }
        Ok(samplers)
    }

    /// Takes every agent's reading before a point's IO starts (each within its timeout), so
    /// that the first interval counts all of the point's IO.
    pub fn prepare(&self) {
        for a in &self.agents {
            let _ = a.tx.send(Cmd::Prepare);
        }
        for a in &self.agents {
            let _ = a.rx.recv();
        }
    }

    /// The measured part of a point starts at `start_ns` (monotonic clock). `prepared`: no IO
    /// ran between `prepare` and `start_ns` (no ramp), so the prepared reading is its start.
    pub fn begin(&self, start_ns: u64, interval_ns: u64, prepared: bool) {
        for a in &self.agents {
            let _ = a.tx.send(Cmd::Begin {
                start_ns,
                interval_ns,
                prepared,
            });
        }
    }

    /// How many of the running point's intervals every agent has closed.
    pub fn closed(&self) -> Option<usize> {
        self.agents
            .iter()
            .map(|a| a.so_far.lock().intervals())
            .min()
    }

    /// The running point's intervals closed so far: each agent's values and how many
    /// intervals they hold (the last interval's closing scrape may still be under way).
    pub fn so_far(&self) -> Vec<(AgentSpec, Values, usize)> {
        self.agents
            .iter()
            .map(|a| {
                let d = a.so_far.lock().clone();
                let n = d.intervals();
                (a.spec.clone(), d.finish(n), n)
            })
            .collect()
    }

    /// The point ended after `intervals` timeline rows: each agent's values, in order.
    pub fn end(&self, intervals: usize) -> Vec<(AgentSpec, PointSamples)> {
        for a in &self.agents {
            let _ = a.tx.send(Cmd::End { intervals });
        }
        self.agents
            .iter()
            .map(|a| {
                let got = loop {
                    match a.rx.recv() {
                        Ok(Reply::Point(p)) => break p,
                        Ok(Reply::Prepared | Reply::Checked(_)) => {}
                        Err(_) => {
                            break PointSamples {
                                values: Values::new(),
                                status: SampleStatus {
                                    missing: intervals + 1,
                                    errors: vec!["the sampling thread ended".into()],
                                    ..SampleStatus::default()
                                },
                            };
                        }
                    }
                };
                (a.spec.clone(), got)
            })
            .collect()
    }
}

impl Drop for Samplers {
    fn drop(&mut self) {
        for a in &mut self.agents {
            // Closing the channel ends the thread.
            let (tx, _) = mpsc::channel();
            a.tx = tx;
            if let Some(t) = a.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A point's deltas, pushed by the sampling thread and read by the live verdict.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Deltas>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Deltas> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn sampler(spec: AgentSpec, client: Client, shared: Shared, rx: Receiver<Cmd>, tx: Sender<Reply>) {
    let mut tls_failure = None;
    match fetch(&client, &spec.url, Duration::from_secs(2)) {
        Ok(r) if r.is_empty() => crate::note!(
            "loadgen: warning: agent {} ({}) serves none of the stornet metrics the analysis uses",
            spec.name,
            spec.url.display()
        ),
        Ok(_) => {}
        Err(e) if e.kind == http::ErrorKind::Tls => {
            tls_failure = Some(format!(
                "--agent {} ({}): {e}",
                spec.name,
                spec.url.display()
            ))
        }
        Err(e) => crate::note!(
            "loadgen: warning: agent {} ({}) does not answer: {e}; its samples are missing while it does not",
            spec.name,
            spec.url.display()
        ),
    }
    if tx.send(Reply::Checked(tls_failure)).is_err() {
        return;
    }
    let mut prepared: Option<Result<Reading, String>> = None;
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Cmd::Prepare => {
                prepared = Some(scrape(&client, &spec.url, Duration::from_secs(2)));
                if tx.send(Reply::Prepared).is_err() {
                    return;
                }
            }
            Cmd::Begin {
                start_ns,
                interval_ns,
                prepared: use_it,
            } => {
                let first = prepared.take().filter(|_| use_it);
                let point = Point {
                    start_ns,
                    interval_ns,
                };
                let Some(out) = sample_point(&spec, &client, &shared, &rx, point, first) else {
                    return;
                };
                if tx.send(Reply::Point(out)).is_err() {
                    return;
                }
            }
            Cmd::End { .. } => {}
        }
    }
}

/// The timeline of a point: its start on the monotonic clock and its interval.
struct Point {
    start_ns: u64,
    interval_ns: u64,
}

/// Scrapes at `start + k·interval` until told how many intervals the point had; then
/// scrapes once more, after the point's last IO. `first`, when given, is boundary 0.
fn sample_point(
    spec: &AgentSpec,
    client: &Client,
    shared: &Shared,
    rx: &Receiver<Cmd>,
    Point {
        start_ns,
        interval_ns,
    }: Point,
    first: Option<Result<Reading, String>>,
) -> Option<PointSamples> {
    let timeout = timeout_for(interval_ns);
    *shared.lock() = Deltas::new();
    let push = |r: Option<Reading>| shared.lock().push(r);
    let mut log = Log::new(spec);
    let mut k: u64 = 0;
    if let Some(r) = first {
        log.took(0, interval_ns, start_ns, start_ns, &r);
        push(r.ok());
        k = 1;
    }
    loop {
        let due = start_ns + k * interval_ns;
        let wait = Duration::from_nanos(due.saturating_sub(clock::now_ns()));
        match rx.recv_timeout(wait) {
            Ok(Cmd::End { intervals }) => {
                let n = intervals as u64;
                while k < n {
                    log.missed(k, interval_ns, "the run went on without it");
                    push(None);
                    k += 1;
                }
                // The point's last IO has completed: this scrape closes the last interval
                // (IOs completing after the runtime belong to it, as in the timeline).
                let now = clock::now_ns();
                let r = scrape(client, &spec.url, timeout);
                log.took(k, interval_ns, now, clock::now_ns(), &r);
                push(r.ok());
                let deltas = std::mem::take(&mut *shared.lock());
                return Some(PointSamples {
                    values: deltas.finish(intervals),
                    status: log.status,
                });
            }
            Ok(Cmd::Begin { .. } | Cmd::Prepare) => {}
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                let now = clock::now_ns();
                if now > due + timeout.as_nanos() as u64 {
                    // Still busy with an earlier scrape: this boundary is gone.
                    log.missed(k, interval_ns, "the previous scrape took too long");
                    push(None);
                } else {
                    let r = scrape(client, &spec.url, timeout);
                    let done = clock::now_ns();
                    let r = r.and_then(|r| {
                        if done > due + timeout.as_nanos() as u64 {
                            Err(format!(
                                "answered {:.0} ms after its boundary, too late",
                                (done - due) as f64 / 1e6
                            ))
                        } else {
                            Ok(r)
                        }
                    });
                    log.took(k, interval_ns, due, done, &r);
                    push(r.ok());
                }
                k += 1;
            }
        }
    }
}

/// Counts samples and warns on stderr when an agent stops or resumes answering.
struct Log<'a> {
    spec: &'a AgentSpec,
    status: SampleStatus,
    failing: bool,
}

impl<'a> Log<'a> {
    fn new(spec: &'a AgentSpec) -> Log<'a> {
        Log {
            spec,
            status: SampleStatus::default(),
            failing: false,
        }
    }

    fn took(&mut self, k: u64, interval_ns: u64, due: u64, done: u64, r: &Result<Reading, String>) {
        match r {
            Ok(_) => {
                self.status.samples += 1;
                self.status.max_delay_seconds = self
                    .status
                    .max_delay_seconds
                    .max(done.saturating_sub(due) as f64 / 1e9);
                if self.failing {
                    self.failing = false;
                    crate::note!(
                        "loadgen: agent {}: samples again from {:.1} s",
                        self.spec.name,
                        at(k, interval_ns)
                    );
                }
            }
            Err(e) => self.missed(k, interval_ns, e),
        }
    }

    fn missed(&mut self, k: u64, interval_ns: u64, why: &str) {
        self.status.missing += 1;
        let at = at(k, interval_ns);
        if self.status.errors.len() < 5 {
            self.status.errors.push(format!("at {at:.1} s: {why}"));
        }
        if !self.failing {
            self.failing = true;
            crate::note!(
                "loadgen: warning: agent {} ({}): no sample at {at:.1} s: {why}; its data is missing until it answers",
                self.spec.name,
                self.spec.url.display()
            );
        }
    }
}

fn at(k: u64, interval_ns: u64) -> f64 {
    (k * interval_ns) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape_timeouts_stay_within_the_interval() {
        assert_eq!(timeout_for(1_000_000_000), Duration::from_millis(900));
        assert_eq!(timeout_for(10_000_000), Duration::from_millis(20));
        assert_eq!(timeout_for(60_000_000_000), Duration::from_secs(10));
    }

    /// A server that answers `/metrics` from a list of bodies, one per request, and then
    /// stops answering (a dead agent), on a loopback port.
    fn fake_agent(bodies: Vec<&'static str>) -> (Url, std::thread::JoinHandle<()>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!("http://{}/metrics", l.local_addr().unwrap())).unwrap();
        let t = std::thread::spawn(move || {
            for body in bodies {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (url, t)
    }

    #[test]
    fn a_sampler_follows_the_timeline_and_a_dead_agent_is_missing_data() {
        let (url, server) = fake_agent(vec![
            "stornet_tcp_retransmits_total{peer=\"198.18.0.2\"} 10\n",
            "stornet_tcp_retransmits_total{peer=\"198.18.0.2\"} 13\n",
            "stornet_tcp_retransmits_total{peer=\"198.18.0.2\"} 20\n",
        ]);
        let spec = AgentSpec {
            name: "h1".into(),
            url,
        };
        let samplers = Samplers::start(std::slice::from_ref(&spec), &Client::default()).unwrap();
        // The start-up check takes the first body; the point starts after it.
        std::thread::sleep(Duration::from_millis(100));
        let interval = 200_000_000;
        samplers.begin(clock::now_ns() + 10_000_000, interval, false);
        std::thread::sleep(Duration::from_millis(700));
        let got = samplers.end(4);
        server.join().unwrap();
        let (s, p) = &got[0];
        assert_eq!(s.name, "h1");
        let key = signals::Key::new(signals::Field::TcpRetransmits, &["198.18.0.2"]);
        // Five boundaries; the server answers two of them (13 and 20) and is gone for the
        // rest. However the threads are scheduled, an interval has data only between two
        // answered boundaries: 7 retransmits, once at most.
        let series = p.values.get(&key).cloned().unwrap_or(vec![None; 4]);
        assert_eq!(series.len(), 4);
        assert!(
            series.iter().all(|v| v.is_none() || *v == Some(7.0)),
            "{series:?}"
        );
        assert!(series.iter().filter(|v| v.is_some()).count() <= 1);
        assert_eq!(p.status.samples + p.status.missing, 5);
        assert!(
            p.status.samples <= 2 && p.status.missing >= 3,
            "{:?}",
            p.status
        );
        assert!(!p.status.errors.is_empty());
    }
}
