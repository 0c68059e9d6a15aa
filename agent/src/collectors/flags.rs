//! The collector flags of the command line: `--collector.<name>` / `--no-collector.<name>`
//! for every collector of the registry, and `--collector.disable-defaults`.
//!
//! Which setting wins, most specific first (node_exporter's order, with the file in between):
//! a flag, the config file's `[collectors]` entry (or `[probes] disable`), then the default:
//! enabled, or disabled under `--collector.disable-defaults`.

use std::collections::BTreeMap;

use super::names;

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
