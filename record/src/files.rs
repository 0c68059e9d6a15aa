//! Reading the files a user names (run records, and the load generator's job files and
//! tokens): a regular file or a pipe, never more than a limit, so that `/dev/zero` or a huge
//! file by mistake is a one-line error rather than a run until the memory runs out.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The file's bytes; `Err` is the reason, without the file name.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let t = meta.file_type();
    let what = if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(format!("is {what}, not a file"));
    }
    if meta.is_file() && meta.len() > max {
        return Err(format!(
            "is {} bytes, more than the {max} allowed",
            meta.len()
        ));
    }
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() as u64 > max {
        return Err(format!("holds more than the {max} bytes allowed"));
    }
    Ok(data)
}

/// As [`read_capped`], as UTF-8 text.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    String::from_utf8(read_capped(path, max)?).map_err(|_| "is not UTF-8 text".to_string())
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
        assert_eq!(read_capped(&f, 2000).unwrap().len(), 2000);
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert_eq!(read_text(&f, 10).unwrap_err(), "is not UTF-8 text");
        assert!(read_capped(&dir.join("missing"), 10).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
