//! The network namespaces stornet reads statistics in: its own ("host") and those listed in
//! the configuration, by name under /run/netns or as `pid:N`. Work in another namespace runs
//! on a short-lived thread that enters it with setns(2), so the agent's threads never move.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// The label of the agent's own network namespace.
pub const HOST: &str = "host";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespace {
    /// The agent's own namespace.
    Host,
    /// `/run/netns/<name>` (as `ip netns add` creates).
    Named(String),
    /// The namespace of a process (`/proc/<pid>/ns/net`), e.g. a container's.
    Pid(u32),
}

impl Namespace {
    /// Parses a configuration entry: `NAME` or `pid:N`.
    pub fn parse(s: &str) -> Result<Namespace> {
        if let Some(pid) = s.strip_prefix("pid:") {
            return match pid.parse::<u32>() {
                Ok(p) if p > 0 => Ok(Namespace::Pid(p)),
                _ => bail!("network namespace {s:?}: `pid:` needs a process id"),
            };
        }
        if s.is_empty() || s == "." || s == ".." || s.contains('/') || s.contains('\0') {
            bail!("network namespace {s:?} is not a name under /run/netns nor pid:N");
        }
        if s == HOST {
            bail!("network namespace name {HOST:?} is the agent's own; it is always read");
        }
        Ok(Namespace::Named(s.to_string()))
    }

    /// The `namespace` label value.
    pub fn label(&self) -> String {
        match self {
            Namespace::Host => HOST.into(),
            Namespace::Named(n) => n.clone(),
            Namespace::Pid(p) => format!("pid:{p}"),
        }
    }

    fn path(&self) -> PathBuf {
        match self {
            Namespace::Host => "/proc/self/ns/net".into(),
            Namespace::Named(n) => PathBuf::from("/run/netns").join(n),
            Namespace::Pid(p) => format!("/proc/{p}/ns/net").into(),
        }
    }

    /// Opens the namespace; also returns its identity (device, inode), the same for two
    /// entries that name one namespace.
    pub fn open(&self) -> Result<(File, (u64, u64))> {
        let path = self.path();
        let f = File::open(&path)
            .with_context(|| format!("network namespace {}: {}", self.label(), path.display()))?;
        let m = f.metadata()?;
        Ok((f, (m.dev(), m.ino())))
    }
}

/// Runs `f` inside the namespace `ns` (a file from `Namespace::open`). The host namespace runs
/// on the calling thread; any other on a dedicated thread that ends with `f`.
pub fn run_in<T: Send>(
    ns: &Namespace,
    file: &File,
    f: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    if *ns == Namespace::Host {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns(2) on an open namespace file; it moves only this thread, which
            // ends when `f` returns.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("entering network namespace {}", ns.label()));
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| bail!("reading network namespace {} panicked", ns.label()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_config_entries() {
        assert_eq!(
            Namespace::parse("stor1").unwrap(),
            Namespace::Named("stor1".into())
        );
        assert_eq!(Namespace::parse("pid:42").unwrap(), Namespace::Pid(42));
        assert_eq!(Namespace::parse("pid:42").unwrap().label(), "pid:42");
        for bad in ["", "pid:", "pid:0", "pid:x", "../x", "a/b", "host", ".."] {
            assert!(Namespace::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn host_namespace_has_an_identity() {
        let (_, id) = Namespace::Host.open().unwrap();
        let (_, again) = Namespace::Host.open().unwrap();
        assert_eq!(id, again);
    }
}
