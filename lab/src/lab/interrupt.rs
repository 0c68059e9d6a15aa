//! Ctrl-C and SIGTERM for programs that run the lab (the demo): the signal only sets a
//! flag; the lab's waits see it, stop their child processes, and return an error, so the
//! program unwinds normally and every guard removes what it created. A second signal of the
//! same kind ends the program at once (the handler resets itself).

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a plain handler that only stores to an atomic;
        // handlers are reset to the default in children at exec.
        let ok = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0
        };
        if !ok {
            bail!(
                "installing a handler for signal {sig}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived (after [`install`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// An error when interrupted, for `?` in loops that wait.
pub fn check() -> Result<()> {
    if interrupted() {
        bail!("interrupted; removing the lab");
    }
    Ok(())
}
