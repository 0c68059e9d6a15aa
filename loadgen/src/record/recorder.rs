//! Collects what a run record holds while the run goes on: the start of each point's
//! measured part, its interval histograms, and the agents' samples (their threads scrape on
//! the same timeline); at the end it builds the analysis input of every point and writes
//! the record.

use std::path::PathBuf;

use analysis::{BucketHistogram, Host, Run};

use super::{AgentEntry, PointJob, PointRecord, Record, latency, system};
use crate::clock;
use crate::error::Failure;
use crate::options::Plan;
use crate::options::values::AgentSpec;
use crate::results::stats::{PointResult, RunResult};
use crate::results::timeline::DirInterval;
use crate::sampling::agent_signals;
use crate::sampling::scrape::{PointSamples, Samplers, StartError};
use crate::target::Layout;

struct Point {
    start_unix_seconds: f64,
    histograms: [Vec<Option<BucketHistogram>>; 2],
    agents: Vec<(AgentSpec, PointSamples)>,
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
            targets: layout.targets.iter().map(|t| t.path.clone()).collect(),
            bounds: latency::bounds(),
            points: Vec::new(),
        }))
    }

    /// A point is about to be set up: the agents' readings before any of its IO.
    pub fn before_point(&mut self) {
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
            histograms: [Vec::new(), Vec::new()],
            agents: Vec::new(),
        });
    }

    /// One timeline row's interval histograms.
    pub fn row(&mut self, dirs: &[DirInterval; 2]) {
        if let Some(p) = self.points.last_mut() {
            for (d, h) in dirs.iter().zip(p.histograms.iter_mut()) {
                h.push(latency::convert(&d.total, &self.bounds));
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
        record
            .write_to(self.out)
            .map_err(|e| Failure::Runtime(anyhow::anyhow!("the run record: {e}")))?;
        crate::note!("loadgen: run record written to {}", self.path.display());
        Ok(())
    }

    fn build(&self, result: &RunResult) -> Record {
        let mut local_devices: Vec<String> = Vec::new();
        for t in &self.targets {
            if let Some(d) = system::disk_of(t)
                && !local_devices.contains(&d)
            {
                local_devices.push(d);
            }
        }
        let local_name = self
            .agents
            .first()
            .map_or_else(system::hostname, |a| a.name.clone());
        let points = result
            .points
            .iter()
            .zip(&self.points)
            .map(|(pr, p)| self.point(pr, p, &local_name, &local_devices))
            .collect();
        Record {
            format: super::FORMAT.into(),
            version: super::VERSION,
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
        }
    }

    fn point(&self, pr: &PointResult, p: &Point, local: &str, devices: &[String]) -> PointRecord {
        let n = pr.timeline.len();
        let interval = self.interval_ns as f64 / 1e9;
        let mut hosts: Vec<Host> = Vec::new();
        for (spec, samples) in &p.agents {
            let addresses = spec.address().into_iter().collect();
            hosts.push(agent_signals::host(
                &spec.name,
                addresses,
                &samples.values,
                n,
            ));
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
        agent_signals::drop_own_peers(me);
        me.local_devices = devices.to_vec();
        me.read = latency::latency(&pr.timeline, true, &p.histograms[0]);
        me.write = latency::latency(&pr.timeline, false, &p.histograms[1]);
        let slots: u32 = pr.jobs.iter().map(|j| j.iodepth).sum();
        let in_use = latency::slots_in_use(&pr.timeline, slots);
        for lat in [&mut me.read, &mut me.write].into_iter().flatten() {
            lat.slots_in_use = in_use.clone();
        }
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
            run: Run {
                interval_seconds: interval,
                starts: (0..n)
                    .map(|i| p.start_unix_seconds + i as f64 * interval)
                    .collect(),
                hosts,
            },
        }
    }
}
