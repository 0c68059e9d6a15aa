//! Collects what a run record holds while the run goes on: the start of each point's
//! measured part, its interval histograms, and the agents' samples (their threads scrape on
//! the same timeline); at the end it builds the analysis input of every point and writes
//! the record. With agents, it also judges each point's intervals so far after every row.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use analysis::{BucketHistogram, Host, Run};

use record::{AgentEntry, PointJob, PointRecord, Record};

use super::system;
use crate::clock;
use crate::error::Failure;
use crate::options::Plan;
use crate::options::values::AgentSpec;
use crate::results::live_verdict::LiveVerdict;
use crate::results::stats::{PointResult, RunResult};
use crate::results::timeline::{DirInterval, TimelineRow};
use crate::sampling::scrape::{PointSamples, Samplers, StartError};
use crate::target::Layout;
use diagnose::latency;
use diagnose::signals::{self, Values};

struct Point {
    start_unix_seconds: f64,
    /// The jobs' queue depths added up.
    slots: u32,
    rows: Vec<TimelineRow>,
    histograms: [Vec<Option<BucketHistogram>>; 2],
    agents: Vec<(AgentSpec, PointSamples)>,
    /// The live verdicts, each with the number of intervals it judged.
    live: Vec<(usize, LiveVerdict)>,
    /// loadgen's host and its target devices, for the live verdicts (found once per point).
    local: (String, Vec<String>),
}

pub struct Recorder {
    path: PathBuf,
    out: crate::results::outfile::OutFile,
    agents: Vec<AgentSpec>,
    samplers: Option<Samplers>,
    interval_ns: u64,
    /// Jobs ramp up before measuring: the IO starts before the timeline does.
    ramp: bool,
    targets: Vec<PathBuf>,
    bounds: Vec<f64>,
    points: Vec<Point>,
    /// The next point's IO slots (its jobs' queue depths added up).
    slots: u32,
    /// When the last live verdict was reached and how long it took.
    judged: Option<(Instant, Duration)>,
}

impl Recorder {
    /// A recorder when `--record` is given (`--agent` needs it); checks that the record can
    /// be written where asked before anything runs, and starts the agents' threads.
    pub fn from_settings(plan: &Plan, layout: &Layout) -> Result<Option<Recorder>, Failure> {
        let s = &plan.settings;
        let Some(path) = s.record.clone() else {
            if !s.agents.is_empty() {
                return Err(Failure::Usage(
                    "--agent needs --record FILE: the agents' samples go into the run record"
                        .into(),
                ));
            }
            return Ok(None);
        };
        // The record is written at the end; where it goes is checked now, before any IO.
        let out = crate::results::outfile::OutFile::create(&path)
            .map_err(|e| Failure::Usage(format!("--record: {e}")))?;
        let agents: Vec<AgentSpec> = s
            .agents
            .iter()
            .map(|a| AgentSpec::parse(a).map_err(|e| Failure::Usage(format!("--agent={e}"))))
            .collect::<Result<_, _>>()?;
        for (i, a) in agents.iter().enumerate() {
            if agents[..i].iter().any(|b| b.name == a.name) {
                return Err(Failure::Usage(format!(
                    "--agent: the name {} is given twice (name agents with NAME=URL)",
                    a.name
                )));
            }
        }
        let samplers = if agents.is_empty() {
            None
        } else {
            let client = s.agent_client.load("--agent").map_err(Failure::Usage)?;
            let client = promclient::Client::new(&client);
            Some(Samplers::start(&agents, &client).map_err(|e| match e {
                StartError::Spawn(e) => Failure::Runtime(e.into()),
                StartError::Tls(m) => Failure::Usage(m),
            })?)
        };
        Ok(Some(Recorder {
            path,
            out,
            agents,
            samplers,
            interval_ns: s.interval_ns,
            ramp: plan.jobs.iter().any(|j| j.ramp_time_ns > 0),
            targets: layout.targets.iter().map(|t| t.open.clone()).collect(),
            bounds: latency::bounds(),
            points: Vec::new(),
            slots: 0,
            judged: None,
        }))
    }

