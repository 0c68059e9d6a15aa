//! What a run does: jobs with fio's options, and the settings of the run as a whole.
//! `parse` reads them from a command line, job files and profiles; `validate` checks them.

pub mod parse;
pub mod sweep;
pub mod table;
pub mod validate;
pub mod values;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use values::{
    SizeSpec, parse_bool, parse_bytes, parse_count, parse_list, parse_size, parse_time_ns,
};

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
            _ => {
                return Err(format!(
                    "unknown rw `{s}` (use read, write, randread, randwrite, readwrite or randrw)"
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
        }
    }
    pub fn random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }
    pub fn mixed(self) -> bool {
        matches!(self, Rw::ReadWrite | Rw::RandRw)
    }
    /// Share of reads in percent, given `rwmixread` for mixed workloads.
    pub fn read_pct(self, rwmixread: u8) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite => 0,
            Rw::ReadWrite | Rw::RandRw => rwmixread,
        }
    }
}

/// One job as the user wrote it (before `numjobs` clones and sweep points expand it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobOptions {
    pub name: String,
    pub filename: Option<PathBuf>,
    pub directory: Option<PathBuf>,
    pub size: Option<SizeSpec>,
    pub rw: Rw,
    pub rwmixread: u8,
    /// One value, or several for a sweep.
    pub bs: Vec<u64>,
    /// One value, or several for a sweep.
    pub iodepth: Vec<u32>,
    pub numjobs: u32,
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    pub ramp_time_ns: u64,
    pub rate_iops: Option<u64>,
    pub direct: bool,
    pub verify: bool,
    pub randrepeat: bool,
    /// The options as given, for fio's `job options` in JSON.
    pub given: BTreeMap<String, String>,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            name: "loadgen".into(),
            filename: None,
            directory: None,
            size: None,
            rw: Rw::Read,
            rwmixread: 50,
            bs: vec![4096],
            iodepth: vec![1],
            numjobs: 1,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            rate_iops: None,
            direct: true,
            verify: false,
            randrepeat: true,
            given: BTreeMap::new(),
        }
    }
}

fn pct(v: &str) -> Result<u8, String> {
    match v.trim().parse::<u8>() {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(format!("`{v}` is not a percentage from 0 to 100")),
    }
}

impl JobOptions {
    /// Sets one job option by its canonical name (see `table`). `value` is None for a flag
    /// given without a value.
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let v = value.unwrap_or("1");
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "name" => self.name = v.to_string(),
            "filename" => self.filename = Some(PathBuf::from(v)),
            "directory" => self.directory = Some(PathBuf::from(v)),
            "size" => self.size = Some(parse_size(v).map_err(err)?),
            "rw" => self.rw = Rw::parse(v).map_err(err)?,
            "rwmixread" => self.rwmixread = pct(v).map_err(err)?,
            "rwmixwrite" => self.rwmixread = 100 - pct(v).map_err(err)?,
            "bs" => {
                let bs = parse_list(v, parse_bytes).map_err(err)?;
                if bs.contains(&0) {
                    return Err(err("must be greater than 0".into()));
                }
                if bs.iter().any(|&b| b > u32::MAX as u64 / 2) {
                    return Err(err("must be below 2g".into()));
                }
                self.bs = bs;
            }
            "iodepth" => {
                let d = parse_list(v, |x| {
                    let n = parse_count(x)?;
                    if n == 0 || n > 4096 {
                        Err(format!("`{x}` must be from 1 to 4096"))
                    } else {
                        Ok(n as u32)
                    }
                })
                .map_err(err)?;
                self.iodepth = d;
            }
            "numjobs" => {
                let n = parse_count(v).map_err(err)?;
                if n == 0 || n > 1024 {
                    return Err(err(format!("`{v}` must be from 1 to 1024")));
                }
                self.numjobs = n as u32;
            }
            "runtime" => {
                let t = parse_time_ns(v).map_err(err)?;
                self.runtime_ns = (t > 0).then_some(t);
            }
            "time_based" => self.time_based = parse_bool(v).map_err(err)?,
            "ramp_time" => self.ramp_time_ns = parse_time_ns(v).map_err(err)?,
            "rate_iops" => {
                let n = parse_count(v).map_err(err)?;
                self.rate_iops = (n > 0).then_some(n);
            }
            "direct" => self.direct = parse_bool(v).map_err(err)?,
            "buffered" => self.direct = !parse_bool(v).map_err(err)?,
            "verify" => {
                self.verify = match v.to_ascii_lowercase().as_str() {
                    "crc32c" | "crc32c-intel" => true,
                    "none" => false,
                    other => parse_bool(other).map_err(|_| {
                        err(format!(
                            "`{v}`: loadgen verifies with crc32c (use --verify or --verify=crc32c)"
                        ))
                    })?,
                }
            }
            "ioengine" => match v {
                "io_uring" | "libaio" => {}
                _ => {
                    return Err(err(format!(
                        "`{v}`: loadgen uses io_uring (io_uring and libaio are accepted)"
                    )));
                }
            },
            "randrepeat" => self.randrepeat = parse_bool(v).map_err(err)?,
            "registerfiles" | "fixedbufs" | "thread" | "norandommap" => {
                parse_bool(v).map_err(err)?;
            }
            _ => return Err(format!("--{key} is not a job option")),
        }
        self.given.insert(key.to_string(), v.to_string());
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Normal,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Eta {
    Auto,
    Never,
}

