//! What killed lab runs and tests leave behind, and its removal (`cargo xtask lab clean`).
//!
//! Other test runs on the same machine create the same kinds of things at the same time, so
//! only what is certainly abandoned counts: every name the harness gives ends in the pid of
//! the process that created it (`stn-<tag>-<pid>`, `/dev/shm/stornet-test-<tag>-<pid>.img`,
//! `blkio/stornet-test-<tag>-<pid>`, `/tmp/stornet-mnt-<tag>-<pid>`), and a thing is left over only when that process is gone.
//! Processes still running in a left-over namespace or cgroup (a replica or agent whose test
//! was killed, a Ceph lab's daemons, which all run in its hosts' namespaces) are left over
//! too, and so are files of that pattern in /dev/shm (loop devices' backing files, a Ceph
//! lab's directory with its configuration, keys and the mon's store) and in the temporary
//! directory (Prometheus servers' data, agents' logs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::cgroup::{BLKIO_ROOT, CPU_ROOT, UNIFIED_ROOT};
use crate::netns::PREFIX;

/// Where the harness keeps loop device backing files and replica directories.
pub const SHM: &str = "/dev/shm";
/// The prefix of those files and of the harness's cgroups.
pub const FILE_PREFIX: &str = "stornet-";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub command: String,
    /// The left-over namespace or cgroup it runs in.
    pub within: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    /// `/dev/loopN`.
    pub dev: String,
    /// Its backing file or device.
    pub backing: String,
}

/// Everything abandoned, in the order it is removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    pub processes: Vec<Process>,
    pub namespaces: Vec<String>,
    /// File systems on lab disks (a node's), unmounted before their loop devices go.
    pub mounts: Vec<PathBuf>,
    /// Loop devices stacked on other loop devices come before the ones they use.
    pub loops: Vec<Loop>,
    pub cgroups: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
}

/// The pid a harness name was made by: its numeric parts of at least 2 (`stn-s1-a-4242`,
/// `stornet-test-lab-a0-4242.img`). None when it has none.
pub fn owner_pids(name: &str) -> Vec<u32> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|&p| p >= 2)
        .collect()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// True when the name carries an owner pid and no such process exists any more.
pub fn abandoned(name: &str) -> bool {
    let pids = owner_pids(name);
    !pids.is_empty() && !pids.iter().any(|&p| alive(p))
}

fn command_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
        .map(|c| c.replace('\0', " ").trim().to_string())
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| format!("pid {pid}"))
}

