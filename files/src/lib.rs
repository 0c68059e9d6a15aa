//! Reading the small files a user names (configuration, web config, certificates, job
//! files, tokens, run records): a regular file or a pipe, never more than a limit, so that
//! `/dev/zero` or a huge file by mistake is a one-line error rather than a hang until the
//! memory runs out.

use std::fs::{File, FileType, Metadata};
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The file's bytes, from a regular file or a pipe; `Err` is the reason, without the file
/// name.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    check(&meta, max, true)?;
    read_bounded(File::open(path).map_err(|e| e.to_string())?, max)
}

/// As [`read_capped`], for files read again while a service runs (its web config,
/// certificates and keys): a regular file only, opened without waiting, so that a FIFO
/// named there cannot hold up a reload (and every connection behind it). The type is
/// checked on the opened file, not before.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    check(&f.metadata().map_err(|e| e.to_string())?, max, false)?;
    read_bounded(f, max)
}

/// As [`read_capped`], as UTF-8 text.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    String::from_utf8(read_capped(path, max)?).map_err(|_| "is not UTF-8 text".to_string())
}

/// Refuses what is not a regular file (or, with `pipes`, a pipe) and a regular file larger
/// than `max`.
fn check(meta: &Metadata, max: u64, pipes: bool) -> Result<(), String> {
    if let Some(what) = not_a_file(meta.file_type(), pipes) {
        return Err(what.into());
    }
    if meta.is_file() && meta.len() > max {
        return Err(format!(
            "is {} bytes, more than the {max} allowed",
            meta.len()
        ));
    }
    Ok(())
}

fn not_a_file(t: FileType, pipes: bool) -> Option<&'static str> {
    if t.is_dir() {
        Some("is a directory, not a file")
    } else if t.is_char_device() {
        Some("is a character device, not a file")
    } else if t.is_block_device() {
        Some("is a block device, not a file")
    } else if t.is_socket() {
        Some("is a socket, not a file")
    } else if t.is_fifo() && !pipes {
        Some("is a FIFO, not a regular file")
    } else {
        None
    }
}

/// At most `max` bytes of `f`: one more is read to tell a file that grew past the limit.
fn read_bounded(f: File, max: u64) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() as u64 > max {
        return Err(format!("holds more than the {max} bytes allowed"));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_big_files_are_refused() {
        let e = read_capped(Path::new("/dev/zero"), 1024).unwrap_err();
        assert_eq!(e, "is a character device, not a file");
        let e = read_capped(Path::new("/"), 1024).unwrap_err();
        assert_eq!(e, "is a directory, not a file");
        let dir = std::env::temp_dir().join(format!("stornet-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("big");
        std::fs::write(&f, vec![b'x'; 2000]).unwrap();
        assert!(read_capped(&f, 1000).unwrap_err().contains("2000 bytes"));
        assert!(read_regular(&f, 1000).unwrap_err().contains("2000 bytes"));
        assert_eq!(read_capped(&f, 2000).unwrap().len(), 2000);
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert_eq!(read_text(&f, 10).unwrap_err(), "is not UTF-8 text");
        assert!(read_capped(&dir.join("missing"), 10).is_err());
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_regular(&fifo, 10).unwrap_err(),
            "is a FIFO, not a regular file",
            "refused at once, not waited on"
        );
        assert!(read_regular(Path::new("/dev/zero"), 10).is_err());
        assert_eq!(read_regular(&f, 10).unwrap(), [0xff, 0xfe]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pipe_is_read_where_pipes_are_allowed() {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe() writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fds[1] is the pipe's write end, open and owned here.
        let mut w = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
        std::io::Write::write_all(&mut w, b"rw=read\n").unwrap();
        drop(w);
        let path = format!("/proc/self/fd/{}", fds[0]);
        assert_eq!(read_text(Path::new(&path), 100).unwrap(), "rw=read\n");
        // SAFETY: fds[0] is the pipe's read end, open and owned here.
        unsafe { libc::close(fds[0]) };
    }
}
