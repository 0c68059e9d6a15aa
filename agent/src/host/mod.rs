//! What the host's procfs and sysfs say besides the probes: pressure stall information, a
//! collector of its own (`pressure`); the block devices' kernel names, which of them to
//! report and their queue limits (`devices`); which network interfaces to report and by
//! what label (`interfaces`); the network namespaces the agent reads statistics in (`netns`);
//! sysfs attributes read in few system calls (`sysfs`).

pub mod devices;
pub mod interfaces;
pub mod netns;
pub mod pressure;
pub mod sysfs;
