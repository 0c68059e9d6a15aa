//! fio's options for how a job's files are laid out before the run: `fallocate` and
//! `create_on_open`.

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bool};

/// fio's `fallocate`: how space is allocated for a file before the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallocate {
    /// No allocation: a file only written grows as its writes land.
    None,
    /// posix_fallocate(3).
    Posix,
    /// fallocate(2) with FALLOC_FL_KEEP_SIZE: blocks allocated, the size unchanged.
    Keep,
    /// fallocate(2); where the file system has none, nothing (fio's default).
    #[default]
    Native,
    /// ftruncate(2) to the size, nothing allocated.
    Truncate,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutOptions {
    /// `fallocate` when given (None: loadgen writes the whole file, see docs/loadgen.md).
    pub fallocate: Option<Fallocate>,
    /// `create_on_open`: the file is created empty when the job opens it, not laid out.
    pub create_on_open: bool,
}

impl LayoutOptions {
    /// Takes one of the options; false if `key` is none of them.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        match key {
            "fallocate" => {
                self.fallocate = Some(match v.trim().to_ascii_lowercase().as_str() {
                    "none" | "0" => Fallocate::None,
                    "posix" | "1" => Fallocate::Posix,
                    "keep" => Fallocate::Keep,
                    "native" => Fallocate::Native,
                    "truncate" => Fallocate::Truncate,
                    _ => {
                        return Err(format!(
                            "`{}` (use none, posix, keep, native, truncate, 0 or 1)",
                            excerpt(v)
                        ));
                    }
                })
            }
            "create_on_open" => self.create_on_open = parse_bool(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallocate_takes_fios_values() {
        let mut l = LayoutOptions::default();
        for (v, f) in [
            ("none", Fallocate::None),
            ("0", Fallocate::None),
            ("posix", Fallocate::Posix),
            ("1", Fallocate::Posix),
            ("keep", Fallocate::Keep),
            ("NATIVE", Fallocate::Native),
            ("truncate", Fallocate::Truncate),
        ] {
            l.set("fallocate", v).unwrap();
            assert_eq!(l.fallocate, Some(f), "{v}");
        }
        assert!(l.set("fallocate", "2").is_err());
        assert!(l.set("create_on_open", "maybe").is_err());
        l.set("create_on_open", "1").unwrap();
        assert!(l.create_on_open);
    }
}
