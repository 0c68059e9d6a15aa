//! The shape of a job's workload as its results record it: fio's `rw` and the IO sizes of
//! each direction.

use serde::{Deserialize, Serialize};

/// fio's `rw` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    /// Trims (fio's `rw=trim`): holes punched in a file, in order.
    Trim,
    /// Trims at random offsets (`rw=randtrim`).
    RandTrim,
}

impl Rw {
    pub fn parse(s: &str) -> Result<Rw, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "readwrite" | "rw" => Rw::ReadWrite,
            "randrw" => Rw::RandRw,
            "trim" => Rw::Trim,
            "randtrim" => Rw::RandTrim,
            "trimwrite" | "randtrimwrite" => {
                return Err(format!(
                    "rw `{}` is not run (loadgen runs trim and randtrim on their own)",
                    crate::units::excerpt(s)
                ));
            }
            _ => {
                return Err(format!(
                    "unknown rw `{}` (use read, write, randread, randwrite, readwrite, randrw, trim or randtrim)",
                    crate::units::excerpt(s)
                ));
            }
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "readwrite",
            Rw::RandRw => "randrw",
            Rw::Trim => "trim",
            Rw::RandTrim => "randtrim",
        }
    }
    pub fn random(self) -> bool {
        matches!(
            self,
            Rw::RandRead | Rw::RandWrite | Rw::RandRw | Rw::RandTrim
        )
    }
    /// Whether the job trims: its IOs run as the writes of other jobs do, each a hole
    /// punched rather than data written.
    pub fn trim(self) -> bool {
        matches!(self, Rw::Trim | Rw::RandTrim)
    }
    pub fn mixed(self) -> bool {
        matches!(self, Rw::ReadWrite | Rw::RandRw)
    }
    /// Share of reads in percent, given `rwmixread` for mixed workloads.
    pub fn read_pct(self, rwmixread: u8) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite | Rw::Trim | Rw::RandTrim => 0,
            Rw::ReadWrite | Rw::RandRw => rwmixread,
        }
    }
}

/// How the sizes of one direction's IOs are drawn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeDist {
    /// Every IO has this size (`bs`).
    Fixed(u64),
    /// Uniform over the multiples of `min` from `min` to `max` (`bsrange`).
    Range { min: u64, max: u64 },
    /// Each size with its share in percent, the shares adding up to 100 (`bssplit`).
    Split(Vec<(u64, u32)>),
}

impl Default for SizeDist {
    fn default() -> Self {
        SizeDist::Fixed(4096)
    }
}

impl SizeDist {
    /// The smallest size: offsets of random IOs are multiples of it (fio's `blockalign`).
    pub fn min(&self) -> u64 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Range { min, .. } => *min,
            SizeDist::Split(v) => v.iter().map(|x| x.0).min().unwrap_or(0),
        }
    }
    pub fn max(&self) -> u64 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Range { max, .. } => *max,
            SizeDist::Split(v) => v.iter().map(|x| x.0).max().unwrap_or(0),
        }
    }
    /// Every size an IO can have, for the checks of alignment and limits (a range gives
    /// its ends: the sizes between are multiples of its minimum).
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            SizeDist::Fixed(b) => vec![*b],
            SizeDist::Range { min, max } => vec![*min, *max],
            SizeDist::Split(v) => v.iter().map(|x| x.0).collect(),
        }
    }
    /// fio's spelling: `4k`, `4k-64k`, `4k/70:64k/30`.
    pub fn label(&self) -> String {
        use crate::units::format_bytes as f;
        match self {
            SizeDist::Fixed(b) => f(*b),
            SizeDist::Range { min, max } => format!("{}-{}", f(*min), f(*max)),
            SizeDist::Split(v) => v
                .iter()
                .map(|(b, p)| format!("{}/{p}", f(*b)))
                .collect::<Vec<_>>()
                .join(":"),
        }
    }
}

/// The label of both directions: `4k` when they agree, else `4k,64k` (reads, writes).
pub fn label(sizes: &[SizeDist; 2]) -> String {
    if sizes[0] == sizes[1] {
        sizes[0].label()
    } else {
        format!("{},{}", sizes[0].label(), sizes[1].label())
    }
}
