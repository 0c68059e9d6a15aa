//! Privileged integration tests: real probes, real IO, compared with the kernel's own counts.
//! Run as root (`cargo xtask test`); without root they skip, and with `CI` set they fail.

mod block_counts;
mod block_depth;
mod block_devices;
mod block_errors;
mod block_flush;
mod block_probes;
mod block_util;
mod lab_netns;
