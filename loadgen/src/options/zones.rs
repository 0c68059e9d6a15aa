//! fio's zones of a file or device (`zonemode`, `zonesize`, `zonerange`, `zoneskip`).
//! `zonemode=strided` is fio's plain zones, on any file: a sequential job does `zonesize`
//! bytes of IO within a zone of `zonerange` bytes (default `zonesize`), going over it again
//! while `zonesize` is larger, then moves `zonerange + zoneskip` further, wrapping to its
//! start at the end of the file. `zonemode=zbd` drives a zoned block device's zones, which
//! loadgen does not.

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bytes};

/// Why `zonemode=zbd` is refused.
pub const ZBD: &str = "zbd needs a zoned block device (host-managed or host-aware), which loadgen does not drive; --zonemode=strided runs fio's plain zones on any file";

/// The strided zones of a job, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zones {
    /// Bytes of IO per zone (`zonesize`).
    pub size: u64,
    /// Bytes a zone spans (`zonerange`).
    pub range: u64,
    /// Bytes left out after each zone (`zoneskip`).
    pub skip: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneOptions {
    pub strided: bool,
    pub size: Option<u64>,
    pub range: Option<u64>,
    pub skip: u64,
}

impl ZoneOptions {
    /// Takes one of the options; false if `key` is none of them.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let bytes = |v: &str| parse_bytes(v.trim());
        match key {
            "zonemode" => {
                self.strided = match v.trim() {
                    "none" => false,
                    "strided" => true,
                    "zbd" => return Err(ZBD.into()),
                    other => {
                        return Err(format!(
                            "`{}` (use none or strided; zbd is not run)",
                            excerpt(other)
                        ));
                    }
                };
            }
            "zonesize" => self.size = Some(bytes(v)?),
            "zonerange" => self.range = Some(bytes(v)?),
            "zoneskip" => self.skip = bytes(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The zones of a job (None without `zonemode=strided`, as fio ignores the sizes then).
    pub fn zones(&self) -> Result<Option<Zones>, String> {
        if !self.strided {
            return Ok(None);
        }
        let size = self
            .size
            .filter(|&s| s > 0)
            .ok_or("--zonemode=strided needs --zonesize (bytes of IO per zone)")?;
        let range = self.range.unwrap_or(size);
        if range == 0 {
            return Err("--zonerange=0: a zone spans at least one IO".into());
        }
        Ok(Some(Zones {
            size,
            range,
            skip: self.skip,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_options_read_as_fios() {
        let mut z = ZoneOptions::default();
        assert_eq!(z.zones(), Ok(None));
        z.set("zonesize", "256m").unwrap();
        assert_eq!(z.zones(), Ok(None), "sizes without a mode are fio's none");
        z.set("zonemode", "strided").unwrap();
        z.set("zoneskip", "2g").unwrap();
        let want = Zones {
            size: 256 << 20,
            range: 256 << 20,
            skip: 2 << 30,
        };
        assert_eq!(z.zones(), Ok(Some(want)));
        z.set("zonerange", "1m").unwrap();
        assert_eq!(z.zones().unwrap().unwrap().range, 1 << 20);
        let e = z.set("zonemode", "zbd").unwrap_err();
        assert!(
            e.contains("zoned block device (host-managed or host-aware)"),
            "{e}"
        );
        assert!(z.set("zonemode", "bogus").unwrap_err().contains("`bogus`"));
        assert!(z.set("zonesize", "x").is_err());
        let mut z = ZoneOptions::default();
        z.set("zonemode", "strided").unwrap();
        assert!(z.zones().unwrap_err().contains("needs --zonesize"));
        assert!(!z.set("bs", "4k").unwrap());
    }
}
