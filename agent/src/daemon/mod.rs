//! The `stornet-agent` command: its flags and subcommands (`cli`), the long-running service
//! (`service`, telling systemd it is ready and alive through `systemd`), the one-shot `check`
//! and `snapshot`, and the log (`logging`).

pub mod check;
pub mod cli;
pub mod logging;
pub mod service;
pub mod snapshot;
pub mod systemd;
