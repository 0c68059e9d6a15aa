//! The agent's collectors by name, as `--collector.<name>` / `--no-collector.<name>` and the
//! config file's `[collectors]` keys know them: every probe (the `probe` label of
//! `stornet_probe_up`) and every scrape-time snapshot (the network path, resource pressure). A disabled
//! collector attaches nothing and exports nothing.
//!
//! Which setting wins, most specific first (node_exporter's order, with the file in between):
//! a flag, the config file's `[collectors]` entry (or `[probes] disable`), then the default:
//! enabled, or disabled under `--collector.disable-defaults`.

use std::collections::BTreeMap;

use crate::probes::spec::PROBES;

/// Interface counters, MTU and qdisc statistics (rtnetlink).
pub const NETLINK: &str = "netlink";
/// Established TCP sockets per peer: count, RTT, path MTU, MSS (sock_diag).
pub const SOCK_DIAG: &str = "sock_diag";
/// Link speed and pause-frame counters (ethtool ioctls).
pub const ETHTOOL: &str = "ethtool";

/// Time tasks stalled waiting for CPU, IO and memory (/proc/pressure).
pub const PRESSURE: &str = "pressure";

/// What each block device is and sits on, and its transport and peer (sysfs).
pub const BLOCK_TOPOLOGY: &str = "block_topology";

/// The snapshot collectors, besides the probes.
pub const SNAPSHOTS: &[&str] = &[NETLINK, SOCK_DIAG, ETHTOOL, PRESSURE, BLOCK_TOPOLOGY];

/// Every collector name: the probes, then the snapshots.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROBES
        .iter()
        .map(|p| p.name)
        .chain(SNAPSHOTS.iter().copied())
}

pub fn is_known(name: &str) -> bool {
    names().any(|n| n == name)
}

/// The collector flags of the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectorFlags {
    /// `--collector.disable-defaults`: what no flag or file entry turns on stays off.
    pub disable_defaults: bool,
    /// `--collector.<name>` (true) and `--no-collector.<name>` (false); the last one given
    /// for a name counts.
    pub set: BTreeMap<String, bool>,
}

fn on_flag(name: &str) -> String {
    format!("collector.{name}")
}

fn off_flag(name: &str) -> String {
    format!("no-collector.{name}")
}

const DISABLE_DEFAULTS: &str = "collector.disable-defaults";

impl clap::Args for CollectorFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        cmd = cmd.arg(
            Arg::new(DISABLE_DEFAULTS)
                .long(DISABLE_DEFAULTS)
                .action(ArgAction::SetTrue)
                .global(true)
                .help("Disable every collector that no flag or config file entry enables"),
        );
        for name in names() {
            let (on, off) = (on_flag(name), off_flag(name));
            cmd = cmd
                .arg(
                    Arg::new(on.clone())
                        .long(on.clone())
                        .action(ArgAction::SetTrue)
                        .overrides_with(off.clone())
                        .global(true)
                        .help(format!("Enable the {name} collector")),
                )
                .arg(
                    Arg::new(off.clone())
                        .long(off.clone())
                        .action(ArgAction::SetTrue)
                        .overrides_with(on)
                        .global(true)
                        .help(format!("Disable the {name} collector")),
                );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for CollectorFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = CollectorFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.disable_defaults |= m.get_flag(DISABLE_DEFAULTS);
        for name in names() {
            if m.get_flag(&on_flag(name)) {
                self.set.insert(name.to_string(), true);
            } else if m.get_flag(&off_flag(name)) {
                self.set.insert(name.to_string(), false);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_include_every_probe() {
        let all: Vec<&str> = names().collect();
        let unique: std::collections::BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(all.len(), unique.len());
        for p in PROBES {
            assert!(is_known(p.name));
        }
        for s in SNAPSHOTS {
            assert!(is_known(s));
        }
        assert!(!is_known("namespace"));
    }

    /// docs/agent.md's collector table names every collector.
    #[test]
    fn the_docs_name_every_collector() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/agent.md"))
                .unwrap();
        let table: Vec<&str> = docs
            .lines()
            .skip_while(|l| !l.starts_with("| collector | what it exports |"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        for name in names() {
            let cell = format!("`{name}`");
            assert!(
                table
                    .iter()
                    .any(|row| row.split('|').nth(1).is_some_and(|c| c.contains(&cell))),
                "{name} is not in docs/agent.md's collector table"
            );
        }
    }
}
