//! Opening what a job order names, at the point of use: a file only beneath a served
//! directory, reached from the directory's descriptor without following any symbolic link
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, or one `O_NOFOLLOW` component at
//! a time on kernels without it); a device only among those allowed. Where a path lies is
//! judged from its text first, so nothing outside the served directories is ever looked at
//! and a refusal says nothing about what exists there. The descriptors opened here are
//! what the job uses: nothing is resolved again after the check.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The part of `path` below `dir` (both absolute), with `.` and `..` taken from the text;
/// `None` when the path is not below `dir` or climbs above it.
pub fn beneath(dir: &Path, path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(dir).ok()?;
    let mut parts: Vec<&OsStr> = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

fn fd_or_err(fd: libc::c_long) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.
fn openat2(dir: &OwnedFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: open_how is plain data; zero is "no flags, no mode".
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: valid pointers to a NUL-terminated path and an open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    fd_or_err(fd)
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)` of one path component.
fn openat(dir: &OwnedFd, name: &OsStr, flags: i32, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let c = cstr(Path::new(name))?;
    // SAFETY: a NUL-terminated name and a directory descriptor we own.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    fd_or_err(fd as libc::c_long)
}

/// The directory `rel` below `dir` (`rel` holds no `..`), reached without a symbolic link:
/// `openat2` where the kernel has it (5.6 and later), one component at a time elsewhere.
fn directory_beneath(dir: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    match openat2(dir, rel, flags) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        r => return r,
    }
    let mut cur = dir.try_clone()?;
    for c in rel.components() {
        if let Component::Normal(n) = c {
            cur = openat(&cur, n, flags, 0)?;
        }
    }
    Ok(cur)
}

pub fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one struct through a valid pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// A directory the service serves: its path (resolved once, at start) and a descriptor that
/// every open below it starts from.
#[derive(Debug)]
pub struct ServedDir {
    pub path: PathBuf,
    fd: OwnedFd,
}

impl ServedDir {
    pub fn open(path: &Path) -> Result<ServedDir, String> {
        let shown = path.display();
        let path = path.canonicalize().map_err(|e| format!("{shown}: {e}"))?;
        let c = cstr(&path).map_err(|e| format!("{shown}: {e}"))?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        let fd = fd_or_err(fd as libc::c_long).map_err(|e| format!("{shown}: {e}"))?;
        Ok(ServedDir { path, fd })
    }
}

/// A file a job may use, opened beneath a served directory.
#[derive(Debug)]
pub struct Opened {
    /// The name the job gives it (absolute).
    pub path: PathBuf,
    pub fd: OwnedFd,
    /// Created empty by this open (the job lays it out).
    pub created: bool,
    /// The directory it is in and its name there, to take back a file created for a job
    /// that was then refused.
    parent: Option<(OwnedFd, OsString)>,
}

impl Opened {
    /// Removes the file if this open created it and it is still the same file.
    pub fn remove_created(&self) {
        let Some((dir, name)) = self.parent.as_ref().filter(|_| self.created) else {
            return;
        };
        let Ok(c) = cstr(Path::new(name)) else { return };
        let Ok(ours) = fstat(&self.fd) else { return };
        // SAFETY: fstatat/unlinkat on a directory descriptor we own and a NUL-terminated name.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstatat(
                dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
                && st.st_ino == ours.st_ino
                && st.st_dev == ours.st_dev
            {
                libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0);
            }
        }
    }
}

/// Why an open was refused. `Outside` names nothing about the host's files.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// Not below a served directory and not an allowed device.
    Outside,
    /// Below a served directory, but not a file a job may use there; the reason.
    Inside(String),
}

/// Opens `rel` (no `..`, relative) beneath `dir` as a job's target: an existing regular file
/// with no other hard link, or a new file created empty. A symbolic link anywhere on the way
/// is refused.
pub fn open_file(dir: &ServedDir, path: &Path, rel: &Path) -> Result<Opened, Refusal> {
    let inside = |what: String| Refusal::Inside(what);
    let (Some(name), parent_rel) = (rel.file_name(), rel.parent().unwrap_or(Path::new(""))) else {
        return Err(inside("is the served directory itself, not a file".into()));
    };
    let parent = directory_beneath(&dir.fd, parent_rel).map_err(|e| {
        inside(match e.raw_os_error() {
            Some(libc::ENOENT) => format!(
                "its directory {} does not exist",
                dir.path.join(parent_rel).display()
            ),
            Some(libc::ELOOP) | Some(libc::EXDEV) | Some(libc::ENOTDIR) => {
                "its directory is reached through a symbolic link or a file".into()
            }
            _ => e.to_string(),
        })
    })?;
    let (fd, created) = match openat(&parent, name, libc::O_PATH, 0) {
        Ok(fd) => (fd, false),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
            match openat(&parent, name, flags, 0o644) {
                Ok(fd) => (fd, true),
                Err(e) => return Err(inside(format!("cannot create it: {e}"))),
            }
        }
        Err(e) => return Err(inside(e.to_string())),
    };
    let st = fstat(&fd).map_err(|e| inside(e.to_string()))?;
    match kind(&st) {
        libc::S_IFREG if st.st_nlink > 1 && !created => Err(inside(
            "has other hard links: a job uses only files of its own".into(),
        )),
        libc::S_IFREG => Ok(Opened {
            path: path.to_path_buf(),
            fd,
            created,
            parent: Some((parent, name.to_os_string())),
        }),
        libc::S_IFLNK => Err(inside("is a symbolic link".into())),
        libc::S_IFDIR => Err(inside("is a directory, not a file".into())),
        _ => Err(inside(
            "is not a regular file (devices are those of --allow-device)".into(),
        )),
    }
}

/// A block device jobs may use: the name it was allowed under, where that led when the
/// service started, and which device it is.
#[derive(Clone, Debug)]
pub struct AllowedDevice {
    pub given: PathBuf,
    pub real: PathBuf,
    pub rdev: u64,
}

impl AllowedDevice {
    pub fn new(given: &Path) -> Result<AllowedDevice, String> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let shown = given.display();
        let real = given.canonicalize().map_err(|e| format!("{shown}: {e}"))?;
        let meta = std::fs::metadata(&real).map_err(|e| format!("{shown}: {e}"))?;
        if !meta.file_type().is_block_device() {
            return Err(format!("{shown}: not a block device"));
        }
        Ok(AllowedDevice {
            given: given.to_path_buf(),
            real,
            rdev: meta.rdev(),
        })
    }

    /// Whether a job names this device.
    pub fn named(&self, path: &Path) -> bool {
        path == self.given || path == self.real
    }

    /// Opens the device as it was when the service started: the same path without a
    /// symbolic link, and the same device number.
    pub fn open(&self, path: &Path) -> Result<Opened, Refusal> {
        let inside = |what: String| Refusal::Inside(what);
        let c = cstr(&self.real).map_err(|e| inside(e.to_string()))?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        let fd = fd_or_err(fd as libc::c_long).map_err(|e| inside(e.to_string()))?;
        let st = fstat(&fd).map_err(|e| inside(e.to_string()))?;
        if kind(&st) != libc::S_IFBLK || st.st_rdev != self.rdev {
            return Err(inside(format!(
                "{} is no longer the device allowed when the service started",
                self.real.display()
            )));
        }
        Ok(Opened {
            path: path.to_path_buf(),
            fd,
            created: false,
            parent: None,
        })
    }
}

/// The path through which this process reopens `fd` as itself (not by its name).
pub fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("loadgen-confine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    #[test]
    fn where_a_path_lies_is_read_from_its_text() {
        let d = Path::new("/srv/jobs");
        let b = |p: &str| beneath(d, Path::new(p));
        assert_eq!(b("/srv/jobs/a/b"), Some(PathBuf::from("a/b")));
        assert_eq!(b("/srv/jobs/a/../b"), Some(PathBuf::from("b")));
        assert_eq!(b("/srv/jobs/./a"), Some(PathBuf::from("a")));
        assert_eq!(b("/srv/jobs"), Some(PathBuf::new()));
        assert_eq!(
            b("/srv/jobs/../jobs/a"),
            None,
            "climbs out, even to come back"
        );
        assert_eq!(b("/srv/jobs/a/../../x"), None);
        assert_eq!(b("/srv/jobs2/a"), None);
        assert_eq!(b("/etc/shadow"), None);
    }

    #[test]
    fn files_are_opened_beneath_without_links() {
        let root = scratch("open");
        let served = root.join("served");
        let outside = root.join("outside");
        std::fs::create_dir_all(served.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "x").unwrap();
        std::fs::write(served.join("sub/f"), "data").unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), served.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, served.join("dirlink")).unwrap();
        std::fs::hard_link(outside.join("victim"), served.join("hard")).unwrap();
        let dir = ServedDir::open(&served).unwrap();
        let open = |rel: &str| open_file(&dir, &served.join(rel), Path::new(rel));

        let f = open("sub/f").unwrap();
        assert!(!f.created);
        assert_eq!(std::fs::read_to_string(proc_path(&f.fd)).unwrap(), "data");
        let new = open("sub/new").unwrap();
        assert!(new.created && served.join("sub/new").exists());
        new.remove_created();
        assert!(!served.join("sub/new").exists(), "taken back");

        let refused = |rel: &str| match open(rel) {
            Err(Refusal::Inside(why)) => why,
            other => panic!("{rel}: {other:?}"),
        };
        assert!(refused("link").contains("symbolic link"));
        assert!(refused("dirlink/victim").contains("symbolic link"));
        assert!(refused("dirlink/new").contains("symbolic link"));
        assert!(refused("hard").contains("hard links"));
        assert!(refused("sub").contains("directory"));
        assert!(refused("missing/f").contains("does not exist"));
        assert!(!outside.join("new").exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "x"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_walk_without_openat2_refuses_links_too() {
        let root = scratch("walk");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("a/l")).unwrap();
        let dir = ServedDir::open(&root).unwrap();
        // The fallback, called directly.
        let walk = |rel: &str| -> io::Result<OwnedFd> {
            let mut cur = dir.fd.try_clone()?;
            for c in Path::new(rel).components() {
                if let Component::Normal(n) = c {
                    cur = openat(&cur, n, libc::O_PATH | libc::O_DIRECTORY, 0)?;
                }
            }
            Ok(cur)
        };
        assert!(walk("a/b").is_ok());
        let e = walk("a/l").unwrap_err().raw_os_error();
        assert!(matches!(e, Some(libc::ELOOP | libc::ENOTDIR)), "{e:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
