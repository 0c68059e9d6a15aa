//! Re-reads the web config when it or a file it names (certificate, key, client CA) changes,
//! so certificates rotate without a restart, as exporter-toolkit exporters do. Checked at each
//! new connection (a few `stat` calls). It fails closed: a file that is invalid or unreadable
//! at re-read, or that would give up any protection the config in force has (TLS, client
//! certificates, basic auth; what an empty or cut-short file does), keeps the last good
//! config in force and is logged once, until it changes again. A connection never waits on
//! a re-read another one is doing: it is served with the config in force.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tracing::{info, warn};

use super::config::WebConfig;

/// What identifies one version of a file: (modified, length, inode), `None` when unreadable.
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &PathBuf) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

struct State {
    config: Arc<WebConfig>,
    /// The stamps of the files the config in force was built from, or of the last attempt
    /// that failed (so a bad file is reported once, not at every connection).
    stamps: Vec<Stamp>,
}

/// The web config in force; without a file it is the plain default and never changes.
pub struct WebConfigSource {
    path: Option<PathBuf>,
    state: Mutex<State>,
    /// Held while a new version is read (reading may hash a bcrypt dummy for a while).
    reading: tokio::sync::Mutex<()>,
}

impl WebConfigSource {
    /// `config` was loaded from `path` just now.
    pub fn new(path: Option<PathBuf>, config: WebConfig) -> WebConfigSource {
        let stamps = config.files.iter().map(stamp).collect();
        WebConfigSource {
            path,
            state: Mutex::new(State {
                config: Arc::new(config),
                stamps,
            }),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a file changed since the config in force (or the last failed attempt).
    fn changed(&self) -> Option<Vec<PathBuf>> {
        self.path.as_ref()?;
        let s = self.lock();
        let files = s.config.files.clone();
        let now: Vec<Stamp> = files.iter().map(stamp).collect();
        (now != s.stamps).then_some(files)
    }

    /// The config to serve a new connection with, re-read first if a file changed.
    pub async fn current(self: &Arc<Self>) -> Arc<WebConfig> {
        if self.changed().is_some()
            && let Ok(_reading) = self.reading.try_lock()
        {
            // Another connection may have read it just before.
            if let Some(files) = self.changed() {
                let me = self.clone();
                let _ = tokio::task::spawn_blocking(move || me.reload(&files)).await;
            }
        }
        self.lock().config.clone()
    }

    /// Reads the file again; keeps the config in force when the new one is invalid.
    fn reload(&self, old_files: &[PathBuf]) {
        let Some(path) = &self.path else { return };
        let before = self.lock().config.protection;
        let loaded = WebConfig::load(path).and_then(|c| match c.protection.dropped_from(&before) {
            Some(what) => Err(format!(
                "web config file {}: it turns {what} off (empty, cut short, or changed on purpose: turning protection off takes a restart)",
                path.display()
            )),
            None => Ok(c),
        });
        match loaded {
            Ok(config) => {
                let stamps = config.files.iter().map(stamp).collect();
                info!(file = %path.display(), "web config read again: in force");
                *self.lock() = State {
                    config: Arc::new(config),
                    stamps,
                };
            }
            Err(e) => {
                warn!(error = %e, "web config not reloaded: the last good one stays in force");
                // Remembered as seen, so the error is logged again only after a new change.
                self.lock().stamps = old_files.iter().map(stamp).collect();
            }
        }
    }
}
