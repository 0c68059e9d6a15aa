//! fio's options for the data a job writes: `buffer_pattern`, `zero_buffers`,
//! `refill_buffers`, `scramble_buffers`, `buffer_compress_percentage`,
//! `buffer_compress_chunk`, `dedupe_percentage`, `dedupe_mode`,
//! `dedupe_working_set_percentage` and `dedupe_global`. With them storage that compresses or
//! deduplicates sees the ratios asked for.

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bool, parse_bytes};

/// fio's default `buffer_compress_chunk`.
const DEFAULT_CHUNK: u64 = 512;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataOptions {
    /// `buffer_pattern`: the bytes that fill write buffers (or their compressible part).
    pub pattern: Option<Vec<u8>>,
    pub zero: bool,
    pub refill: bool,
    /// `scramble_buffers` when given (fio's default: on unless `zero_buffers` was given).
    pub scramble: Option<bool>,
    /// `buffer_compress_percentage` (0: not set).
    pub compress: u8,
    /// `buffer_compress_chunk` (0: the block size).
    pub chunk: u64,
    /// `dedupe_percentage` (0: not set).
    pub dedupe: u8,
    /// `dedupe_mode=working_set` (else `repeat`), `dedupe_working_set_percentage`,
    /// `dedupe_global`.
    #[serde(default)]
    pub working_set: bool,
    #[serde(default = "five")]
    pub working_set_pct: u8,
    #[serde(default)]
    pub global: bool,
}

fn five() -> u8 {
    5
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            pattern: None,
            zero: false,
            refill: false,
            scramble: None,
            compress: 0,
            chunk: DEFAULT_CHUNK,
            dedupe: 0,
            working_set: false,
            working_set_pct: five(),
            global: false,
        }
    }
}

impl DataOptions {
    /// Takes one of the options; false if `key` is none of them.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        match key {
            "buffer_pattern" => {
                if v.trim_start().starts_with('\'') {
                    return Err(format!(
                        "`{}`: a pattern read from a file is not run; give its bytes (0x hex, a number, a \"string\")",
                        excerpt(v)
                    ));
                }
                self.pattern = Some(super::verify_pattern(v)?);
            }
            "zero_buffers" => self.zero = parse_bool(v)?,
            "refill_buffers" => self.refill = parse_bool(v)?,
            "scramble_buffers" => self.scramble = Some(parse_bool(v)?),
            "buffer_compress_percentage" => self.compress = percent(v)?,
            "buffer_compress_chunk" => self.chunk = parse_bytes(v)?,
            "dedupe_percentage" => self.dedupe = percent(v)?,
            "dedupe_mode" => {
                self.working_set = match v.trim().to_ascii_lowercase().as_str() {
                    "repeat" => false,
                    "working_set" => true,
                    _ => {
                        return Err(format!("`{}` (use repeat or working_set)", excerpt(v)));
                    }
                }
            }
            "dedupe_working_set_percentage" => self.working_set_pct = percent(v)?,
            "dedupe_global" => self.global = parse_bool(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether a write's data changes from one write to the next (fio's refill, which
    /// compression and dedupe turn on): random parts exist and are refreshed per write.
    pub fn refills(&self) -> bool {
        let random = self.compress < 100
            && (self.compress > 0 || self.dedupe > 0 || (!self.zero && self.pattern.is_none()));
        (self.refill || self.compress > 0 || self.dedupe > 0) && random
    }

    /// Whether fio's `scramble_buffers` applies: on by default, off when asked, when
    /// `zero_buffers` was given without it, or when buffers are refilled anyway.
    pub fn scrambles(&self) -> bool {
        let asked = self.scramble.unwrap_or(!self.zero);
        asked && !self.refill && self.compress == 0 && self.dedupe == 0
    }

    /// The option that lays out the data, when one was given: --verify writes its own
    /// header and data into every block, so it refuses them.
    pub fn layout_option(&self) -> Option<&'static str> {
        if self.pattern.is_some() {
            Some("buffer_pattern")
        } else if self.compress > 0 {
            Some("buffer_compress_percentage")
        } else if self.dedupe > 0 {
            Some("dedupe_percentage")
        } else if self.zero {
            Some("zero_buffers")
        } else {
            None
        }
    }
}

fn percent(v: &str) -> Result<u8, String> {
    v.trim()
        .parse::<u8>()
        .ok()
        .filter(|&p| p <= 100)
        .ok_or_else(|| format!("`{}` must be a whole percentage from 0 to 100", excerpt(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fios_values_and_defaults() {
        let mut d = DataOptions::default();
        assert!(d.scrambles() && !d.refills());
        assert!(d.set("buffer_pattern", "0xdeadface\"ab\"").unwrap());
        assert_eq!(
            d.pattern.as_deref(),
            Some(&[0xde, 0xad, 0xfa, 0xce, b'a', b'b'][..])
        );
        assert!(d.set("buffer_pattern", "0xZZ").is_err());
        assert!(
            d.set("buffer_pattern", "'file'")
                .unwrap_err()
                .contains("file")
        );
        assert!(
            d.set("dedupe_percentage", "150")
                .unwrap_err()
                .contains("0 to 100")
        );
        assert!(d.set("buffer_compress_percentage", "-1").is_err());
        d.set("buffer_compress_chunk", "4k").unwrap();
        assert_eq!(d.chunk, 4096);
        assert!(d.set("dedupe_mode", "sideways").is_err());
        assert!(d.set("dedupe_mode", "working_set").unwrap() && d.working_set);
        assert!(d.set("dedupe_mode", "repeat").unwrap() && !d.working_set);
        assert_eq!(d.working_set_pct, 5, "fio's default");
        assert!(d.set("dedupe_working_set_percentage", "101").is_err());
        assert!(!d.set("bs", "4k").unwrap());

        // A pattern alone is constant (and scrambled, as fio's); with compression the
        // random part is refilled.
        let mut p = DataOptions::default();
        p.set("buffer_pattern", "0x55").unwrap();
        assert!(p.scrambles() && !p.refills());
        p.set("refill_buffers", "1").unwrap();
        assert!(!p.scrambles() && !p.refills());
        p.set("buffer_compress_percentage", "50").unwrap();
        assert!(p.refills());
        p.set("buffer_compress_percentage", "100").unwrap();
        assert!(!p.refills());

        let mut z = DataOptions::default();
        z.set("zero_buffers", "1").unwrap();
        assert!(!z.scrambles());
        z.set("scramble_buffers", "1").unwrap();
        assert!(z.scrambles());
        let mut r = DataOptions::default();
        r.set("refill_buffers", "1").unwrap();
        assert!(r.refills() && !r.scrambles());
    }
}
