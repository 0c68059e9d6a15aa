//! fio's options for what a job does when an IO fails: `continue_on_error`, `ignore_error`,
//! `error_dump` and `verify_fatal`.
//!
//! As fio's: an error is of one of three kinds, read, write (trims count as writes) or verify
//! (EILSEQ, a corrupt block), and it is non-fatal when `continue_on_error` names its kind and
//! its errno is in that kind's `ignore_error` list (fio's default list: EIO and EILSEQ). A
//! non-fatal error is counted (`total_err`, `first_error`) and the job goes on.

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bool};

/// The kinds of error, in fio's order (`ignore_error=READ,WRITE,VERIFY`).
pub const READ: usize = 0;
pub const WRITE: usize = 1;
pub const VERIFY: usize = 2;

/// fio's list when `ignore_error` gives none for a kind.
const DEFAULT_NON_FATAL: [i32; 2] = [libc::EIO, libc::EILSEQ];

/// The errno names fio's `ignore_error` takes (errno 1 to 34, as fio's `str2error`).
const NAMES: [&str; 34] = [
    "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD",
    "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV",
    "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC",
    "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE",
];

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorOptions {
    /// `continue_on_error`: bit 0 reads, bit 1 writes, bit 2 verify (fio's error types).
    pub continue_on: u8,
    /// `ignore_error`: the non-fatal errnos of each kind (None: fio's EIO and EILSEQ).
    pub ignore: [Option<Vec<i32>>; 3],
    /// `error_dump`: each IO error is reported as it happens (fio's default 1).
    pub dump: Option<bool>,
    /// `verify_fatal`: the first corrupt block ends the job.
    pub verify_fatal: bool,
}

impl ErrorOptions {
    /// Takes one of the options; false if `key` is none of them.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        match key {
            "continue_on_error" => self.continue_on = continue_on(v)?,
            "ignore_error" => {
                let lists = ignore_lists(v)?;
                for (slot, l) in self.ignore.iter_mut().zip(lists) {
                    if l.is_some() {
                        *slot = l;
                    }
                }
            }
            "error_dump" => self.dump = Some(parse_bool(v)?),
            "verify_fatal" => self.verify_fatal = parse_bool(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether `continue_on_error` is set at all (fio then reports `total_err` and
    /// `first_error`).
    pub fn continues(&self) -> bool {
        self.continue_on != 0
    }

    /// Whether an error `errno` of `kind` lets the job go on, as fio's `td_non_fatal_error`.
    pub fn non_fatal(&self, kind: usize, errno: i32) -> bool {
        if self.continue_on & (1 << kind) == 0 {
            return false;
        }
        match &self.ignore[kind] {
            Some(list) => list.contains(&errno),
            None => DEFAULT_NON_FATAL.contains(&errno),
        }
    }
}

/// The kind of an IO error: a read's, a write's (trims too), or verify's for EILSEQ.
pub fn kind_of(write: bool, errno: i32) -> usize {
    if errno == libc::EILSEQ {
        VERIFY
    } else if write {
        WRITE
    } else {
        READ
    }
}

/// fio's `continue_on_error` values.
fn continue_on(v: &str) -> Result<u8, String> {
    Ok(match v.trim().to_ascii_lowercase().as_str() {
        "none" | "0" => 0,
        "read" => 1,
        "write" => 2,
        "io" => 3,
        "verify" => 4,
        "all" | "1" => 7,
        _ => {
            return Err(format!(
                "`{}` (use none, read, write, io, verify, all, 0 or 1)",
                excerpt(v)
            ));
        }
    })
}

/// fio's `ignore_error=READ,WRITE,VERIFY`: each a `:`-separated list of errno names or
/// numbers; an empty one leaves that kind as it is.
fn ignore_lists(v: &str) -> Result<[Option<Vec<i32>>; 3], String> {
    let parts: Vec<&str> = v.split(',').collect();
    if parts.len() > 3 {
        return Err(format!(
            "`{}` has {} comma-separated lists; fio takes at most 3 (read, write, verify)",
            excerpt(v),
            parts.len()
        ));
    }
    let mut out: [Option<Vec<i32>>; 3] = Default::default();
    for (slot, part) in out.iter_mut().zip(parts) {
        let items: Vec<&str> = part
            .split(':')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .collect();
        if items.is_empty() {
            continue;
        }
        *slot = Some(items.into_iter().map(errno).collect::<Result<_, _>>()?);
    }
    Ok(out)
}

/// An errno by name (`ENOSPC`) or number (`28`).
fn errno(x: &str) -> Result<i32, String> {
    let up = x.to_ascii_uppercase();
    if let Some(i) = NAMES.iter().position(|n| *n == up) {
        return Ok(i as i32 + 1);
    }
    match x.parse::<i32>() {
        Ok(n) if n > 0 && n < 4096 => Ok(n),
        _ => Err(format!(
            "`{}` is not an error number or a name fio knows (EPERM to ERANGE, e.g. ENOSPC)",
            excerpt(x)
        )),
    }
}

/// The name of errno `n` when fio has one, else its number.
pub fn name(n: i32) -> String {
    match usize::try_from(n - 1).ok().and_then(|i| NAMES.get(i)) {
        Some(s) => s.to_string(),
        None => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_error_takes_fios_per_kind_lists() {
        let mut e = ErrorOptions::default();
        e.set("continue_on_error", "write").unwrap();
        e.set("ignore_error", ",ENOSPC").unwrap();
        assert_eq!(e.ignore, [None, Some(vec![libc::ENOSPC]), None]);
        assert!(e.non_fatal(WRITE, libc::ENOSPC));
        assert!(
            !e.non_fatal(WRITE, libc::EIO),
            "the list replaces fio's default"
        );
        assert!(!e.non_fatal(READ, libc::EIO), "reads are not continued on");
        e.set("ignore_error", "EIO:5:enxio,,84").unwrap();
        assert_eq!(e.ignore[2], Some(vec![libc::EILSEQ]));
        assert_eq!(e.ignore[0], Some(vec![5, 5, libc::ENXIO]));
        assert_eq!(e.ignore[1], Some(vec![libc::ENOSPC]), "an empty list keeps");
        assert_eq!(name(28), "ENOSPC");
        assert_eq!(name(84), "84");
        // As fio: names past ERANGE are given as numbers.
        for bad in ["ENOPE", "EILSEQ", "0", "-3", "a,b,c,d", "E2BIG,x"] {
            assert!(e.set("ignore_error", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn continue_on_error_takes_fios_values() {
        let mut e = ErrorOptions::default();
        for (v, bits) in [
            ("none", 0),
            ("0", 0),
            ("read", 1),
            ("write", 2),
            ("io", 3),
            ("verify", 4),
            ("all", 7),
            ("1", 7),
        ] {
            e.set("continue_on_error", v).unwrap();
            assert_eq!(e.continue_on, bits, "{v}");
        }
        assert!(e.set("continue_on_error", "sometimes").is_err());
        // fio's default list when none is given: EIO and EILSEQ.
        assert!(e.non_fatal(READ, libc::EIO) && e.non_fatal(VERIFY, libc::EILSEQ));
        assert!(!e.non_fatal(READ, libc::ENOSPC));
        assert_eq!(kind_of(true, libc::EILSEQ), VERIFY);
        assert_eq!(kind_of(true, libc::ENOSPC), WRITE);
    }
}
