//! systemd's notify protocol (`Type=notify`, `WatchdogSec=`): datagrams such as `READY=1`
//! and `WATCHDOG=1` to the socket named in `NOTIFY_SOCKET`. Without that variable (not run
//! by systemd) every call does nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Sends one notification (`READY=1`, `STOPPING=1`, `STATUS=…`, `WATCHDOG=1`). Returns
/// whether there was a socket to send to.
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let path = path.to_string_lossy();
    let addr = match path.strip_prefix('@') {
        // A leading '@' names a socket in the abstract namespace.
        Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name.as_bytes())?,
        None => SocketAddr::from_pathname(path.as_ref())?,
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

/// How often to send `WATCHDOG=1`: half the period systemd set in `WATCHDOG_USEC`, if the
/// watchdog is on for this process (`WATCHDOG_PID` unset or equal to our pid).
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_notify_socket_nothing_is_sent() {
        // SAFETY: this test module is the only user of NOTIFY_SOCKET in the unit tests.
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        assert!(!notify("READY=1").unwrap());
    }
}
