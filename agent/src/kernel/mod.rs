//! Facts about the running kernel and its BPF interface, which decide what the probes can
//! do and what they cost: here its version (for the few layout facts BTF cannot carry) and
//! its lockdown mode; the type layouts and enums of its BTF (`btf`), its code addresses'
//! function names (`kallsyms`), whole-map reads in a few system calls (`map_batch`) and a
//! loaded program's statistics (`prog_info`).

pub mod btf;
pub mod kallsyms;
pub mod map_batch;
pub mod prog_info;

use std::path::Path;

/// `(major, minor)` of a kernel release string such as `6.1.0-18-amd64`.
pub fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The running kernel's release string (`uname -r`).
pub fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The running kernel's `(major, minor)`, if its release string can be read.
pub fn version() -> Option<(u32, u32)> {
    parse_version(&release())
}

/// The kernel lockdown mode (`security/lockdown`): what the kernel refuses to root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lockdown {
    None,
    /// Integrity: no unsigned code or writes to kernel memory; BPF may still read it.
    Integrity,
    /// Confidentiality: also no reads of kernel memory by BPF helpers
    /// (`bpf_probe_read_kernel`); typed (BTF) loads from tracepoint arguments still work.
    Confidentiality,
    /// The kernel has no lockdown LSM, or securityfs is not mounted.
    Unknown,
}

impl Lockdown {
    pub fn as_str(self) -> &'static str {
        match self {
            Lockdown::None => "none",
            Lockdown::Integrity => "integrity",
            Lockdown::Confidentiality => "confidentiality",
            Lockdown::Unknown => "unknown",
        }
    }

    /// Parses the file's content, e.g. `none [integrity] confidentiality`: the mode in
    /// brackets is the active one.
    pub fn parse(content: &str) -> Lockdown {
        let active = content
            .split_whitespace()
            .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
        match active {
            Some("none") => Lockdown::None,
            Some("integrity") => Lockdown::Integrity,
            Some("confidentiality") => Lockdown::Confidentiality,
            _ => Lockdown::Unknown,
        }
    }
}

pub const LOCKDOWN_FILE: &str = "/sys/kernel/security/lockdown";

/// The running kernel's lockdown mode (`Unknown` where securityfs is not mounted).
pub fn lockdown() -> Lockdown {
    lockdown_at(Path::new(LOCKDOWN_FILE))
}

pub fn lockdown_at(path: &Path) -> Lockdown {
    std::fs::read_to_string(path)
        .map(|s| Lockdown::parse(&s))
        .unwrap_or(Lockdown::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(parse_version("5.10.0-46-cloud-amd64"), Some((5, 10)));
        assert_eq!(parse_version("6.12.117+deb13-cloud-amd64"), Some((6, 12)));
        assert_eq!(parse_version("x"), None);
    }

    #[test]
    fn lockdown_modes() {
        assert_eq!(
            Lockdown::parse("[none] integrity confidentiality\n"),
            Lockdown::None
        );
        assert_eq!(
            Lockdown::parse("none [integrity] confidentiality\n"),
            Lockdown::Integrity
        );
        assert_eq!(
            Lockdown::parse("none integrity [confidentiality]\n"),
            Lockdown::Confidentiality
        );
        assert_eq!(Lockdown::parse(""), Lockdown::Unknown);
        assert_eq!(
            lockdown_at(Path::new("/nonexistent/lockdown")),
            Lockdown::Unknown
        );
    }
}
