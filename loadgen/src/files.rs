//! Reading the files a user names (job files, token files, run records): a
//! regular file or a pipe, never more than a limit, so that `/dev/zero` or a huge file by
//! mistake is a one-line error rather than a run until the memory runs out.

use std::path::Path;

pub use record::files::{read_capped, read_text};
use replica::protocol::MAX_TOKEN_LEN;

/// The most a job file may hold.
pub const MAX_JOB_FILE: u64 = 1 << 20;
/// The most a token file may hold (a token is at most 256 bytes).
pub const MAX_TOKEN_FILE: u64 = 4096;

/// A token file's content without surrounding whitespace: 1 to `MAX_TOKEN_LEN` bytes.
pub fn read_token(path: &Path) -> Result<Vec<u8>, String> {
    let raw = read_capped(path, MAX_TOKEN_FILE)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let token = raw.trim_ascii();
    if token.is_empty() {
        return Err(format!(
            "--token-file {}: the file is empty",
            path.display()
        ));
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(format!(
            "--token-file {}: the token is {} bytes, more than {MAX_TOKEN_LEN}",
            path.display(),
            token.len()
        ));
    }
    Ok(token.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files() {
        let dir = std::env::temp_dir().join(format!("loadgen-token-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t");
        std::fs::write(&p, "  s3cret\n").unwrap();
        assert_eq!(read_token(&p), Ok(b"s3cret".to_vec()));
        std::fs::write(&p, "\n").unwrap();
        assert!(read_token(&p).unwrap_err().contains("empty"));
        std::fs::write(&p, vec![b'x'; 300]).unwrap();
        assert!(read_token(&p).unwrap_err().contains("more than 256"));
        std::fs::write(&p, vec![b'x'; 5000]).unwrap();
        assert!(read_token(&p).unwrap_err().contains("more than the 4096"));
        let e = read_token(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("character device"), "{e}");
        assert!(read_token(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