fn names_in(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Pids of the processes in network namespace `name` (`ip netns pids`).
fn netns_pids(name: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The backing file of a loop device, without the ` (deleted)` mark.
fn backing_file(loop_name: &str) -> Option<String> {
    let b = std::fs::read_to_string(format!("/sys/block/{loop_name}/loop/backing_file")).ok()?;
    Some(b.trim().trim_end_matches(" (deleted)").to_string())
}

/// Looks for leftovers of lab runs and tests whose process is gone.
pub fn find() -> Leftovers {
    let mut l = Leftovers::default();
    let add_procs = |l: &mut Leftovers, pids: Vec<u32>, within: &str| {
        for pid in pids {
            if !l.processes.iter().any(|p| p.pid == pid) {
                l.processes.push(Process {
                    pid,
                    command: command_of(pid),
                    within: within.to_string(),
                });
            }
        }
    };
    for ns in names_in(Path::new("/run/netns"), PREFIX) {
        if abandoned(&ns) {
            add_procs(&mut l, netns_pids(&ns), &format!("namespace {ns}"));
            l.namespaces.push(ns);
        }
    }
    let cgroups = [BLKIO_ROOT, CPU_ROOT, UNIFIED_ROOT]
        .into_iter()
        .flat_map(|root| {
            names_in(Path::new(root), FILE_PREFIX)
                .into_iter()
                .map(move |cg| (Path::new(root).join(&cg), cg))
        });
    for (path, cg) in cgroups {
        if path.is_dir() && abandoned(&cg) {
            let pids = std::fs::read_to_string(path.join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            add_procs(&mut l, pids, &format!("cgroup {}", path.display()));
            l.cgroups.push(path);
        }
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for target in mounts.lines().filter_map(|m| m.split_whitespace().nth(1)) {
        let name = Path::new(target).file_name().and_then(|n| n.to_str());
        if name.is_some_and(|n| n.starts_with(MOUNT_PREFIX) && abandoned(n)) {
            l.mounts.push(PathBuf::from(target));
        }
    }
    // Loop devices on abandoned files, then (repeatedly) loop devices on those.
    let loops: Vec<(String, String)> = names_in(Path::new("/sys/block"), "loop")
        .into_iter()
        .filter_map(|n| Some((format!("/dev/{n}"), backing_file(&n)?)))
        .collect();
    let shm = format!("{SHM}/{FILE_PREFIX}");
    let mut found: Vec<Loop> = loops
        .iter()
        .filter(|(_, b)| b.starts_with(&shm) && abandoned(b.trim_start_matches(SHM)))
        .map(|(dev, backing)| Loop {
            dev: dev.clone(),
            backing: backing.clone(),
        })
        .collect();
    loop {
        let more: Vec<Loop> = loops
            .iter()
            .filter(|(dev, b)| {
                found.iter().any(|f| f.dev == *b) && !found.iter().any(|f| f.dev == *dev)
            })
            .map(|(dev, backing)| Loop {
                dev: dev.clone(),
                backing: backing.clone(),
            })
            .collect();
        if more.is_empty() {
            break;
        }
        // Stacked devices go first: they hold the ones below open.
        found.splice(0..0, more);
    }
    l.loops = found;
    for f in names_in(Path::new(SHM), FILE_PREFIX) {
        if abandoned(&f) {
            l.files.push(Path::new(SHM).join(f));
        }
    }
    // The temporary directory holds the Prometheus servers' data (a Ceph lab's among them)
    // and the agents' logs; mount points there are the mounts' to remove.
    let tmp = std::env::temp_dir();
    for f in names_in(&tmp, FILE_PREFIX) {
        if !f.starts_with(MOUNT_PREFIX) && abandoned(&f) {
            l.files.push(tmp.join(f));
        }
    }
    l
}

/// The prefix of the directories file systems of lab disks are mounted on.
const MOUNT_PREFIX: &str = "stornet-mnt-";

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        *self == Leftovers::default()
    }

    /// One line per left-over thing.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        for p in &self.processes {
            v.push(format!("process {} ({}) in {}", p.pid, p.command, p.within));
        }
        for n in &self.namespaces {
            v.push(format!("network namespace {n}"));
        }
        for m in &self.mounts {
            v.push(format!("file system mounted on {}", m.display()));
        }
        for d in &self.loops {
            v.push(format!("loop device {} on {}", d.dev, d.backing));
        }
        for c in &self.cgroups {
            v.push(format!("cgroup {}", c.display()));
        }
        for f in &self.files {
            v.push(format!("file {}", f.display()));
        }
        v
    }

    /// Removes everything listed; returns what was removed and what could not be.
    pub fn remove(&self) -> (Vec<String>, Vec<String>) {
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        let mut note = |ok: bool, what: String, why: String| {
            if ok {
                done.push(what)
            } else {
                failed.push(format!("{what}: {why}"))
            }
        };
        for p in &self.processes {
            let r = stop(p.pid);
            note(
                r.is_ok(),
                format!("stopped process {} ({})", p.pid, p.command),
                r.err().map(|e| format!("{e:#}")).unwrap_or_default(),
            );
        }
        for n in &self.namespaces {
            let r = run("ip", &["netns", "del", n]);
            note(
                r.is_ok(),
                format!("deleted network namespace {n}"),
                r.err().unwrap_or_default(),
            );
        }
        for m in &self.mounts {
            let r = run("umount", &[&m.to_string_lossy()])
                .and_then(|()| std::fs::remove_dir(m).map_err(|e| e.to_string()));
            note(
                r.is_ok(),
                format!("unmounted {}", m.display()),
                r.err().unwrap_or_default(),
            );
        }
        for d in &self.loops {
            let r = run("losetup", &["-d", &d.dev]);
            note(
                r.is_ok(),
                format!("detached loop device {} ({})", d.dev, d.backing),
                r.err().unwrap_or_default(),
            );
        }
        for c in &self.cgroups {
            let r = remove_cgroup(c);
            note(
                r.is_ok(),
                format!("removed cgroup {}", c.display()),
                r.err().unwrap_or_default(),
            );
        }
        for f in &self.files {
            let r = if f.is_dir() {
                std::fs::remove_dir_all(f)
            } else {
                std::fs::remove_file(f)
            };
            note(
                r.is_ok(),
                format!("deleted {}", f.display()),
                r.err().map(|e| e.to_string()).unwrap_or_default(),
            );
        }
        (done, failed)
    }
}

fn run(program: &str, args: &[&str]) -> std::result::Result<(), String> {
    match Command::new(program).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("running {program}: {e}")),
    }
}

/// SIGTERM, then SIGKILL after 3 s.
fn stop(pid: u32) -> Result<()> {
    let gone = || !alive(pid) || zombie(pid);
    // SAFETY: kill(2) on a pid found in a left-over namespace or cgroup.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if gone() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(200));
    if !gone() {
        bail!("still running after SIGKILL");
    }
    Ok(())
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

fn remove_cgroup(path: &Path) -> std::result::Result<(), String> {
    crate::cgroup::remove_tree(path, 30)
}

/// Fails, listing the leftovers and the command that removes them, when there are any that
/// could get in a new lab's way (all but files in the temporary directory).
pub fn refuse() -> Result<()> {
    let mut l = find();
    // Left-over data and logs in the temporary directory get in no new lab's way.
    l.files.retain(|f| f.starts_with(SHM));
    if l.is_empty() {
        return Ok(());
    }
    bail!(
        "an earlier lab run left these behind (their process is gone):\n  {}\nremove them with: {}",
        l.describe().join("\n  "),
        super::CLEAN_COMMAND
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_the_numeric_parts() {
        assert_eq!(owner_pids("stn-s1-a-4242"), [4242]);
        assert_eq!(owner_pids("stornet-test-lab-a0-4242.img"), [4242]);
        assert_eq!(owner_pids("stornet-test-x-4242-7"), [4242, 7]);
        assert_eq!(owner_pids("stornet-test-x-4242-0"), [4242]);
        assert!(owner_pids("stornet-manual").is_empty());
    }

    #[test]
    fn a_live_owner_keeps_a_name_in_use() {
        let me = std::process::id();
        assert!(!abandoned(&format!("stn-x-{me}")));
        assert!(
            !abandoned("stornet-manual.img"),
            "no owner: never ours to remove"
        );
        // pid_max is at most 2^22: no process has this pid.
        assert!(abandoned("stn-x-4999999"));
        assert!(!abandoned(&format!("stornet-test-y-4999999-{me}")));
    }
}
