//! What each job runs on: `--filename` (or a file named after the job in `--directory`)
//! resolved to a block device or a regular file, sizes and alignment checked against it, and
//! files created and laid out before the run.

pub mod safety;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::options::layout::Fallocate;
use crate::options::values::{SizeSpec, format_bytes};
use crate::options::{IoEngine, Plan};

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    BlockDevice,
    File,
    /// The name an `ioengine=null` job gives: nothing is opened, created or checked there.
    Null,
    /// `/dev/null` or `/dev/zero` (fio's steadystate.fio runs on them): IO to the kernel's
    /// sinks and sources of bytes, whose size is the job's `--size`.
    CharDevice,
}

#[derive(Clone, Debug)]
pub struct Target {
    /// The name the job gives it (reports, messages).
    pub path: PathBuf,
    /// What is opened to use it: the same path, or `/proc/self/fd/N` of a file the job
    /// service opened for the job (so nothing is resolved by name again).
    pub open: PathBuf,
    pub kind: TargetKind,
    /// Current size in bytes (0 for a file that does not exist yet).
    pub size: u64,
    /// The device's logical block size: direct IO sizes must be multiples of it.
    pub logical_block: u64,
    pub exists: bool,
    /// Bytes the jobs use from the start of the target.
    pub needed: u64,
    /// Whether any job writes to it.
    pub written: bool,
    /// How the jobs on it want it laid out.
    pub prep: Prep,
}

/// How a file is laid out before the run, from the options of the jobs on it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prep {
    /// Whether any job reads it (then it is written whole, so reads find data).
    pub read: bool,
    /// fio's `fallocate` of the first job on it that gives one.
    pub alloc: Option<Fallocate>,
    /// fio's `create_on_open` of every job on it (None: no job yet).
    pub on_open: Option<bool>,
}

impl Prep {
    /// Whether the layout writes data into the file (else it allocates or creates at most).
    pub fn writes_data(&self) -> bool {
        self.on_open != Some(true) && (self.read || self.alloc.is_none())
    }
}

/// One job thread's place: which plan job, which clone, which target (its first), how
/// many bytes of it.
#[derive(Clone, Debug)]
pub struct Thread {
    pub group: usize,
    pub jobnum: u32,
    pub target: usize,
    pub region: u64,
}

/// The rest of a job thread's place (indexed like `Layout::threads`): every file with the
/// region in it, and what a size-based run transfers.
#[derive(Clone, Debug)]
pub struct Placement {
    /// (target, offset of the region, length of the region), one per file.
    pub files: Vec<(usize, u64, u64)>,
    /// `io_size` × `loops`.
    pub io_bytes: u64,
    /// The region runs to the end of what an earlier job's `fill_device` wrote: its length
    /// (and `io_bytes`) are the file's when the job starts.
    pub sized_at_start: bool,
}

pub struct Layout {
    pub targets: Vec<Target>,
    pub threads: Vec<Thread>,
}

