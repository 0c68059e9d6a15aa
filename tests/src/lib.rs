//! stornet's lab harness: privilege checks, loop devices, the agent as a process, and metric
//! scrapes. Everything it creates is removed on drop, also when a test fails.

pub mod agent;
pub mod bins;
pub mod blockdev;
pub mod fs;
pub mod metrics;
pub mod netns;
pub mod privilege;
