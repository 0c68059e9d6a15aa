//! The repository's files checked against each other and the code (no root needed).

mod dashboards;
mod kubernetes;
mod loadgen_manifests;
mod metrics;
mod readme;
