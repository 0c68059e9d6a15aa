//! `cargo xtask lab clean`: removes what killed lab runs and tests left behind (namespaces,
//! loop devices, cgroups, files in /dev/shm, processes in them) and nothing else: only
//! things named by the harness whose creating process is gone (see
//! `stornet_lab::lab::leftovers`).

use anyhow::{Result, bail};
use stornet_lab::lab::leftovers;

pub fn clean() -> Result<()> {
    if !crate::cmd::is_root() {
        bail!("removing namespaces, loop devices and cgroups needs root");
    }
    let found = leftovers::find();
    if found.is_empty() {
        println!("no lab leftovers: nothing to remove");
        return Ok(());
    }
    let (done, failed) = found.remove();
    for d in &done {
        println!("{d}");
    }
    for f in &failed {
        eprintln!("could not remove: {f}");
    }
    if !failed.is_empty() {
        bail!("{} leftover(s) could not be removed", failed.len());
    }
    println!("removed {} leftover(s)", done.len());
    Ok(())
}