fn block_device_geometry(shown: &Path, path: &Path) -> Result<(u64, u64), String> {
    let f = File::open(path).map_err(|e| format!("cannot open {}: {e}", shown.display()))?;
    let mut size: u64 = 0;
    let mut lbs: libc::c_int = 0;
    // SAFETY: both ioctls write one value of the given type through a valid pointer.
    let ok = unsafe {
        libc::ioctl(f.as_raw_fd(), BLKGETSIZE64 as _, &mut size) == 0
            && libc::ioctl(f.as_raw_fd(), BLKSSZGET as _, &mut lbs) == 0
    };
    if !ok {
        return Err(format!(
            "{}: cannot read the device size: {}",
            shown.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok((size, lbs.max(512) as u64))
}

/// File systems that are the kernel's interfaces, not storage: writing to their files
/// changes settings or triggers actions (`/proc/sysrq-trigger`, `/sys/…/delete`).
const PSEUDO_FILESYSTEMS: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x2762_1946, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0x1cd1, "devpts"),
    // FUSE_CTL_SUPER_MAGIC; FUSE file systems themselves (0x6573_5546) are storage.
    (0x6573_5543, "fusectl"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6e73_6673, "nsfs"),
];

/// The pseudo file system `path` (or, when it does not exist, its directory) is on.
fn pseudo_filesystem(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let on = if path.exists() {
        path
    } else {
        match path.parent()? {
            d if d.as_os_str().is_empty() => Path::new("."),
            d => d,
        }
    };
    let c = std::ffi::CString::new(on.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs writes one struct through a valid pointer; the path is NUL-terminated.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    PSEUDO_FILESYSTEMS
        .iter()
        .find(|(magic, _)| *magic == st.f_type as i64)
        .map(|(_, name)| *name)
}

/// The character devices loadgen does IO on, as fio: what is written there is discarded,
/// what is read is zeros (`/dev/zero`) or nothing (`/dev/null`).
const SINKS: [&str; 2] = ["/dev/null", "/dev/zero"];

/// What `path` is, looked at through `open` (the path itself, or the job service's
/// descriptor of it); `created`: the job service created it empty for this job.
pub fn inspect(path: &Path, open: &Path, created: bool) -> Result<Target, String> {
    let shown = path.display();
    if let Some(fs) = pseudo_filesystem(open) {
        return Err(format!(
            "{shown} is on {fs}, a kernel interface, not storage: loadgen does not write there"
        ));
    }
    let mut t = Target {
        path: path.to_path_buf(),
        open: open.to_path_buf(),
        kind: TargetKind::File,
        size: 0,
        logical_block: 512,
        exists: true,
        needed: 0,
        written: false,
        prep: Prep::default(),
    };
    match std::fs::metadata(open) {
        Ok(m) if m.file_type().is_block_device() => {
            let (size, lbs) = block_device_geometry(path, open)?;
            t.kind = TargetKind::BlockDevice;
            t.size = size;
            t.logical_block = lbs;
        }
        Ok(m) if m.file_type().is_char_device() && SINKS.iter().any(|d| path == Path::new(d)) => {
            t.kind = TargetKind::CharDevice;
        }
        Ok(_) if created => t.exists = false,
        Ok(m) if m.is_file() => t.size = m.len(),
        Ok(m) if m.is_dir() => return Err(format!("{shown} is a directory, not a file")),
        Ok(_) => {
            return Err(format!(
                "{shown} is neither a regular file nor a block device (of character devices, only /dev/null and /dev/zero)"
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if path.starts_with("/dev") && !path.starts_with("/dev/shm") {
                return Err(format!(
                    "{shown} does not exist (no such device; loadgen creates no files in /dev)"
                ));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
                && !dir.is_dir()
            {
                return Err(format!(
                    "cannot create {shown}: directory {} does not exist",
                    dir.display()
                ));
            }
            t.exists = false;
        }
        Err(e) => return Err(format!("{shown}: {e}")),
    }
    Ok(t)
}

/// A size (or a percentage of `of`).
fn bytes_of(spec: SizeSpec, of: u64) -> u64 {
    match spec {
        SizeSpec::Bytes(b) => b,
        SizeSpec::Percent(p) => of * p as u64 / 100,
    }
}

/// The target of an `ioengine=null` job: only a name (nothing is opened, created or
/// laid out; validation has made sure its size is given in bytes).
fn null_target(path: &Path) -> Target {
    Target {
        path: path.to_path_buf(),
        open: path.to_path_buf(),
        kind: TargetKind::Null,
        size: u64::MAX / 4,
        logical_block: 1,
        exists: true,
        needed: 0,
        written: false,
        prep: Prep::default(),
    }
}

/// Resolves every job thread's targets and checks sizes and alignment against them.
pub fn resolve(plan: &Plan) -> Result<(Layout, Vec<Placement>), String> {
    resolve_with(plan, &mut |p| inspect(p, p, false))
}

/// A target the job service opened for a job order: its name in the job, what to open
/// instead of the name, and whether the service created it empty.
#[derive(Clone, Debug)]
pub struct Preopened {
    pub path: PathBuf,
    pub open: PathBuf,
    pub created: bool,
}

/// As [`resolve`], every target among `preopened`: no name is resolved on the machine.
pub fn resolve_preopened(
    plan: &Plan,
    preopened: &[Preopened],
) -> Result<(Layout, Vec<Placement>), String> {
    resolve_with(plan, &mut |p| {
        let o = preopened
            .iter()
            .find(|o| o.path == p)
            .ok_or_else(|| format!("refused: {} was not opened by the job service", p.display()))?;
        inspect(p, &o.open, o.created)
    })
}

/// As [`resolve`], with each target found through `target_of` (called once per path).
pub fn resolve_with(
    plan: &Plan,
    target_of: &mut dyn FnMut(&Path) -> Result<Target, String>,
) -> Result<(Layout, Vec<Placement>), String> {
    let mut targets: Vec<Target> = Vec::new();
    let mut threads = Vec::new();
    let mut placements = Vec::new();
    // Targets an earlier job fills (`fill_device`): a later job without a size gets what
    // it wrote.
    let mut filled: Vec<usize> = Vec::new();
    for (group, job) in plan.jobs.iter().enumerate() {
        let name = &job.name;
        let min_bs = job.bs.iter().copied().min().unwrap_or(4096);
        for jobnum in 0..job.numjobs {
            let paths = job.files_of(jobnum);
            let nfiles = paths.len().max(1) as u64;
            let mut files = Vec::with_capacity(paths.len());
            let mut sized = 0;
            let mut sized_at_start = false;
            for path in paths {
                // A null job's name is never the target of a job that does IO: that one
                // is inspected (and, if it writes a device, guarded) on its own.
                let null = job.ioengine == IoEngine::Null;
                let same = |t: &Target| t.path == path && (t.kind == TargetKind::Null) == null;
                let ti = match targets.iter().position(same) {
                    Some(i) => i,
                    None if job.ioengine == IoEngine::Null => {
                        targets.push(null_target(&path));
                        targets.len() - 1
                    }
                    None => {
                        targets.push(target_of(&path)?);
                        targets.len() - 1
                    }
                };
                let t = &mut targets[ti];
                let shown = t.path.display().to_string();
                if !t.exists && !job.allow_file_create {
                    return Err(format!(
                        "job {name}: {shown} does not exist, and allow_file_create=0 forbids creating it"
                    ));
                }
                let known = t.exists && t.size > 0;
                // fio: a percentage offset is of the file's size, rounded up to the IO size.
                let mut offset = 0;
                for (spec, times, what) in [
                    (job.offset, 1, "--offset"),
                    (job.offset_increment, jobnum as u64, "--offset_increment"),
                ] {
                    match spec {
                        Some(SizeSpec::Percent(_)) if !known => {
                            return Err(format!(
                                "job {name}: {what} in percent needs {shown} to exist"
                            ));
                        }
                        Some(SizeSpec::Percent(p)) => {
                            offset += (t.size * p as u64 / 100).div_ceil(min_bs) * min_bs * times;
                        }
                        Some(SizeSpec::Bytes(b)) => offset += b * times,
                        None => {}
                    }
                }
                let later = job.size.is_none() && filled.contains(&ti) && !job.fill_device;
                // fio divides --size between the files of a job.
                let region = match job.size {
                    None if job.fill_device => fill_region(t, offset)
                        .map_err(|e| format!("job {name}: fill_device: {e}"))?,
                    None if later => {
                        sized_at_start = true;
                        0
                    }
                    Some(SizeSpec::Bytes(b)) => b / nfiles,
                    Some(SizeSpec::Percent(p)) if t.exists => t.size * p as u64 / 100,
                    Some(SizeSpec::Percent(_)) => {
                        return Err(format!(
                            "job {name}: {shown} does not exist; give --size in bytes to create it"
                        ));
                    }
                    None if known && t.size > offset => t.size - offset,
                    None if known => {
                        return Err(format!(
                            "job {name}: --offset={offset} is at or past the end of {shown} ({} bytes)",
                            t.size
                        ));
                    }
                    None => {
                        return Err(format!(
                            "job {name}: {shown} does not exist or is empty; give --size to create it"
                        ));
                    }
                };
                if t.kind == TargetKind::BlockDevice && offset + region > t.size {
                    return Err(format!(
                        "job {name}: offset {offset} + size {} is larger than {shown} ({} bytes)",
                        format_bytes(region),
                        t.size
                    ));
                }
                let max_bs = job.bs.iter().copied().max().unwrap_or(0);
                if region < max_bs && !sized_at_start {
                    return Err(format!(
                        "job {name}: size {region} bytes of {shown} is smaller than --bs={}",
                        format_bytes(max_bs)
                    ));
                }
                if job.direct {
                    if let Some(bs) = job.bs.iter().find(|&&b| b % t.logical_block != 0) {
                        return Err(format!(
                            "job {name}: --bs={bs} is not a multiple of {shown}'s logical block size {}, which direct IO needs",
                            t.logical_block
                        ));
                    }
                    if offset % t.logical_block != 0 {
                        return Err(format!(
                            "job {name}: offset {offset} is not a multiple of {shown}'s logical block size {}, which direct IO needs",
                            t.logical_block
                        ));
                    }
                }
                // A filled file is not laid out: the job writes it until it is full.
                if job.fill_device {
                    t.needed = t.needed.max(offset);
                    filled.push(ti);
                } else if !sized_at_start {
                    t.needed = t.needed.max(offset + region);
                }
                t.written |= job.rw.read_pct(job.rwmixread) < 100;
                t.prep.read |= job.rw.read_pct(job.rwmixread) > 0;
                t.prep.alloc = t.prep.alloc.or(job.layout.fallocate);
                t.prep.on_open = Some(t.prep.on_open.unwrap_or(true) && job.layout.create_on_open);
                if job.rw.trim() && t.kind != TargetKind::File {
                    return Err(format!(
                        "job {name}: rw={} on {shown}: loadgen trims regular files only (a hole punched), not devices",
                        job.rw.as_str()
                    ));
                }
                sized += region;
                // fio's strided zones move on to the end of the file, whatever `size`
                // says (it bounds the bytes transferred), and wrap to the job's start.
                let span = if job.zones.strided && known {
                    region.max(t.size.saturating_sub(offset))
                } else {
                    region
                };
                files.push((ti, offset, span));
            }
            let total = sized;
            let io_size = job.io_size.map_or(total, |s| bytes_of(s, total));
            threads.push(Thread {
                group,
                jobnum,
                target: files[0].0,
                region: files[0].2,
            });
            placements.push(Placement {
                io_bytes: io_size.saturating_mul(job.loops as u64),
                sized_at_start,
                files,
            });
        }
    }
    Ok((Layout { targets, threads }, placements))
}

/// Creates missing files and extends short ones by writing data, as fio lays out files, so
/// that reads hit written blocks rather than holes.
pub fn prepare(layout: &Layout) -> anyhow::Result<()> {
    for t in &layout.targets {
        if t.kind != TargetKind::File || (t.exists && t.size >= t.needed) {
            continue;
        }
        // A file to fill (`fill_device`) is created as it is, without laying it out.
        if t.size >= t.needed {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&t.open)
                .with_context(|| format!("creating {}", t.path.display()))?;
            continue;
        }
        // fio's `create_on_open`: the job creates the file when it opens it.
        if t.prep.on_open == Some(true) {
            continue;
        }
        if let (false, Some(mode)) = (t.prep.writes_data(), t.prep.alloc) {
            allocate(t, mode)?;
            continue;
        }
        crate::note!(
            "loadgen: laying out {} ({} bytes)",
            t.path.display(),
            t.needed
        );
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&t.open)
            .with_context(|| format!("creating {}", t.path.display()))?;
        let chunk: Vec<u8> = (0..1 << 20)
            .map(|i: u32| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect();
        let mut pos = t.size;
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(pos))?;
        while pos < t.needed {
            let n = (t.needed - pos).min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])
                .with_context(|| format!("laying out {}", t.path.display()))?;
            pos += n as u64;
        }
        f.sync_all()?;
    }
    Ok(())
}

/// fio's layout of a file its jobs only write: created, then space allocated (or the size
/// set) as `fallocate` says; no data is written. A failed allocation is reported and the
/// run goes on, as fio's.
fn allocate(t: &Target, mode: Fallocate) -> anyhow::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&t.open)
        .with_context(|| format!("creating {}", t.path.display()))?;
    let fd = f.as_raw_fd();
    let len = t.needed as libc::off_t;
    // SAFETY: plain system calls on a file this function opened.
    let r = unsafe {
        match mode {
            Fallocate::None => return Ok(()),
            Fallocate::Posix => match libc::posix_fallocate(fd, 0, len) {
                0 => 0,
                e => {
                    *libc::__errno_location() = e;
                    -1
                }
            },
            Fallocate::Keep => libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, len),
            Fallocate::Native => libc::fallocate(fd, 0, 0, len),
            Fallocate::Truncate => libc::ftruncate(fd, len),
        }
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let quiet = mode == Fallocate::Native
            && matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS));
        if !quiet {
            crate::note!(
                "loadgen: fallocate={} of {} ({} bytes) failed: {e}",
                format!("{mode:?}").to_ascii_lowercase(),
                t.path.display(),
                t.needed
            );
        }
    }
    Ok(())
}

