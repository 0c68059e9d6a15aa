//! stornet's lab harness: privilege checks, the lab (hosts as namespaces behind a shaped
//! switch, loop-device disks, replicated runs), loop devices, the agent and `loadgen serve` as
//! processes, metric scrapes, BPF object checks, TLS test certificates, a real Prometheus
//! with stornet's rules and dashboards, headless Chromium, and what a `vm` tier guest tells
//! the tests that run in it, and the Kubernetes manifests generated from the dashboards and
//! rules, and a real Ceph cluster (Debian's packages) on the lab's hosts.
//! Everything it creates is removed on drop, also when a test fails.

pub mod agent;
pub mod attempts;
pub mod bins;
pub mod blockdev;
pub mod bpf;
pub mod ceph;
pub mod cgroup;
pub mod chromium;
pub mod churn;
pub mod dm;
pub mod fs;
pub mod grafana;
pub mod guest;
pub mod host_cpu;
pub mod k8s;
pub mod lab;
pub mod loadgen;
pub mod md;
pub mod metric_docs;
pub mod metrics;
pub mod nbd;
pub mod netns;
pub mod nvmf;
pub mod privilege;
pub mod prom_rules;
pub mod promql;
pub mod promserver;
pub mod replica;
pub mod repo;
pub mod tls;
pub mod traffic;

#[cfg(test)]
mod dashboard_checks;
#[cfg(test)]
mod loadgen_manifest_checks;
