//! Lab cgroups: a cgroup v1 blkio group with IOPS throttles (slow-device tests), a v1 cpu
//! group with a CPU quota and a v2 group whose pressure an agent reads (a starved storage
//! daemon). Processes are put in them before they exec; each is removed on drop, after they
//! have exited.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
pub const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
/// Where these hybrid hosts mount the unified (v2) hierarchy.
pub const UNIFIED_ROOT: &str = "/sys/fs/cgroup/unified";

/// A cgroup directory in any hierarchy.
pub struct Cgroup {
    pub path: PathBuf,
}

impl Cgroup {
    /// Creates `<root>/stornet-test-<tag>-<pid>`; `probe` is a file the hierarchy must have.
    pub fn new(root: &str, probe: &str, tag: &str) -> Result<Cgroup> {
        if !Path::new(root).join(probe).exists() {
            bail!("no cgroup hierarchy with {probe} at {root}");
        }
        let path = PathBuf::from(root).join(format!("stornet-test-{tag}-{}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Cgroup { path })
    }

    /// Creates the child group `name` (a v2 group below this one) and returns its path.
    pub fn child(&self, name: &str) -> Result<PathBuf> {
        let path = self.path.join(name);
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(path)
    }

    /// Makes `cmd` join the child group `name` in the child process, before it execs.
    pub fn enter_child_on_spawn(&self, name: &str, cmd: &mut Command) -> Result<()> {
        enter_on_spawn(&self.path.join(name), cmd)
    }

    /// The group's directory name: its path below the root for a group made by [`Cgroup::new`],
    /// as a `[cgroups] paths` pattern names it.
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Moves this whole process into the child group `name` of this v2 group until the
    /// guard drops; sockets opened meanwhile keep that group for their lifetime. Every thread
    /// moves, and children spawned meanwhile start there: for a process that runs one test
    /// at a time (a guest's).
    pub fn enter_self(&self, name: &str) -> Result<InGroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let home = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .context("this process is in no cgroup v2 group")?;
        let root = self.path.parent().context("a group below the root")?;
        let back = root.join(home.trim_start_matches('/'));
        std::fs::write(self.path.join(name).join("cgroup.procs"), "0")
            .with_context(|| format!("entering {}/{name}", self.path.display()))?;
        Ok(InGroup { back })
    }

    /// Writes `value` to the group's `file`.
    pub fn write(&self, file: &str, value: &str) -> Result<()> {
        let file = self.path.join(file);
        std::fs::write(&file, value)
            .with_context(|| format!("writing {value:?} to {}", file.display()))
    }

    /// Makes `cmd` join this cgroup in the child, before it execs.
    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        enter_on_spawn(&self.path, cmd)
    }
}

/// This process's stay in a v2 group: it returns to where it was on drop.
pub struct InGroup {
    back: PathBuf,
}

impl Drop for InGroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(self.back.join("cgroup.procs"), "0") {
            eprintln!("warning: could not return to {}: {e}", self.back.display());
        }
    }
}

/// Makes `cmd` join the cgroup at `dir` in the child, before it execs.
fn enter_on_spawn(dir: &Path, cmd: &mut Command) -> Result<()> {
    let procs = CString::new(dir.join("cgroup.procs").to_string_lossy().as_bytes())?;
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // system calls (open, write, close) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ok = libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) == 1;
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if ok { Ok(()) } else { Err(err) }
        })
    };
    Ok(())
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Err(e) = remove_tree(&self.path, 50) {
            eprintln!("warning: could not remove {}: {e}", self.path.display());
        }
    }
}

/// Removes a cgroup and the groups below it, deepest first, retrying `tries` times 100 ms
/// apart (a group can only be removed once its processes have exited).
pub fn remove_tree(path: &Path, tries: u32) -> std::result::Result<(), String> {
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path(), tries)?;
            }
        }
    }
    let mut last = String::new();
    for _ in 0..tries {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(last)
}

/// A v1 cpu group: its tasks get at most a share of one CPU.
pub struct CpuCgroup(pub Cgroup);

impl CpuCgroup {
    pub fn new(tag: &str) -> Result<CpuCgroup> {
        Ok(CpuCgroup(Cgroup::new(CPU_ROOT, "cpu.cfs_quota_us", tag)?))
    }

    /// Caps the group at `per_mille` thousandths of one CPU (in 100 ms periods, as a
    /// container's CPU limit does); `None` lifts the cap.
    pub fn limit(&self, per_mille: Option<u64>) -> Result<()> {
        self.0.write("cpu.cfs_period_us", "100000")?;
        let quota = per_mille.map_or(-1, |m| (m * 100) as i64);
        self.0.write("cpu.cfs_quota_us", &quota.to_string())
    }

