//! Files a run writes at its end (`--output`, `--record`), set up at its start: a temporary
//! file beside the destination is created and a block written and synced through it, so a
//! missing, read-only or full location is refused before any IO, not after the workload.
//! At the end the content goes into the temporary file, which is renamed into place: a
//! reader never sees half a file, and an older file is replaced only by a complete one.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

/// Bytes written to check that the location takes data.
const PROBE_BYTES: usize = 4096;

pub struct OutFile {
    path: PathBuf,
    /// `None` when writing straight into a device or pipe (`/dev/null`, `/dev/stdout`).
    tmp: Option<PathBuf>,
    file: Option<File>,
}

impl OutFile {
    /// Opens the temporary file for `path`; `Err` is one line naming the file and the reason.
    pub fn create(path: &Path) -> Result<OutFile, String> {
        let shown = path.display();
        if path.is_dir() {
            return Err(format!("{shown} is a directory"));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(format!(
                "{shown}: directory {} does not exist",
                dir.display()
            ));
        }
        if let Ok(m) = std::fs::metadata(path)
            && !m.is_file()
        {
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            if !(t.is_char_device() || t.is_fifo()) {
                return Err(format!("{shown} exists and is not a regular file"));
            }
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| format!("cannot write {shown}: {e}"))?;
            return Ok(OutFile {
                path: path.to_path_buf(),
                tmp: None,
                file: Some(file),
            });
        }
        let name = path
            .file_name()
            .map_or("out".into(), |n| n.to_string_lossy().into_owned());
        let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
        let mut out = OutFile {
            path: path.to_path_buf(),
            tmp: Some(tmp.clone()),
            file: None,
        };
        let probe = || -> std::io::Result<File> {
            let mut f = File::create(&tmp)?;
            f.write_all(&[0u8; PROBE_BYTES])?;
            f.sync_all()?;
            f.set_len(0)?;
            f.rewind()?;
            Ok(f)
        };
        match probe() {
            Ok(f) => {
                out.file = Some(f);
                Ok(out)
            }
            Err(e) => Err(format!("cannot write {shown}: {e}")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends to the content (interim reports before the final one).
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), String> {
        let f = self
            .file
            .as_mut()
            .ok_or_else(|| format!("cannot write {}: not open", self.path.display()))?;
        f.write_all(bytes)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    /// Writes the content through `fill`, syncs, and renames the file into place.
    pub fn commit(
        mut self,
        fill: impl FnOnce(&mut std::io::BufWriter<&File>) -> std::io::Result<()>,
    ) -> Result<(), String> {
        let Some(f) = self.file.take() else {
            return Err(format!("cannot write {}: not open", self.path.display()));
        };
        let result = (|| {
            let mut w = std::io::BufWriter::new(&f);
            fill(&mut w)?;
            w.flush()?;
            drop(w);
            match &self.tmp {
                Some(tmp) => {
                    f.sync_all()?;
                    std::fs::rename(tmp, &self.path)
                }
                None => Ok(()),
            }
        })();
        result.map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        // Not committed (or the commit failed): leave nothing behind.
        if let Some(tmp) = &self.tmp
            && tmp.exists()
        {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_at_creation_written_at_commit() {
        let dir = std::env::temp_dir().join(format!("loadgen-outfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        std::fs::write(&path, "old").unwrap();
        let out = OutFile::create(&path).unwrap();
        // The old file stays until the new one is complete.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        out.commit(|w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        // Dropped without commit: no temporary file left.
        drop(OutFile::create(&path).unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let e = OutFile::create(&dir.join("missing/x.json")).err().unwrap();
        assert!(e.contains("does not exist"), "{e}");
        let e = OutFile::create(&dir).err().unwrap();
        assert!(e.contains("is a directory"), "{e}");
        // Straight into a device: nothing to rename.
        OutFile::create(Path::new("/dev/null"))
            .unwrap()
            .commit(|w| w.write_all(b"gone"))
            .unwrap();
        let e = OutFile::create(Path::new("/proc/x.json")).err().unwrap();
        assert!(e.starts_with("cannot write /proc/x.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
