//! A guest's root file system as an initramfs: files gathered from the host (programs with
//! the shared libraries `ldd` names for them), written as one `newc` cpio archive, which the
//! kernel unpacks into its root tmpfs before it runs `/init`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

enum Entry {
    Dir(u32),
    File { data: Data, mode: u32 },
    Symlink(String),
}

enum Data {
    Bytes(Vec<u8>),
    Host(PathBuf),
}

/// Files by their path in the guest (absolute, `/`-separated).
#[derive(Default)]
pub struct Root {
    entries: BTreeMap<String, Entry>,
}

impl Root {
    fn parents(&mut self, path: &str) {
        let mut at = 0;
        while let Some(i) = path[at + 1..].find('/') {
            at += 1 + i;
            self.entries
                .entry(path[..at].to_string())
                .or_insert(Entry::Dir(0o755));
        }
    }

    pub fn dir(&mut self, path: &str) {
        self.parents(path);
        self.entries.insert(path.to_string(), Entry::Dir(0o755));
    }

    pub fn bytes(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        self.parents(path);
        let data = Data::Bytes(data.into());
        self.entries
            .insert(path.to_string(), Entry::File { data, mode });
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.parents(path);
        self.entries
            .insert(path.to_string(), Entry::Symlink(target.to_string()));
    }

    /// A host file at `path` in the guest (read when the archive is written).
    pub fn host_file(&mut self, path: &str, host: &Path, mode: u32) {
        self.parents(path);
        let data = Data::Host(host.to_path_buf());
        self.entries
            .insert(path.to_string(), Entry::File { data, mode });
    }

    /// A host program at `path` in the guest, with the shared libraries it needs at the
    /// paths the dynamic loader looks for them.
    pub fn program(&mut self, path: &str, host: &Path) -> Result<()> {
        self.host_file(path, host, 0o755);
        for lib in crate::ldd::shared_libraries(host)? {
            let guest = lib.to_string_lossy().into_owned();
            if !self.entries.contains_key(&guest) {
                let real = std::fs::canonicalize(&lib)?;
                self.host_file(&guest, &real, 0o755);
            }
        }
        Ok(())
    }

    /// A host directory tree under `prefix` in the guest (`""` for the root): directories
    /// with their modes, files and symlinks. Device nodes, fifos and sockets are left out
    /// (the guest's devtmpfs has the devices).
    pub fn tree(&mut self, host: &Path, prefix: &str) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let mut dirs = vec![(host.to_path_buf(), prefix.to_string())];
        while let Some((dir, guest)) = dirs.pop() {
            let entries =
                std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
            for e in entries {
                let e = e?;
                let path = e.path();
                let meta = std::fs::symlink_metadata(&path)?;
                let at = format!("{guest}/{}", e.file_name().to_string_lossy());
                let mode = meta.permissions().mode() & 0o7777;
                if meta.is_dir() {
                    self.parents(&at);
                    self.entries.insert(at.clone(), Entry::Dir(mode));
                    dirs.push((path, at));
                } else if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path)?;
                    self.symlink(&at, &target.to_string_lossy());
                } else if meta.is_file() {
                    self.host_file(&at, &path, mode);
                }
            }
        }
        Ok(())
    }

    /// Writes the archive; returns its size in bytes.
    pub fn write(&self, out: &Path) -> Result<u64> {
        let file = std::fs::File::create(out).with_context(|| format!("{}", out.display()))?;
        let mut w = Cpio {
            out: std::io::BufWriter::new(file),
            written: 0,
            ino: 1,
        };
        for (path, entry) in &self.entries {
            let name = path.trim_start_matches('/');
            match entry {
                Entry::Dir(mode) => w.entry(name, 0o040000 | mode, &[])?,
                Entry::Symlink(t) => w.entry(name, 0o120777, t.as_bytes())?,
                Entry::File { data, mode } => {
                    let bytes = match data {
                        Data::Bytes(b) => std::borrow::Cow::Borrowed(b.as_slice()),
                        Data::Host(p) => std::borrow::Cow::Owned(
                            std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
                        ),
                    };
                    w.entry(name, 0o100000 | mode, &bytes)?
                }
            }
        }
        w.entry("TRAILER!!!", 0, &[])?;
        w.out.flush()?;
        Ok(w.written)
    }
}

/// A writer of the `newc` format (the kernel's initramfs format; see
/// Documentation/driver-api/early-userspace/buffer-format.rst).
struct Cpio<W: Write> {
    out: W,
    written: u64,
    ino: u32,
}

impl<W: Write> Cpio<W> {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> Result<()> {
        let n = (4 - self.written % 4) % 4;
        self.put(&[0u8; 3][..n as usize])
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) -> Result<()> {
        let fields = [
            self.ino,
            mode,
            0,
            0,
            if mode & 0o040000 != 0 { 2 } else { 1 },
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        let mut header = String::from("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive reads back with a cpio reader: names, modes, contents and the trailer.
    #[test]
    fn newc_archive_round_trips() {
        let mut r = Root::default();
        r.bytes("/init", "#!/bin/sh\n", 0o755);
        r.symlink("/bin/sh", "busybox");
        r.bytes("/etc/stornet/x", vec![1u8, 2, 3], 0o644);
        let dir = std::env::temp_dir().join(format!("stornet-cpio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.cpio");
        let size = r.write(&path).unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(size as usize, data.len());
        assert_eq!(data.len() % 4, 0);
        // Walk the headers back.
        let mut names = Vec::new();
        let mut at = 0;
        loop {
            assert_eq!(&data[at..at + 6], b"070701", "at {at}");
            let field = |i: usize| {
                let s = std::str::from_utf8(&data[at + 6 + 8 * i..at + 14 + 8 * i]).unwrap();
                usize::from_str_radix(s, 16).unwrap()
            };
            let (mode, size, namesize) = (field(1), field(6), field(11));
            let name = std::str::from_utf8(&data[at + 110..at + 110 + namesize - 1]).unwrap();
            let data_at = (at + 110 + namesize).div_ceil(4) * 4;
            names.push((
                name.to_string(),
                mode,
                data[data_at..data_at + size].to_vec(),
            ));
            if name == "TRAILER!!!" {
                break;
            }
            at = (data_at + size).div_ceil(4) * 4;
        }
        let find = |n: &str| names.iter().find(|(x, _, _)| x == n).unwrap();
        assert_eq!(find("init").1, 0o100755);
        assert_eq!(find("init").2, b"#!/bin/sh\n");
        assert_eq!(find("bin").1, 0o040755);
        assert_eq!(find("bin/sh").1, 0o120777);
        assert_eq!(find("bin/sh").2, b"busybox");
        assert_eq!(find("etc/stornet/x").2, [1, 2, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
