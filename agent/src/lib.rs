//! stornet-agent: eBPF telemetry of the block and network paths, served to Prometheus.

pub mod agent;
pub mod block;
pub mod btf;
pub mod cli;
pub mod config;
pub mod devices;
pub mod exporter;
pub mod model;
pub mod net;
pub mod probes;
pub mod server;
