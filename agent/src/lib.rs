//! stornet-agent: eBPF telemetry of the block and network paths, served to Prometheus.

pub mod agent;
pub mod auth;
pub mod block;
pub mod btf;
pub mod check;
pub mod cli;
pub mod config;
pub mod devices;
pub mod exporter;
pub mod files;
pub mod kernel;
pub mod logging;
pub mod model;
pub mod net;
pub mod probes;
pub mod process;
pub mod self_metrics;
pub mod server;
pub mod service;
pub mod snapshot;
pub mod systemd;
pub mod tls;
pub mod web_config;
pub mod write_deadline;
