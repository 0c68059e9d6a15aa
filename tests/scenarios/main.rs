//! End-to-end scenarios in the lab (run as root, one at a time): the field's failure
//! stories reproduced on one machine, each run through the real agent, loadgen's replicated
//! writes and `loadgen analyze`, with the verdict the story calls for.

mod buffers;
mod ceph;
mod cluster;
mod devices;
mod jumbo;
mod loss;
mod mtu;
mod nodes;
mod replicas;
mod saturation;
mod support;
