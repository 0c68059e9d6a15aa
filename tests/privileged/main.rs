//! Privileged integration tests: real probes, real IO, compared with the kernel's own counts.
//! Run as root (`cargo xtask test`); without root they skip, and with `CI` set they fail.

mod block_counts;
mod block_depth;
mod block_devices;
mod block_errors;
mod block_flush;
mod block_probes;
mod block_util;
mod correlate_fleet;
mod correlate_html;
mod correlate_record;
mod correlate_replicated;
mod dashboards_live;
mod lab_harness;
mod lab_netns;
mod loadgen_counts;
mod loadgen_fio_json;
mod loadgen_latency_target;
mod loadgen_metrics;
mod loadgen_options;
mod loadgen_rate;
mod loadgen_safety;
mod loadgen_verify;
mod net_buffers;
mod net_mtu;
mod net_sockets;
mod net_support;
mod net_totals;
mod replica_faults;
mod replica_run;
mod replica_serve;
mod service_faults;
mod service_lifecycle;
mod service_prometheus;
mod service_self_metrics;
mod service_systemd;
