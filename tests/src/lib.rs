//! stornet's lab harness: privilege checks, loop devices, the agent and `loadgen serve` as
//! processes, metric scrapes, BPF object checks, TLS test certificates and a Prometheus server.
//! Everything it creates is removed on drop, also when a test fails.

pub mod agent;
pub mod bins;
pub mod blockdev;
pub mod bpf;
pub mod cgroup;
pub mod loadgen;
pub mod metrics;
pub mod netns;
pub mod privilege;
pub mod prometheus;
pub mod replica;
pub mod tls;
pub mod traffic;