    /// A point with `slots` IO slots (its jobs' queue depths added up) is about to be set
    /// up: the agents' readings before any of its IO.
    pub fn before_point(&mut self, slots: u32) {
        self.slots = slots;
        if let Some(s) = &self.samplers {
            s.prepare();
        }
    }

    /// A point's measured part starts at `start_ns` on the monotonic clock.
    pub fn started(&mut self, start_ns: u64) {
        let now_mono = clock::now_ns();
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let start_unix_seconds = now_unix + (start_ns as f64 - now_mono as f64) / 1e9;
        if let Some(s) = &self.samplers {
            s.begin(start_ns, self.interval_ns, !self.ramp);
        }
        self.points.push(Point {
            start_unix_seconds,
            slots: self.slots,
            rows: Vec::new(),
            histograms: [Vec::new(), Vec::new()],
            agents: Vec::new(),
            live: Vec::new(),
            local: self.local(),
        });
    }

    /// One timeline row and its interval histograms.
    pub fn row(&mut self, row: &TimelineRow, dirs: &[DirInterval; 2]) {
        if let Some(p) = self.points.last_mut() {
            p.rows.push(row.clone());
            for (d, h) in dirs.iter().zip(p.histograms.iter_mut()) {
                h.push(latency::convert(&d.total, &self.bounds));
            }
        }
    }

    /// With agents: the verdict on the running point's intervals so far (those every
    /// agent's samples have closed), when an interval closed since the last one; kept for
    /// the last interval it judged. Called at every row and tick, so a verdict follows the
    /// agents' closing scrape, not the next row. Its cost grows with the point's length:
    /// after a judgement that took `d`, none is made within `10 d`, so at most a tenth of
    /// the collector's time goes to it.
    pub fn judge(&mut self) -> Option<LiveVerdict> {
        if let Some((at, took)) = self.judged
            && at.elapsed() < took * 10
        {
            return None;
        }
        let began = Instant::now();
        let samplers = self.samplers.as_ref()?;
        let p = self.points.last()?;
        let new = |n: usize| n > 0 && p.live.last().is_none_or(|(judged, _)| *judged < n);
        if !new(samplers.closed()?.min(p.rows.len())) {
            return None;
        }
        let so_far = samplers.so_far();
        let n = so_far.iter().map(|a| a.2).min()?.min(p.rows.len());
        if !new(n) {
            return None;
        }
        let agents: Vec<(AgentSpec, Values)> = so_far
            .into_iter()
            .map(|(spec, mut values, _)| {
                values.values_mut().for_each(|s| s.truncate(n));
                (spec, values)
            })
            .collect();
        let agents: Vec<(&AgentSpec, &Values)> = agents.iter().map(|(s, v)| (s, v)).collect();
        let histograms = [0, 1].map(|d| &p.histograms[d][..n.min(p.histograms[d].len())]);
        let run = self.run_of(
            &p.rows[..n],
            histograms,
            &agents,
            p.slots,
            p.start_unix_seconds,
            &p.local.0,
            &p.local.1,
        );
        let verdict = LiveVerdict::of(&analysis::analyze(&run).ok()?, n);
        let p = self.points.last_mut()?;
        p.live.push((n, verdict.clone()));
        self.judged = Some((began, began.elapsed()));
        Some(verdict)
    }

    /// The live verdicts of the last point, each onto the last row it judged.
    pub fn verdicts_into(&self, timeline: &mut [TimelineRow]) {
        let Some(p) = self.points.last() else { return };
        for (rows, v) in &p.live {
            if let Some(row) = rows.checked_sub(1).and_then(|i| timeline.get_mut(i)) {
                row.verdict = Some(v.clone());
            }
        }
    }

    /// The point ended with `rows` timeline rows: collect the agents' samples.
    pub fn end_point(&mut self, rows: usize) {
        if let (Some(s), Some(p)) = (&self.samplers, self.points.last_mut()) {
            p.agents = s.end(rows);
        }
    }