/// Memory the IO buffers of the largest point take: each job thread maps `iodepth` buffers
/// of `bs` bytes (page-rounded) and touches them all at start.
pub fn buffer_bytes(layout: &Layout, points: &[crate::options::sweep::Point]) -> u64 {
    points
        .iter()
        .map(|p| {
            layout
                .threads
                .iter()
                .map(|t| {
                    // Each job thread holds iodepth buffers of its largest IO size.
                    let shape = &p.per_job[t.group];
                    let bs = shape.sizes.iter().map(|s| s.max()).max().unwrap_or(4096);
                    bs.div_ceil(4096)
                        .saturating_mul(4096)
                        .saturating_mul(shape.iodepth as u64)
                })
                .fold(0u64, u64::saturating_add)
        })
        .max()
        .unwrap_or(0)
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn read_number(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// What the memory cgroups this process is in still allow: the least room (limit less use)
/// of its group and of the groups above it, in either hierarchy; `None` without a limit.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut least: Option<u64> = None;
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (root, limit, usage) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        let mut dir = Path::new(root).join(path.trim_start_matches('/'));
        loop {
            if let (Some(l), Some(u)) =
                (read_number(&dir.join(limit)), read_number(&dir.join(usage)))
            {
                let room = l.saturating_sub(u);
                least = Some(least.map_or(room, |r| r.min(room)));
            }
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    least
}

/// The memory a run may use: the machine's available memory, or less where its cgroup
/// allows less; and whether the cgroup is what limits it.
fn memory_room(machine: Option<u64>, cgroup: Option<u64>) -> Option<(u64, bool)> {
    match (machine, cgroup) {
        (Some(m), Some(c)) if c < m => Some((c, true)),
        (None, Some(c)) => Some((c, true)),
        (Some(m), _) => Some((m, false)),
        (None, None) => None,
    }
}

/// Refuses a run whose IO buffers would not fit in the memory available to it (the kernel
/// would kill loadgen part way instead).
pub fn check_memory(
    layout: &Layout,
    points: &[crate::options::sweep::Point],
) -> Result<(), String> {
    let need = buffer_bytes(layout, points);
    match memory_room(available_memory(), cgroup_room()) {
        Some((free, by_cgroup)) if need > free / 10 * 9 => Err(format!(
            "the IO buffers need {} (bs × iodepth × numjobs), but only {} of memory is available{}",
            human(need),
            human(free),
            if by_cgroup {
                " to loadgen's memory cgroup"
            } else {
                ""
            }
        )),
        _ => Ok(()),
    }
}

/// Refuses a layout larger than the free space of the file systems it goes on: a `--size`
/// given by mistake (or in a job order) would otherwise fill them.
///
/// `all`: also the files whose layout writes no data (`fallocate`, `create_on_open`), which
/// the jobs' writes fill as they go: the job service counts them, `loadgen run` leaves them to
/// the run (a job may mean to fill its file system, as fio's enospc-pressure.fio).
pub fn check_space(layout: &Layout, all: bool) -> Result<(), String> {
    // (file system, bytes to write on it, bytes free, a target on it)
    let mut per_fs: Vec<(u64, u64, u64, &Path)> = Vec::new();
    for t in &layout.targets {
        if t.kind != TargetKind::File || t.needed <= t.size || !(all || t.prep.writes_data()) {
            continue;
        }
        let on = space_on(t);
        let Some((fsid, free)) = free_space(&on) else {
            continue;
        };
        let grow = t.needed - t.size;
        match per_fs.iter_mut().find(|f| f.0 == fsid) {
            Some(f) => f.1 = f.1.saturating_add(grow),
            None => per_fs.push((fsid, grow, free, &t.path)),
        }
    }
    match per_fs.iter().find(|f| f.1 > f.2) {
        Some((_, need, free, path)) => Err(format!(
            "laying out {} needs {} bytes, more than the {} bytes ({}) free on its file system",
            path.display(),
            need,
            free,
            human(*free)
        )),
        None => Ok(()),
    }
}

/// Where the free space of a file target's file system is read: the file, or the directory
/// it will be created in.
fn space_on(t: &Target) -> PathBuf {
    if t.exists || t.open != t.path {
        return t.open.clone();
    }
    match t.open.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fio's `fill_device` without a size: a device to its end; a file past what the free
/// space of its file system takes it to from its end (what root may write, reserved blocks
/// included, and 1 % more, at least 1 MiB: the file system's own count may be short), so
/// that ENOSPC, not the region, ends the writes.
fn fill_region(t: &Target, offset: u64) -> Result<u64, String> {
    match t.kind {
        TargetKind::BlockDevice => Ok(t.size.saturating_sub(offset)),
        TargetKind::File => {
            let on = space_on(t);
            let free = free_to_fill(&on).ok_or_else(|| {
                format!(
                    "cannot read the free space of {}'s file system",
                    t.path.display()
                )
            })?;
            let margin = (free / 100).max(1 << 20);
            Ok(t.size
                .saturating_sub(offset)
                .saturating_add(free)
                .saturating_add(margin))
        }
        _ => Err(format!(
            "{} is not a file or block device",
            t.path.display()
        )),
    }
}

/// Bytes this process may write on the file system `path` is on: root's free blocks
/// (reserved ones included), or a user's.
fn free_to_fill(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs writes one struct through a valid pointer; the path is NUL-terminated.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    let blocks = if unsafe { libc::geteuid() } == 0 {
        st.f_bfree
    } else {
        st.f_bavail
    };
    Some(blocks.saturating_mul(st.f_frsize))
}

/// (file system id, bytes free to an unprivileged user) of the file system `path` is on.
fn free_space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs writes one struct through a valid pointer; the path is NUL-terminated.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_fsid, st.f_bavail.saturating_mul(st.f_frsize)))
}

