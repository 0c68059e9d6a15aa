//! The BPF programs and links in the kernel, and which of them a process holds, to check
//! that stornet leaves nothing behind. stornet's program names start with `stornet_`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::Result;

/// The name prefix of every stornet eBPF program (the kernel keeps 15 characters).
pub const PROGRAM_PREFIX: &str = "stornet_";

/// Program and link ids a process holds open, from `/proc/<pid>/fdinfo` (`prog_id:` lines
/// appear for program and link fds, `link_id:` for links).
pub fn held_by(pid: u32) -> Result<(BTreeSet<u32>, BTreeSet<u32>)> {
    let mut progs = BTreeSet::new();
    let mut links = BTreeSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let Ok(text) = std::fs::read_to_string(entry?.path()) else {
            continue;
        };
        for line in text.lines() {
            let mut kv = line.splitn(2, ':');
            let (k, v) = (kv.next().unwrap_or(""), kv.next().unwrap_or("").trim());
            match (k, v.parse::<u32>()) {
                ("prog_id", Ok(id)) => {
                    progs.insert(id);
                }
                ("link_id", Ok(id)) => {
                    links.insert(id);
                }
                _ => {}
            }
        }
    }
    Ok((progs, links))
}

/// Whether the running kernel passes a drop reason to `kfree_skb` (5.17 and later): its BTF
/// has `enum skb_drop_reason`. Before, the agent counts every drop as `not_specified`, by the
/// kernel function that dropped it.
pub fn kernel_has_drop_reasons() -> bool {
    aya::Btf::from_sys_fs().is_ok_and(|b| {
        b.id_by_type_name_kind("skb_drop_reason", aya_obj::btf::BtfKind::Enum)
            .is_ok()
    })
}

/// Every loaded program: (id, name).
pub fn loaded_programs() -> Vec<(u32, String)> {
    aya::programs::loaded_programs()
        .filter_map(|p| p.ok())
        .map(|p| (p.id(), p.name_as_str().unwrap_or("").to_string()))
        .collect()
}

/// Ids of every BPF link.
pub fn loaded_links() -> BTreeSet<u32> {
    aya::programs::loaded_links()
        .filter_map(|l| l.ok())
        .map(|l| l.id())
        .collect()
}

/// The highest program id now (new programs get higher ids).
pub fn max_program_id() -> u32 {
    loaded_programs()
        .iter()
        .map(|(id, _)| *id)
        .max()
        .unwrap_or(0)
}

/// stornet programs loaded after `after` (an id from `max_program_id`).
pub fn stornet_programs_since(after: u32) -> Vec<(u32, String)> {
    loaded_programs()
        .into_iter()
        .filter(|(id, name)| *id > after && name.starts_with(PROGRAM_PREFIX))
        .collect()
}

/// Waits up to `timeout` until none of `progs` and `links` exists (the kernel frees them
/// shortly after the last fd closes); returns what is still there.
pub fn wait_gone(
    progs: &BTreeSet<u32>,
    links: &BTreeSet<u32>,
    timeout: Duration,
) -> (Vec<u32>, Vec<u32>) {
    let deadline = Instant::now() + timeout;
    loop {
        let p: Vec<u32> = loaded_programs()
            .into_iter()
            .map(|(id, _)| id)
            .filter(|id| progs.contains(id))
            .collect();
        let l: Vec<u32> = loaded_links().intersection(links).copied().collect();
        if (p.is_empty() && l.is_empty()) || Instant::now() > deadline {
            return (p, l);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