    /// Builds the record from the run's results and writes it.
    pub fn write(mut self, result: &RunResult) -> Result<(), Failure> {
        drop(self.samplers.take());
        let record = self.build(result);
        self.out
            .commit(|w| record.write_json(w))
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("the run record: {e}")))?;
        crate::note!("loadgen: run record written to {}", self.path.display());
        Ok(())
    }

    /// loadgen's host (the first agent's, or the machine's name) and the devices its
    /// targets are on.
    fn local(&self) -> (String, Vec<String>) {
        let mut devices: Vec<String> = Vec::new();
        for t in &self.targets {
            if let Some(d) = system::disk_of(t)
                && !devices.contains(&d)
            {
                devices.push(d);
            }
        }
        let name = self
            .agents
            .first()
            .map_or_else(system::hostname, |a| a.name.clone());
        (name, devices)
    }

    fn build(&self, result: &RunResult) -> Record {
        let (local_name, local_devices) = self.local();
        let points = result
            .points
            .iter()
            .zip(&self.points)
            .map(|(pr, p)| self.point(pr, p, &local_name, &local_devices))
            .collect();
        Record {
            format: record::FORMAT.into(),
            version: record::VERSION,
            loadgen_version: env!("CARGO_PKG_VERSION").into(),
            host: local_name,
            agents: self
                .agents
                .iter()
                .map(|a| AgentEntry {
                    name: a.name.clone(),
                    url: a.url.display(),
                })
                .collect(),
            result: result.clone(),
            points,
            clients: Vec::new(),
            incomplete: false,
        }
    }

    fn point(&self, pr: &PointResult, p: &Point, local: &str, devices: &[String]) -> PointRecord {
        let agents: Vec<(&AgentSpec, &Values)> =
            p.agents.iter().map(|(a, s)| (a, &s.values)).collect();
        let histograms = [0, 1].map(|d| p.histograms[d].as_slice());
        let slots: u32 = pr.jobs.iter().map(|j| j.iodepth).sum();
        PointRecord {
            index: pr.index,
            jobs: pr.jobs.iter().fold(Vec::<PointJob>::new(), |mut acc, j| {
                if !acc.iter().any(|x| x.name == j.name) {
                    acc.push(PointJob {
                        name: j.name.clone(),
                        bs: j.bs,
                        iodepth: j.iodepth,
                    });
                }
                acc
            }),
            start_unix_seconds: p.start_unix_seconds,
            sampling: p.agents.iter().map(|(_, s)| s.status.clone()).collect(),
            run: self.run_of(
                &pr.timeline,
                histograms,
                &agents,
                slots,
                p.start_unix_seconds,
                local,
                devices,
            ),
        }
    }

    /// The analysis input of a point: its timeline rows with their histograms, each agent's
    /// values on its own host, loadgen's latency and its split on `local`'s host.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of a point, each from its own source"
    )]
    fn run_of(
        &self,
        rows: &[TimelineRow],
        histograms: [&[Option<BucketHistogram>]; 2],
        agents: &[(&AgentSpec, &Values)],
        slots: u32,
        start_unix_seconds: f64,
        local: &str,
        devices: &[String],
    ) -> Run {
        let n = rows.len();
        let interval = self.interval_ns as f64 / 1e9;
        let mut hosts: Vec<Host> = Vec::new();
        for (spec, values) in agents {
            let addresses = spec.address().into_iter().collect();
            hosts.push(signals::host(&spec.name, addresses, values, n));
        }
        if hosts.is_empty() {
            hosts.push(Host {
                name: local.to_string(),
                ..Host::default()
            });
        }
        // loadgen's own host: the first agent's (or the only one).
        let me = &mut hosts[0];
        for a in system::addresses() {
            if !me.addresses.contains(&a) {
                me.addresses.push(a);
            }
        }
        signals::drop_own_peers(me);
        me.local_devices = devices.to_vec();
        me.read = latency::latency(rows, true, histograms[0]);
        me.write = latency::latency(rows, false, histograms[1]);
        let in_use = latency::slots_in_use(rows, slots);
        for lat in [&mut me.read, &mut me.write].into_iter().flatten() {
            lat.slots_in_use = in_use.clone();
        }
        Run {
            interval_seconds: interval,
            starts: (0..n)
                .map(|i| start_unix_seconds + i as f64 * interval)
                .collect(),
            hosts,
        }
    }
}