/// `1.5 GiB`, `640.0 MiB`.
fn human(n: u64) -> String {
    let (div, unit) = if n >= 1 << 30 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    };
    format!("{:.1} {unit}", n as f64 / div)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_cgroup_limits_the_buffers_when_it_allows_less() {
        assert_eq!(
            memory_room(Some(8 << 30), Some(64 << 20)),
            Some((64 << 20, true))
        );
        assert_eq!(
            memory_room(Some(64 << 20), Some(8 << 30)),
            Some((64 << 20, false))
        );
        assert_eq!(memory_room(Some(1 << 30), None), Some((1 << 30, false)));
        assert_eq!(memory_room(None, None), None);
    }

    #[test]
    fn trims_run_on_regular_files_only() {
        let args: Vec<String> = [
            "--name=t",
            "--rw=randtrim",
            "--size=1m",
            "--filename=/dev/null",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let plan = match crate::options::parse::parse_args(&args).unwrap() {
            crate::options::parse::Parsed::Plan(p) => *p,
            _ => unreachable!(),
        };
        let e = resolve(&plan).map(|_| ()).unwrap_err();
        assert!(e.contains("trims regular files only"), "{e}");
    }

    #[test]
    fn a_layout_larger_than_the_free_space_is_refused() {
        let dir = std::env::temp_dir().join(format!("loadgen-space-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plan = |size: &str| {
            let args: Vec<String> = [
                "--name=w",
                "--rw=write",
                &format!("--size={size}"),
                &format!("--filename={}", dir.join("f").display()),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            match crate::options::parse::parse_args(&args).unwrap() {
                crate::options::parse::Parsed::Plan(p) => *p,
                _ => unreachable!(),
            }
        };
        let (layout, _) = resolve(&plan("16383p")).unwrap();
        let e = check_space(&layout, false).unwrap_err();
        assert!(e.contains("free on its file system"), "{e}");
        let (layout, _) = resolve(&plan("1m")).unwrap();
        assert_eq!(check_space(&layout, false), Ok(()));
        assert!(!dir.join("f").exists(), "nothing was created");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_null_job_shares_no_target_with_a_job_that_does_io() {
        let plan = match crate::options::parse::parse_args(
            &[
                "--name=n",
                "--ioengine=null",
                "--filename=/dev/sdz",
                "--size=1m",
                "--name=w",
                "--rw=write",
                "--filename=/dev/sdz",
                "--size=1m",
            ]
            .map(String::from),
        ) {
            Ok(crate::options::parse::Parsed::Plan(p)) => p,
            _ => panic!("parses"),
        };
        let mut inspected = Vec::new();
        let (layout, _) = resolve_with(&plan, &mut |p| {
            inspected.push(p.to_path_buf());
            let mut t = null_target(p);
            t.kind = TargetKind::BlockDevice;
            t.size = 1 << 30;
            Ok(t)
        })
        .unwrap();
        assert_eq!(
            inspected,
            [PathBuf::from("/dev/sdz")],
            "the writer's target only"
        );
        let kinds: Vec<_> = layout.targets.iter().map(|t| t.kind).collect();
        assert_eq!(kinds, [TargetKind::Null, TargetKind::BlockDevice]);
        assert_eq!(
            layout.threads[1].target, 1,
            "the writer is guarded as a device"
        );
    }
}