/// Settings of the run as a whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub output_format: OutputFormat,
    pub output: Option<PathBuf>,
    pub interval_ns: u64,
    pub metrics_address: Option<SocketAddr>,
    pub force_destroy_data: bool,
    pub eta: Eta,
    pub group_reporting: bool,
    pub profile: Option<String>,
    /// Replicas every write also goes to (`--replica`, repeatable).
    #[serde(default)]
    pub replicas: Vec<SocketAddr>,
    #[serde(default)]
    pub replica_token_file: Option<PathBuf>,
    /// How long a replica may leave a write unacknowledged (default in `replica::replicas`).
    #[serde(default)]
    pub replica_timeout_ns: Option<u64>,
    /// `--agent [NAME=]URL`, in the order given.
    #[serde(default)]
    pub agents: Vec<String>,
    /// `--record FILE`.
    #[serde(default)]
    pub record: Option<PathBuf>,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            output_format: OutputFormat::Normal,
            output: None,
            interval_ns: 1_000_000_000,
            metrics_address: None,
            force_destroy_data: false,
            eta: Eta::Auto,
            group_reporting: false,
            profile: None,
            replicas: Vec::new(),
            replica_token_file: None,
            replica_timeout_ns: None,
            agents: Vec::new(),
            record: None,
        }
    }
}

impl RunSettings {
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let v = value.unwrap_or("1");
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "output-format" => {
                self.output_format = match v {
                    "normal" => OutputFormat::Normal,
                    "json" | "json+" => OutputFormat::Json,
                    _ => return Err(err(format!("`{v}` (use normal or json)"))),
                }
            }
            "output" => self.output = Some(PathBuf::from(v)),
            "interval" => {
                let t = parse_time_ns(v).map_err(err)?;
                if t < 10_000_000 {
                    return Err(err(format!("`{v}` is shorter than 10ms")));
                }
                self.interval_ns = t;
            }
            "metrics-address" => {
                self.metrics_address = Some(v.parse().map_err(|_| {
                    err(format!(
                        "`{v}` is not an address with a port (e.g. 127.0.0.1:9478)"
                    ))
                })?)
            }
            "force-destroy-data" => self.force_destroy_data = parse_bool(v).map_err(err)?,
            "eta" => {
                self.eta = match v {
                    "auto" | "always" => Eta::Auto,
                    "never" => Eta::Never,
                    _ => return Err(err(format!("`{v}` (use auto or never)"))),
                }
            }
            "group_reporting" => self.group_reporting = parse_bool(v).map_err(err)?,
            "profile" => self.profile = Some(v.to_string()),
            "replica" => {
                let addr = crate::replica::replicas::parse_addr(v).map_err(err)?;
                if self.replicas.contains(&addr) {
                    return Err(err(format!("{addr} is given twice")));
                }
                self.replicas.push(addr);
            }
            "replica_token_file" => self.replica_token_file = Some(PathBuf::from(v)),
            "replica_timeout" => {
                self.replica_timeout_ns =
                    Some(crate::replica::replicas::parse_timeout(v).map_err(err)?)
            }
            "agent" => {
                crate::scrape::AgentSpec::parse(v).map_err(err)?;
                self.agents.push(v.to_string());
            }
            "record" => self.record = Some(PathBuf::from(v)),
            _ => return Err(format!("--{key} is not a run option")),
        }
        Ok(())
    }
}

/// Everything a run was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub settings: RunSettings,
    pub jobs: Vec<JobOptions>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_options_take_fio_values() {
        let mut j = JobOptions::default();
        j.set("bs", Some("4k,16k")).unwrap();
        j.set("iodepth", Some("32")).unwrap();
        j.set("rw", Some("randrw")).unwrap();
        j.set("rwmixwrite", Some("30")).unwrap();
        j.set("runtime", Some("60")).unwrap();
        j.set("size", Some("1G")).unwrap();
        j.set("direct", Some("0")).unwrap();
        j.set("verify", Some("crc32c")).unwrap();
        j.set("time_based", None).unwrap();
        assert_eq!(j.bs, vec![4096, 16384]);
        assert_eq!(j.iodepth, vec![32]);
        assert_eq!(j.rw, Rw::RandRw);
        assert_eq!(j.rwmixread, 70);
        assert_eq!(j.runtime_ns, Some(60_000_000_000));
        assert_eq!(j.size, Some(SizeSpec::Bytes(1 << 30)));
        assert!(!j.direct && j.verify && j.time_based);
        assert_eq!(j.given["bs"], "4k,16k");
    }

    #[test]
    fn bad_job_values_are_refused() {
        let mut j = JobOptions::default();
        assert!(j.set("iodepth", Some("0")).unwrap_err().contains("iodepth"));
        assert!(
            j.set("rw", Some("sideways"))
                .unwrap_err()
                .contains("unknown rw")
        );
        assert!(j.set("bs", Some("0")).is_err());
        assert!(j.set("rwmixread", Some("101")).is_err());
        assert!(j.set("numjobs", Some("0")).is_err());
        assert!(j.set("ioengine", Some("sync")).is_err());
        assert!(j.set("verify", Some("md5")).is_err());
        assert!(j.set("output-format", Some("json")).is_err());
    }

    #[test]
    fn rw_mix() {
        assert_eq!(Rw::RandRead.read_pct(70), 100);
        assert_eq!(Rw::RandRw.read_pct(70), 70);
        assert_eq!(Rw::Write.read_pct(70), 0);
        assert_eq!(Rw::parse("rw"), Ok(Rw::ReadWrite));
    }
}