    /// (periods throttled, seconds throttled) of the group (its `cpu.stat`).
    pub fn throttled(&self) -> Result<(u64, f64)> {
        let stat = std::fs::read_to_string(self.0.path.join("cpu.stat"))?;
        let field = |k: &str| -> Result<u64> {
            stat.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
                .with_context(|| format!("no {k} in cpu.stat"))
        };
        Ok((
            field("nr_throttled ")?,
            field("throttled_time ")? as f64 / 1e9,
        ))
    }
}

/// A v1 blkio group with IOPS or bandwidth throttles.
pub struct BlkioCgroup(pub Cgroup);

impl BlkioCgroup {
    /// Creates `/sys/fs/cgroup/blkio/stornet-test-<tag>-<pid>`.
    pub fn new(tag: &str) -> Result<BlkioCgroup> {
        Cgroup::new(BLKIO_ROOT, "blkio.throttle.read_iops_device", tag)
            .map(BlkioCgroup)
            .context("cgroup v1 blkio throttling is not available")
    }

    /// Caps reads (`read`) or writes of device `maj:min` at `iops`.
    pub fn throttle_iops(&self, devnum: &str, read: bool, iops: u64) -> Result<()> {
        let op = if read { "read" } else { "write" };
        self.throttle(&format!("blkio.throttle.{op}_iops_device"), devnum, iops)
    }

    /// Caps reads (`read`) or writes of device `maj:min` at `bytes` per second.
    pub fn throttle_bps(&self, devnum: &str, read: bool, bytes: u64) -> Result<()> {
        let op = if read { "read" } else { "write" };
        self.throttle(&format!("blkio.throttle.{op}_bps_device"), devnum, bytes)
    }

    fn throttle(&self, file: &str, devnum: &str, value: u64) -> Result<()> {
        self.0.write(file, &format!("{devnum} {value}"))
    }

    /// Makes `cmd` join this cgroup in the child, before it execs.
    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        self.0.enter_on_spawn(cmd)
    }
}

/// A memory group with a limit: v1 (`/sys/fs/cgroup/memory`) on hybrid hosts, the unified
/// hierarchy's `memory.max` on cgroup v2 hosts. Its tasks are killed by the kernel when they
/// go over, as under a unit's `MemoryMax=`.
pub struct MemoryCgroup {
    pub group: Cgroup,
    v2: bool,
}

/// Where a v1 memory hierarchy is mounted.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

impl MemoryCgroup {
    /// Creates a group limited to `limit` bytes, without swap.
    pub fn new(tag: &str, limit: u64) -> Result<MemoryCgroup> {
        let v2_root = ["/sys/fs/cgroup", UNIFIED_ROOT].into_iter().find(|r| {
            std::fs::read_to_string(Path::new(r).join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"))
        });
        let m = match v2_root {
            Some(root) => {
                let _ = std::fs::write(Path::new(root).join("cgroup.subtree_control"), "+memory");
                MemoryCgroup {
                    group: Cgroup::new(root, "cgroup.controllers", tag)?,
                    v2: true,
                }
            }
            None => MemoryCgroup {
                group: Cgroup::new(MEMORY_ROOT, "memory.limit_in_bytes", tag)
                    .context("no memory cgroup (neither v2 nor v1)")?,
                v2: false,
            },
        };
        if m.v2 {
            m.group.write("memory.max", &limit.to_string())?;
            let _ = m.group.write("memory.swap.max", "0");
        } else {
            m.group.write("memory.limit_in_bytes", &limit.to_string())?;
            let _ = m.group.write("memory.swappiness", "0");
        }
        Ok(m)
    }

    pub fn enter_on_spawn(&self, cmd: &mut Command) -> Result<()> {
        self.group.enter_on_spawn(cmd)
    }

    /// The `cgroup.procs` file a wrapper writes its pid to.
    pub fn procs(&self) -> PathBuf {
        self.group.path.join("cgroup.procs")
    }

    fn read(&self, file: &str) -> Result<String> {
        let p = self.group.path.join(file);
        std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    }

    /// The most memory the group has held (v2 kernels without `memory.peak` give the
    /// current use).
    pub fn peak(&self) -> Result<u64> {
        let file = if self.v2 {
            if self.group.path.join("memory.peak").exists() {
                "memory.peak"
            } else {
                "memory.current"
            }
        } else {
            "memory.max_usage_in_bytes"
        };
        Ok(self.read(file)?.trim().parse()?)
    }

    /// Starts the peak again from the current use (v1 only: v2 resets a peak per reader).
    pub fn reset_peak(&self) -> bool {
        !self.v2 && self.group.write("memory.max_usage_in_bytes", "0").is_ok()
    }

    /// The memory the group holds now.
    pub fn current(&self) -> Result<u64> {
        let file = if self.v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        };
        Ok(self.read(file)?.trim().parse()?)
    }

    /// Processes of the group the kernel killed for going over the limit.
    pub fn oom_kills(&self) -> Result<u64> {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        let text = self.read(file)?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0))
    }
}
