//! The shared libraries a dynamically linked program loads, as `ldd` lists them: what a
//! guest's initramfs and the container image copy in beside the program.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The files `program` loads, at the paths the dynamic loader opens (none for a static
/// program). A library ldd cannot find fails: the program would not run where it is copied.
pub fn shared_libraries(program: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        bail!("ldd {} failed", program.display());
    }
    paths(&text).with_context(|| format!("ldd {}", program.display()))
}

/// The absolute paths in `ldd` output: `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
/// (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`; the vDSO has no file.
fn paths(ldd: &str) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for l in ldd.lines().map(str::trim) {
        let path = match l.split_once("=>") {
            Some((lib, right)) if right.trim() == "not found" => {
                bail!("{} not found", lib.trim())
            }
            Some((_, right)) => right.trim(),
            None => l,
        };
        if let Some(p) = path
            .split_whitespace()
            .next()
            .filter(|p| p.starts_with('/'))
        {
            paths.push(PathBuf::from(p));
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_the_files_the_loader_opens() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ff1afa5a000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007ff1afa28000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007ff1af01e000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007ff1afa5c000)
";
        assert_eq!(
            paths(ldd).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
        let missing = format!("{ldd}\tlibmissing.so.1 => not found\n");
        assert!(paths(&missing).is_err());
    }
}
