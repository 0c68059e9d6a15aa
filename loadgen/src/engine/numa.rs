//! fio's `numa_cpu_nodes` and `numa_mem_policy` for a job thread: its CPUs are those of the
//! nodes (sched_setaffinity(2)), its memory policy set with set_mempolicy(2), before the
//! thread allocates its buffers and ring.

use anyhow::{Context, Result, anyhow};

use crate::options::MemPolicy;

const NODES: &str = "/sys/devices/system/node";

/// The nodes this machine has (`online`), as a list.
pub fn online() -> Result<Vec<u32>, String> {
    let text = std::fs::read_to_string(format!("{NODES}/online"))
        .map_err(|e| format!("reading {NODES}/online: {e}"))?;
    Ok(list(&text).into_iter().map(|n| n as u32).collect())
}

/// A refusal naming the option and the first node of `nodes` the machine lacks.
pub fn check(option: &str, nodes: &[u32]) -> Result<(), String> {
    let have = online()?;
    match nodes.iter().find(|n| !have.contains(n)) {
        Some(n) => Err(format!(
            "--{option}: this machine has no NUMA node {n} (its nodes: {})",
            have.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )),
        None => Ok(()),
    }
}

/// A kernel list (`0-3,8,10-11`) as numbers; what does not parse is left out.
fn list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
            out.extend(a..=b);
        }
    }
    out
}

/// The CPUs of `nodes`.
pub fn cpus(nodes: &[u32]) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for n in nodes {
        let path = format!("{NODES}/node{n}/cpulist");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        out.extend(list(&text));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Binds the calling thread to `nodes`' CPUs.
pub fn bind_cpus(nodes: &[u32]) -> Result<()> {
    let cpus = cpus(nodes)?;
    if cpus.is_empty() {
        return Err(anyhow!("NUMA nodes {nodes:?} have no CPUs"));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for CPUs below its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: c is below CPU_SETSIZE, the set's size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the set is initialised and its size given; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_setaffinity");
    }
    Ok(())
}

/// Sets the calling thread's memory policy.
pub fn set_policy(policy: &MemPolicy) -> Result<()> {
    const DEFAULT: libc::c_long = 0;
    const PREFERRED: libc::c_long = 1;
    const BIND: libc::c_long = 2;
    const INTERLEAVE: libc::c_long = 3;
    const LOCAL: libc::c_long = 4;
    let every = || online().map_err(|e| anyhow!(e));
    let (mode, nodes) = match policy {
        MemPolicy::Default => (DEFAULT, Vec::new()),
        MemPolicy::Local => (LOCAL, Vec::new()),
        MemPolicy::Prefer(n) => (PREFERRED, vec![*n]),
        MemPolicy::Bind(n) if n.is_empty() => (BIND, every()?),
        MemPolicy::Bind(n) => (BIND, n.clone()),
        MemPolicy::Interleave(n) if n.is_empty() => (INTERLEAVE, every()?),
        MemPolicy::Interleave(n) => (INTERLEAVE, n.clone()),
    };
    let bits = 8 * std::mem::size_of::<libc::c_ulong>();
    let top = nodes.iter().max().map_or(0, |&n| n as usize + 1);
    let mut mask = vec![0 as libc::c_ulong; top.div_ceil(bits).max(1)];
    for &n in &nodes {
        mask[n as usize / bits] |= 1 << (n as usize % bits);
    }
    // The kernel reads one bit fewer than `maxnode` (as numactl passes it: bits + 1).
    let (ptr, maxnode) = if nodes.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (mask.as_ptr(), mask.len() * bits + 1)
    };
    // SAFETY: the mask holds `maxnode - 1` bits and outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("set_mempolicy");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_lists_and_this_machines_nodes() {
        assert_eq!(list("0-3,8,10-11\n"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(list("0\n"), [0]);
        assert!(list("\n").is_empty());
        // Every Linux machine has node 0, with CPUs.
        assert!(online().unwrap().contains(&0));
        assert!(!cpus(&[0]).unwrap().is_empty());
        let e = check("numa_cpu_nodes", &[0, 1000]).unwrap_err();
        assert!(e.contains("no NUMA node 1000"), "{e}");
        assert!(check("numa_cpu_nodes", &[0]).is_ok());
    }

    /// The thread's affinity and memory policy, read back from the kernel.
    #[test]
    fn a_thread_bound_to_node_0_runs_on_its_cpus_under_its_policy() {
        std::thread::spawn(|| {
            bind_cpus(&[0]).unwrap();
            // SAFETY: plain data, filled by the kernel for the calling thread.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: the kernel writes at most the set's size into it.
            let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
            assert_eq!(r, 0);
            let on: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                // SAFETY: c is below CPU_SETSIZE.
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                .collect();
            assert_eq!(on, cpus(&[0]).unwrap());

            for (policy, mode) in [
                (MemPolicy::Bind(vec![0]), 2),
                (MemPolicy::Interleave(vec![]), 3),
                (MemPolicy::Default, 0),
            ] {
                set_policy(&policy).unwrap();
                let mut got: libc::c_int = -1;
                // SAFETY: get_mempolicy writes one int; no node mask is asked for.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_get_mempolicy,
                        &mut got as *mut libc::c_int,
                        std::ptr::null_mut::<libc::c_ulong>(),
                        0usize,
                        std::ptr::null_mut::<libc::c_void>(),
                        0usize,
                    )
                };
                assert_eq!(r, 0);
                assert_eq!(got, mode, "{policy:?}");
            }
        })
        .join()
        .unwrap();
    }
}
