//! Block device names from kernel device numbers, via `/sys/dev/block/MAJ:MIN`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use agent_common::block::dev_major_minor;

/// Resolves and caches `dev_t` → kernel name (`loop3`, `nvme0n1`). A device number can be
/// reused after a device goes away, so a cached name is checked again when asked for.
#[derive(Default)]
pub struct DeviceNames {
    cache: Mutex<HashMap<u32, String>>,
}

impl DeviceNames {
    pub fn name(&self, dev: u32) -> String {
        let (major, minor) = dev_major_minor(dev);
        let resolved = resolve(Path::new("/sys/dev/block"), major, minor);
        let mut cache = self.cache.lock().expect("device cache");
        match resolved {
            Some(n) => {
                cache.insert(dev, n.clone());
                n
            }
            // Gone since it did IO: keep the last known name, else show the numbers.
            None => cache
                .get(&dev)
                .cloned()
                .unwrap_or_else(|| format!("{major}:{minor}")),
        }
    }
}

/// Reads the name of `major:minor` under a `/sys/dev/block`-like directory.
pub fn resolve(sys_dev_block: &Path, major: u32, minor: u32) -> Option<String> {
    let link = std::fs::read_link(sys_dev_block.join(format!("{major}:{minor}"))).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_symlink_names() {
        let dir = std::env::temp_dir().join(format!("stornet-devtest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("7:3");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("../../devices/virtual/block/loop3", &link).unwrap();
        assert_eq!(resolve(&dir, 7, 3).as_deref(), Some("loop3"));
        assert_eq!(resolve(&dir, 7, 4), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
