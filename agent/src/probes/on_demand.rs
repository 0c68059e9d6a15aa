//! Probes attached only while something needs them (`Attach::OnDemand`): loaded and checked
//! at start with the others, then attached and detached by the collector that knows when
//! their work is needed, so that a hook nobody needs costs its events nothing.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

/// A loaded program and, while it is attached, its link.
pub struct OnDemand {
    pub name: &'static str,
    program: OwnedFd,
    link: Option<OwnedFd>,
    /// Whether it is attached now, shared with the status collector.
    attached: Arc<AtomicBool>,
}

impl OnDemand {
    /// Takes a copy of the loaded program's fd, and attaches and detaches it once, so that a
    /// probe reported up can attach.
    pub(super) fn new(name: &'static str, program: BorrowedFd<'_>) -> Result<OnDemand> {
        let mut p = OnDemand {
            name,
            program: program
                .try_clone_to_owned()
                .context("copying the program's fd")?,
            link: None,
            attached: Arc::default(),
        };
        p.set(true)?;
        p.set(false)?;
        Ok(p)
    }

    pub fn attached(&self) -> bool {
        self.link.is_some()
    }

    pub(super) fn flag(&self) -> Arc<AtomicBool> {
        self.attached.clone()
    }

    /// Attaches or detaches the program; true when that changed anything.
    pub fn set(&mut self, on: bool) -> Result<bool> {
        let changed = match (on, &self.link) {
            (true, None) => {
                self.link = Some(
                    raw_tracepoint_open(self.program.as_fd())
                        .with_context(|| format!("attaching {}", self.name))?,
                );
                true
            }
            (false, Some(_)) => {
                // Closing the link's last fd detaches the program.
                self.link = None;
                true
            }
            _ => false,
        };
        self.attached.store(self.link.is_some(), Ordering::Relaxed);
        Ok(changed)
    }
}

/// `union bpf_attr` as `BPF_RAW_TRACEPOINT_OPEN` reads it.
#[repr(C)]
struct RawTracepointOpenAttr {
    /// No name: a `tp_btf` program carries its tracepoint from load.
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;

/// Attaches a loaded `tp_btf` program to its tracepoint; the program stays attached while
/// the returned link fd is open (what aya's `BtfTracePoint::attach` does, without an `&mut`
/// of the whole object).
fn raw_tracepoint_open(program: BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    let attr = RawTracepointOpenAttr {
        name: 0,
        prog_fd: program.as_raw_fd() as u32,
        _pad: 0,
    };
    // SAFETY: attr is a valid bpf_attr prefix of the size passed, with no pointers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_RAW_TRACEPOINT_OPEN,
            &attr as *const RawTracepointOpenAttr,
            std::mem::size_of::<RawTracepointOpenAttr>() as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
