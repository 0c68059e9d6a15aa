//! stornet's repository files as data, and the checks that hold them together.
//!
//! The library reads what the repository ships besides code: the Grafana dashboards
//! (`grafana`, and running their panels against the lab's Prometheus), the Prometheus rule
//! files and promtool (`prom_rules`), the series selectors of a PromQL expression (`promql`),
//! the metrics `docs/metrics.md` documents (`metric_docs`), and the Kubernetes manifests
//! generated from the dashboards and rules (`k8s`, written by `cargo xtask k8s`).
//!
//! Its tests (`tests/checks/`, run by the unit tier, no root) check these files against each
//! other and against the code: dashboards and rules read only documented or recorded
//! metrics, promtool accepts the rules and their unit tests cover every alert, the
//! Kubernetes manifests agree with the systemd unit, their generated parts with their
//! sources, and the real `loadgen` takes the cluster manifests' arguments. The privileged
//! tests use the same library against a live agent and Prometheus.

pub mod grafana;
pub mod k8s;
pub mod metric_docs;
pub mod prom_rules;
pub mod promql;
pub mod repo;
