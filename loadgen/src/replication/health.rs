//! How the replicas fared: failures per replica, summed over every job thread's connection
//! to it, and the error a job fails with when one failed.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What went wrong with one replica, summed over every job thread's connection to it.
#[derive(Default)]
pub struct Health {
    /// Writes the replica did not acknowledge as written.
    pub failed_writes: AtomicU64,
    /// Connections to it that failed.
    pub failed_connections: AtomicU64,
    /// The first reason.
    pub cause: Mutex<Option<String>>,
}

impl Health {
    pub fn record(&self, cause: &dyn fmt::Display, writes: u64, connection_failed: bool) {
        self.failed_writes.fetch_add(writes, Ordering::Relaxed);
        if connection_failed {
            self.failed_connections.fetch_add(1, Ordering::Relaxed);
        }
        let mut c = self.cause.lock().unwrap_or_else(|e| e.into_inner());
        if c.is_none() {
            *c = Some(cause.to_string());
        }
    }

    /// Writes that failed for a cause already recorded.
    pub fn add_writes(&self, n: u64) {
        self.failed_writes.fetch_add(n, Ordering::Relaxed);
    }
}

/// The error a job thread fails with when a replica fails. It is displayed once the run has
/// stopped (every job thread has been joined by then), so its counts cover all jobs.
#[derive(Clone)]
pub struct ReplicasFailed {
    pub addrs: Arc<Vec<SocketAddr>>,
    pub health: Arc<Vec<Health>>,
}

impl fmt::Display for ReplicasFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (addr, h) in self.addrs.iter().zip(self.health.iter()) {
            let cause = h.cause.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let Some(cause) = cause else { continue };
            let writes = h.failed_writes.load(Ordering::Relaxed);
            let conns = h.failed_connections.load(Ordering::Relaxed);
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            write!(
                f,
                "replica {addr} failed: {cause}; {writes} write(s) failed"
            )?;
            if conns > 1 {
                write!(f, " on {conns} connections")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ReplicasFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ReplicasFailed {}
