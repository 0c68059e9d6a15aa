//! stornet's lab harness: privilege checks, the lab (hosts as namespaces behind a shaped
//! switch, loop-device disks, replicated runs), loop devices, the agent and `loadgen serve` as
//! processes, metric scrapes, BPF object checks, TLS test certificates, a real Prometheus,
//! headless Chromium, what a `vm` tier guest tells the tests that run in it, and a real Ceph
//! cluster (Debian's packages) on the lab's hosts. The repository's dashboards, rules and
//! manifests are read by `stornet-repo-checks`.
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
pub mod ecn;
pub mod fs;
pub mod guest;
pub mod host_cpu;
pub mod lab;
pub mod loadgen;
pub mod md;
pub mod metrics;
pub mod nbd;
pub mod netns;
pub mod nvmf;
pub mod privilege;
pub mod promserver;
pub mod replica;
pub mod ss;
pub mod tls;
pub mod traffic;
