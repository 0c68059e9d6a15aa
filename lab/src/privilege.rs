//! Privileged tests run as root. Without root they skip with a message, except under CI
//! (`CI` set), where skipping would hide a broken test: there they fail.

/// Returns true when the test may go on; false when it should return early (skipped).
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: needs root, and CI is set, so it fails instead of skipping");
    }
    eprintln!("SKIPPED {test}: needs root (run as root, or set CI to make this a failure)");
    false
}

/// Fails (under CI) or skips when a needed tool is missing.
pub fn require_tool(test: &str, tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    if found {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: needs `{tool}`, which is missing, and CI is set (cargo xtask setup installs it)"
        );
    }
    eprintln!("SKIPPED {test}: needs `{tool}` (cargo xtask setup installs it)");
    false
}
