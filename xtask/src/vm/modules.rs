//! Kernel modules for a guest: found in the package's module tree by name, with the modules
//! they depend on (from each module's own `.modinfo`, since the packages carry no
//! `modules.dep`), in load order, decompressed so that busybox's `insmod` can load them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The modules of one kernel: name → file, and the names built into the kernel.
pub struct ModuleTree {
    files: BTreeMap<String, PathBuf>,
    builtin: BTreeSet<String>,
}

/// `null_blk.ko.xz` → `null_blk`; dashes and underscores are the same in module names.
pub fn module_name(file: &str) -> Option<String> {
    let stem = file
        .strip_suffix(".ko")
        .or_else(|| file.strip_suffix(".ko.xz"))
        .or_else(|| file.strip_suffix(".ko.zst"))?;
    Some(stem.replace('-', "_"))
}

impl ModuleTree {
    pub fn open(modules: &Path) -> Result<ModuleTree> {
        let mut files = BTreeMap::new();
        let mut stack = vec![modules.join("kernel")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
                let p = e?.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Some(n) = p.file_name().and_then(|n| n.to_str()).and_then(module_name)
                {
                    files.insert(n, p);
                }
            }
        }
        let list = modules.join("modules.builtin");
        let builtin = std::fs::read_to_string(&list)
            .with_context(|| format!("reading {}", list.display()))?
            .lines()
            .filter_map(|l| l.rsplit('/').next().and_then(module_name))
            .collect();
        Ok(ModuleTree { files, builtin })
    }

    /// Adds a module built apart from the package (`file`, uncompressed or not), which
    /// `load_order` then loads like the others.
    pub fn add(&mut self, name: &str, file: &Path) {
        self.files
            .insert(name.replace('-', "_"), file.to_path_buf());
    }

    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&name.replace('-', "_"))
    }

    /// Whether the kernel has `name`, built in or as a module.
    pub fn has(&self, name: &str) -> bool {
        let n = name.replace('-', "_");
        self.is_builtin(&n) || self.files.contains_key(&n)
    }

    /// The modules to load for `wanted`, dependencies first, each once; built-in ones left
    /// out. Fails on a module the kernel has neither built in nor as a file.
    pub fn load_order(&self, wanted: &[&str]) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out: Vec<(String, Vec<u8>)> = Vec::new();
        for w in wanted {
            self.visit(&w.replace('-', "_"), &mut out, &mut Vec::new())?;
        }
        Ok(out)
    }

    fn visit(
        &self,
        name: &str,
        out: &mut Vec<(String, Vec<u8>)>,
        path: &mut Vec<String>,
    ) -> Result<()> {
        if self.is_builtin(name) || out.iter().any(|(n, _)| n == name) {
            return Ok(());
        }
        if path.iter().any(|p| p == name) {
            bail!("module dependency cycle: {} -> {name}", path.join(" -> "));
        }
        let file = self
            .files
            .get(name)
            .with_context(|| format!("this kernel has no module {name}"))?;
        let bytes = read_module(file)?;
        path.push(name.to_string());
        for dep in depends(&bytes) {
            self.visit(&dep, out, path)?;
        }
        path.pop();
        out.push((name.to_string(), bytes));
        Ok(())
    }
}

/// A module file's bytes, decompressed (`.ko.xz` with xz, `.ko.zst` with zstd).
fn read_module(file: &Path) -> Result<Vec<u8>> {
    let name = file.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        "xz"
    } else if name.ends_with(".zst") {
        "zstd"
    } else {
        return std::fs::read(file).with_context(|| format!("reading {name}"));
    };
    let out = Command::new(tool)
        .args(["-dc"])
        .arg(file)
        .output()
        .with_context(|| format!("running {tool} (cargo xtask setup installs it)"))?;
    if !out.status.success() {
        bail!("{tool} -dc {name} failed");
    }
    Ok(out.stdout)
}

/// The `depends=` entry of a module's `.modinfo` strings (NUL-separated `key=value`).
pub fn depends(module: &[u8]) -> Vec<String> {
    let key = b"depends=";
    let mut i = 0;
    while let Some(pos) = find(&module[i..], key) {
        let at = i + pos;
        // A key starts a string: at the file start or after a NUL.
        if at == 0 || module[at - 1] == 0 {
            let start = at + key.len();
            let end = module[start..]
                .iter()
                .position(|&b| b == 0)
                .map_or(module.len(), |e| start + e);
            return String::from_utf8_lossy(&module[start..end])
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.replace('-', "_"))
                .collect();
        }
        i = at + 1;
    }
    Vec::new()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_module_files() {
        assert_eq!(module_name("null_blk.ko").as_deref(), Some("null_blk"));
        assert_eq!(module_name("sch_tbf.ko.xz").as_deref(), Some("sch_tbf"));
        assert_eq!(
            module_name("virtio-pci-modern-dev.ko.zst").as_deref(),
            Some("virtio_pci_modern_dev")
        );
        assert_eq!(module_name("modules.order"), None);
    }

    #[test]
    fn depends_from_modinfo() {
        let blob =
            b"\x7fELF...\0license=GPL\0xdepends=fake\0depends=virtio_ring,virtio\0vermagic=6.1\0";
        assert_eq!(depends(blob), ["virtio_ring", "virtio"]);
        assert!(depends(b"\0depends=\0").is_empty());
        assert!(depends(b"no modinfo here").is_empty());
    }
}
