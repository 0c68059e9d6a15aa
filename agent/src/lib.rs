//! stornet-agent: eBPF telemetry of the block and network paths, served to Prometheus.

pub mod agent;
pub mod block;
pub mod btf;
pub mod check;
pub mod cli;
pub mod collectors;
pub mod config;
pub mod devices;
pub mod exporter;
pub mod files;
pub mod kernel;
pub mod logging;
pub mod map_batch;
pub mod model;
pub mod net;
pub mod netns;
pub mod pressure;
pub mod probes;
pub mod process;
pub mod prog_info;
pub mod self_metrics;
pub mod service;
pub mod snapshot;
pub mod stats_sample;
pub mod systemd;
pub mod web;
