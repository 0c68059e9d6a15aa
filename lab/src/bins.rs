//! Locating stornet's release binaries for tests (`cargo xtask test` builds them first).

use std::path::PathBuf;

/// `$STORNET_BIN_DIR/<name>`, by default `<workspace>/target/release/<name>`.
pub fn path(name: &str) -> PathBuf {
    let dir = std::env::var_os("STORNET_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
                .join("release")
        });
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{} is missing: build it with `cargo build --release --bins` (cargo xtask test does)",
        p.display()
    );
    p
}
