//! What the tests that run loadgen and fio (the reference) on the same job share: a
//! scratch directory, the two tools, their JSON reports, and a small file system of the
//! test's own to fill.

#![allow(dead_code, reason = "each test target uses a part of it")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A fresh directory for one test, under cargo's temporary directory.
pub fn scratch(target: &str, name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{target}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tool {
    Loadgen,
    Fio,
}

pub const BOTH: [Tool; 2] = [Tool::Loadgen, Tool::Fio];

impl Tool {
    /// `loadgen run` or `fio`, with nothing else yet.
    pub fn command(self) -> Command {
        match self {
            Tool::Loadgen => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_loadgen"));
                c.arg("run");
                c
            }
            Tool::Fio => Command::new("fio"),
        }
    }

    /// Runs `c` (from [`Tool::command`], with `--output-format=json`) in `dir`: its exit
    /// status, JSON (when it wrote one) and stderr.
    pub fn outcome(self, mut c: Command, dir: &Path) -> (Option<i32>, Option<Value>, String) {
        let o = c
            .current_dir(dir)
            .output()
            .expect("runs (cargo xtask setup installs fio)");
        (
            o.status.code(),
            self.json(&o),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// The JSON report on stdout. fio may print a line before it ("fio: terminating on
    /// signal 15" when `exit_what=all` ends its jobs, a warning); loadgen's stdout must be
    /// JSON alone.
    pub fn json(self, o: &Output) -> Option<Value> {
        let at = match self {
            Tool::Loadgen => 0,
            Tool::Fio => o.stdout.iter().position(|&b| b == b'{').unwrap_or(0),
        };
        serde_json::from_slice(&o.stdout[at..]).ok()
    }
}

/// A tmpfs of a few MiB mounted on a fresh directory, unmounted (lazily) and removed when
/// dropped, however the test ends.
pub struct SmallFs {
    pub dir: PathBuf,
}

impl SmallFs {
    /// None (after saying why) when not root and CI is unset; with CI set, not being root
    /// fails the test.
    pub fn mount(target: &str, name: &str, size: &str) -> Option<SmallFs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var_os("CI").is_none(),
                "mounting a tmpfs needs root, and CI is set"
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        let dir = scratch(target, name).join("fs");
        std::fs::create_dir_all(&dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            o.status.success(),
            "mount: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Some(SmallFs { dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(self.dir.parent().unwrap());
    }
}
