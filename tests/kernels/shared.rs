//! One agent for the tests of a guest that need no configuration of their own: starting
//! one takes seconds in an emulated guest. The guest's `/init` stops it when this binary
//! is done, before other tests count BPF programs.

use std::sync::OnceLock;

use stornet_lab::agent::AgentProcess;

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
