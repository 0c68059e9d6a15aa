//! One agent for the tests of a guest that need no configuration of their own: starting
//! one takes seconds in an emulated guest. The guest's `/init` stops it when this binary
//! is done, before other tests count BPF programs.

use std::sync::OnceLock;

use diagnose::signals::{host, reading};
use loadgen::sampling::deltas::Deltas;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{Counted, DiskStat};
use stornet_lab::metrics::{Sample, count};

pub fn agent() -> &'static AgentProcess {
    static AGENT: OnceLock<AgentProcess> = OnceLock::new();
    AGENT.get_or_init(|| AgentProcess::start(&[]).expect("agent starts"))
}

/// An agent that also counts requests in flight at dispatch (`inflight_at_issue`, opt-in).
pub fn agent_with_depth() -> &'static AgentProcess {
    static AGENT: OnceLock<AgentProcess> = OnceLock::new();
    AGENT.get_or_init(|| {
        AgentProcess::with_config("[block]\ninflight_at_issue = true\n", &[]).expect("agent starts")
    })
}

/// The `stornet_block_device_info` series of `device`.
pub fn device_info<'a>(s: &'a [Sample], device: &str) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| x.name == "stornet_block_device_info" && x.label("device") == Some(device))
        .collect()
}

/// The devices `device` names as parents.
pub fn parents<'a>(s: &'a [Sample], device: &str) -> Vec<&'a str> {
    device_info(s, device)
        .into_iter()
        .filter_map(|x| x.label("parent"))
        .collect()
}

/// Writes counted on `device` in a scrape.
pub fn writes(s: &[Sample], device: &str) -> f64 {
    count(
        s,
        "stornet_block_io_size_bytes",
        &[("device", device), ("op", "write")],
    )
}

/// (name, writes the agent counted, writes sysfs counted) of each layer between two scrapes
/// and the layers' sysfs stats taken with them, printed with the layer's parents.
pub fn layer_writes(
    layers: &[&dyn Counted],
    (before, s0): (&[Sample], &[DiskStat]),
    (after, s1): (&[Sample], &[DiskStat]),
) -> Vec<(String, f64, u64)> {
    layers
        .iter()
        .zip(s0.iter().zip(s1))
        .map(|(layer, (a, b))| {
            let name = layer.name().to_string();
            let counted = writes(after, &name) - writes(before, &name);
            let sys = b.write_ios - a.write_ios;
            eprintln!(
                "{name}: {counted} writes counted, sysfs {sys}; parents {:?}",
                parents(after, &name)
            );
            (name, counted, sys)
        })
        .collect()
}

/// The analysis's model of this guest, as loadgen fills it from two scrapes of its agent.
pub fn model(before: &[Sample], after: &[Sample]) -> analysis::model::Host {
    let mut d = Deltas::new();
    d.push(Some(reading(before)));
    d.push(Some(reading(after)));
    host("guest", Vec::new(), &d.finish(1), 1)
}
