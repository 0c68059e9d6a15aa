//! What a run does: jobs with fio's options, and the settings of the run as a whole.
//! `parse` reads them from a command line, job files and profiles; `validate` checks them.

pub mod data;
pub mod distribution;
pub mod errors;
pub mod groups;
pub mod jobfile;
pub mod layout;
pub mod numa;
pub mod overlap;
pub mod parse;
pub mod prio;
pub mod profiles;
pub mod settings;
pub mod sizes;
pub mod sweep;
pub mod table;
pub mod validate;
pub mod values;
pub mod zones;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use distribution::Distribution;
pub use record::workload::Rw;
pub use settings::{Eta, OutputFormat, RunSettings};
use sizes::SizeDist;
use values::{SizeSpec, excerpt, parse_bool, parse_count, parse_list, parse_size, parse_time_ns};

/// The logs a job writes (`write_*_log` give the names' stem; None: not written).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogOptions {
    pub lat: Option<String>,
    pub bw: Option<String>,
    pub iops: Option<String>,
    pub hist: Option<String>,
    /// Average over windows of this many ms (0: a line per IO).
    pub avg_msec: u64,
    /// Window of the histogram log, in ms.
    pub hist_msec: u64,
    /// fio's `log_offset`: each line of the latency, bandwidth and IOPS logs gives the
    /// IO's offset in its file.
    #[serde(default)]
    pub offset: bool,
}

impl LogOptions {
    pub fn any(&self) -> bool {
        self.lat.is_some() || self.bw.is_some() || self.iops.is_some() || self.hist.is_some()
    }
}

/// fio's `rate_process`: when the IOs of a rate-limited job are due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateProcess {
    /// Evenly spaced.
    #[default]
    Linear,
    /// Exponentially distributed gaps (arrivals of a Poisson process).
    Poisson,
}

/// fio's `exit_what`: which jobs `exitall` ends when a job ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitWhat {
    /// The jobs of the job's reporting group (fio's default).
    #[default]
    Group,
    /// Every job running now, whatever its group; the jobs after the next stonewall run.
    Stonewall,
    /// Every job: those running end, no later one starts.
    All,
}

/// fio's `numa_mem_policy`: the memory policy of a job's thread (set_mempolicy(2)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemPolicy {
    Default,
    Local,
    Prefer(u32),
    Bind(Vec<u32>),
    Interleave(Vec<u32>),
}

/// fio's `ioengine` values loadgen runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    /// io_uring (also for `libaio` command lines).
    #[default]
    IoUring,
    /// read(2)/write(2) after lseek(2), one IO at a time.
    Sync,
    /// pread(2)/pwrite(2), one IO at a time.
    Psync,
    /// No IO: each IO completes as it is issued, one at a time (fio's `null`: what is
    /// measured is loadgen's own cost per IO).
    Null,
}

impl IoEngine {
    /// Whether the job thread does its IOs itself, one at a time, rather than on its ring.
    pub fn synchronous(self) -> bool {
        self != IoEngine::IoUring
    }
}

/// fio's `file_service_type`: how the next IO's file is chosen among a job's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileService {
    /// Each file in turn, `N` IOs each (fio's default, `roundrobin`).
    RoundRobin(u32),
    /// One file until the job has covered its region, then the next.
    Sequential,
    /// A file drawn at random every `N` IOs.
    Random(u32),
}

impl Default for FileService {
    fn default() -> Self {
        FileService::RoundRobin(1)
    }
}

impl FileService {
    fn parse(v: &str) -> Result<FileService, String> {
        let (kind, n) = match v.split_once(':') {
            Some((k, n)) => (k, Some(count_u32(n, 1)?)),
            None => (v, None),
        };
        match (kind.to_ascii_lowercase().as_str(), n) {
            ("roundrobin", n) => Ok(FileService::RoundRobin(n.unwrap_or(1))),
            ("random", n) => Ok(FileService::Random(n.unwrap_or(1))),
            ("sequential", None) => Ok(FileService::Sequential),
            ("sequential", Some(_)) => Err(format!(
                "`{}`: sequential finishes each file before the next; loadgen takes no `:N` with it",
                excerpt(v)
            )),
            _ => Err(format!(
                "`{}`: loadgen runs roundrobin, sequential and random (fio's zipf, pareto and normal are not run)",
                excerpt(v)
            )),
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
    /// IO sizes of reads and writes (`bs`, `bsrange`, `bssplit`).
    pub sizes: [SizeDist; 2],
    /// `--bs_sweep`: one sweep point per size, for reads and writes alike.
    #[serde(default)]
    pub bs_sweep: Vec<u64>,
    /// Every IO size the job can issue, at any sweep point, in the directions it does: what
    /// the checks of alignment and limits go over. Kept up to date by `set`.
    pub bs: Vec<u64>,
    pub iodepth: u32,
    /// `--iodepth_sweep`: one sweep point per depth.
    #[serde(default)]
    pub iodepth_sweep: Vec<u32>,
    pub numjobs: u32,
    pub runtime_ns: Option<u64>,
    pub time_based: bool,
    pub ramp_time_ns: u64,
    /// `rate_iops` of reads and writes.
    pub rate_iops: [Option<u64>; 2],
    /// `rate` (bytes per second) of reads and writes; wins over `rate_iops`, as in fio.
    #[serde(default)]
    pub rate: [Option<u64>; 2],
    #[serde(default)]
    pub rate_process: RateProcess,
    pub direct: bool,
    pub verify: bool,
    pub randrepeat: bool,
    /// Start of the job's region in each file (`offset`), and the step per clone
    /// (`offset_increment`).
    #[serde(default)]
    pub offset: Option<SizeSpec>,
    #[serde(default)]
    pub offset_increment: Option<SizeSpec>,
    /// Bytes to transfer (`io_size`); default: the region's size.
    #[serde(default)]
    pub io_size: Option<SizeSpec>,
    /// How often the size-based workload repeats (`loops`).
    #[serde(default = "one")]
    pub loops: u32,
    /// Stop after this many IOs (`number_ios`).
    #[serde(default)]
    pub number_ios: Option<u64>,
    /// IOs prepared per submission (`iodepth_batch_submit`; 0: the whole depth).
    #[serde(default = "one")]
    pub iodepth_batch_submit: u32,
    #[serde(default)]
    pub random_distribution: Distribution,
    /// fsync / fdatasync after every N writes (0: never), and at the end (`end_fsync`).
    #[serde(default)]
    pub fsync: u32,
    #[serde(default)]
    pub fdatasync: u32,
    #[serde(default)]
    pub end_fsync: bool,
    #[serde(default)]
    pub ioengine: IoEngine,
    /// Pause after every `thinktime_blocks` IOs (`thinktime`), spinning for the first
    /// `thinktime_spin` of it.
    #[serde(default)]
    pub thinktime_ns: u64,
    #[serde(default)]
    pub thinktime_spin_ns: u64,
    #[serde(default = "one")]
    pub thinktime_blocks: u32,
    /// fio's interval logs (`write_lat_log`, `write_bw_log`, `write_iops_log`,
    /// `write_hist_log`, `log_avg_msec`, `log_hist_msec`).
    #[serde(default)]
    pub logs: LogOptions,
    /// `latency_target` (None: no search), `latency_window`, `latency_percentile`,
    /// `latency_run`.
    #[serde(default)]
    pub latency_target_ns: Option<u64>,
    #[serde(default = "one_second")]
    pub latency_window_ns: u64,
    #[serde(default = "hundred")]
    pub latency_percentile: f64,
    #[serde(default)]
    pub latency_run: bool,
    /// `percentile_list`: the percentiles reported instead of fio's default list.
    #[serde(default)]
    pub percentile_list: Option<Vec<f64>>,
    /// fio's `filesize`: the size of the job's file (its `size` when that is not given).
    #[serde(default)]
    pub filesize: Option<u64>,
    /// fio's `stonewall`: starts when every job before it has ended, in a new group.
    #[serde(default)]
    pub stonewall: bool,
    /// fio's `new_group`: a new reporting group.
    #[serde(default)]
    pub new_group: bool,
    /// fio's `wait_for=NAME`: starts when job NAME has ended.
    #[serde(default)]
    pub wait_for: Option<String>,
    /// fio's `rw=…:N` for sequential IO: bytes added to the offset after each IO (negative:
    /// taken from it, wrapping to the end of the region).
    #[serde(default)]
    pub seq_add: i64,
    /// fio's `rw=…:N` for random IO: a new random offset every N IOs, the ones between
    /// following on (`rw_sequencer=sequential`) or at the same offset (`identical`).
    #[serde(default = "one")]
    pub seq_nr: u32,
    #[serde(default)]
    pub seq_identical: bool,
    /// fio's `blockalign`: random offsets of reads and writes are multiples of this
    /// (default: the direction's smallest IO size).
    #[serde(default)]
    pub blockalign: [Option<u64>; 2],
    /// fio's `startdelay`: the job starts this long after its group (a range: each thread
    /// draws its own delay in it).
    #[serde(default)]
    pub startdelay_ns: (u64, u64),
    /// fio's `exitall`: when this job ends, the other jobs of its group end too.
    #[serde(default)]
    pub exitall: bool,
    /// fio's `rate_min` (bytes per second) and `rate_iops_min` of reads and writes: the job
    /// fails when a `rate_cycle` window falls below them.
    #[serde(default)]
    pub rate_min: [Option<u64>; 2],
    #[serde(default)]
    pub rate_iops_min: [Option<u64>; 2],
    #[serde(default = "thousand")]
    pub rate_cycle_ms: u64,
    /// fio's `nrfiles`: files per job thread when `filename` names none, named by
    /// `filename_format` (fio's `$jobname.$jobnum.$filenum`).
    #[serde(default = "one")]
    pub nrfiles: u32,
    #[serde(default)]
    pub filename_format: Option<String>,
    /// fio's `openfiles` (loadgen keeps every file open: at least `nrfiles`).
    #[serde(default)]
    pub openfiles: Option<u32>,
    /// fio's `file_service_type`: which file the next IO goes to.
    #[serde(default)]
    pub file_service: FileService,
    /// fio's `unlink`: the job's files are removed when the run ends.
    #[serde(default)]
    pub unlink: bool,
    /// fio's `random_generator=lfsr`: random offsets visit every block once per pass over
    /// the region (a permutation), rather than being drawn independently.
    #[serde(default)]
    pub lfsr: bool,
    /// fio's `io_submit_mode=offload`: IOs are submitted on their schedule whatever the
    /// completions do (loadgen's ring does so in the job thread; see docs/loadgen.md).
    #[serde(default)]
    pub offload: bool,
    /// fio's `exit_what`: which jobs `exitall` ends.
    #[serde(default)]
    pub exit_what: ExitWhat,
    /// fio's `numa_cpu_nodes`: the job's threads run on these nodes' CPUs (None: `all`, or
    /// not given).
    #[serde(default)]
    pub numa_cpu_nodes: Option<Vec<u32>>,
    /// fio's `numa_mem_policy`.
    #[serde(default)]
    pub numa_mem_policy: Option<MemPolicy>,
    /// fio's `flow` (weight; 0: none), `flow_id`, `flow_sleep` (µs).
    #[serde(default)]
    pub flow: u64,
    #[serde(default)]
    pub flow_id: u32,
    #[serde(default)]
    pub flow_sleep_us: u64,
    /// fio's `prio`, `prioclass`, `cmdprio*`, `log_prio`.
    #[serde(default)]
    pub prio: prio::PrioOptions,
    /// fio's `zonemode`, `zonesize`, `zonerange`, `zoneskip`.
    #[serde(default)]
    pub zones: zones::ZoneOptions,
    /// fio's options for the data written (`buffer_pattern`, `dedupe_percentage`, …).
    #[serde(default)]
    pub data: data::DataOptions,
    /// fio's `allow_file_create`: 0 refuses a job whose file does not exist.
    #[serde(default = "yes")]
    pub allow_file_create: bool,
    /// fio's `steadystate` criterion (default `iops_slope:0.01%`), `ss_dur` in whole
    /// seconds (0, fio's default: no steady state check) and `ss_ramp`.
    #[serde(default)]
    pub ss: record::steadystate::Criterion,
    /// fio's `verify_pattern`: the bytes written after each block's header and checked on
    /// read; `do_verify` (default 1): read back what was written after the workload;
    /// `verify_backlog`: read back every N blocks written, during the workload.
    #[serde(default)]
    pub verify_pattern: Option<Vec<u8>>,
    #[serde(default = "yes")]
    pub do_verify: bool,
    #[serde(default)]
    pub verify_backlog: Option<u64>,
    /// fio's `verify_dump`: a corrupt block's data as read and as written, to files.
    #[serde(default)]
    pub verify_dump: bool,
    /// fio's `continue_on_error`, `ignore_error`, `error_dump`, `verify_fatal`.
    #[serde(default)]
    pub errors: errors::ErrorOptions,
    /// fio's `fallocate`, `create_on_open`.
    #[serde(default)]
    pub layout: layout::LayoutOptions,
    /// fio's `verify_interval`: a verify header every this many bytes of a block (None:
    /// one per block).
    #[serde(default)]
    pub verify_interval: Option<u64>,
    /// fio's `fill_device`: write until the file system (or device) is full; ENOSPC ends
    /// the workload, not the run.
    #[serde(default)]
    pub fill_device: bool,
    #[serde(default)]
    pub ss_dur_s: u32,
    #[serde(default)]
    pub ss_ramp_ns: u64,
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
            sizes: Default::default(),
            bs_sweep: Vec::new(),
            bs: vec![4096],
            iodepth: 1,
            iodepth_sweep: Vec::new(),
            numjobs: 1,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            rate_iops: [None, None],
            rate: [None, None],
            rate_process: RateProcess::Linear,
            direct: false,
            verify: false,
            randrepeat: true,
            offset: None,
            offset_increment: None,
            io_size: None,
            loops: 1,
            number_ios: None,
            iodepth_batch_submit: 1,
            random_distribution: Distribution::Random,
            fsync: 0,
            fdatasync: 0,
            end_fsync: false,
            ioengine: IoEngine::IoUring,
            thinktime_ns: 0,
            thinktime_spin_ns: 0,
            thinktime_blocks: 1,
            logs: LogOptions::default(),
            latency_target_ns: None,
            latency_window_ns: one_second(),
            latency_percentile: 100.0,
            latency_run: false,
            percentile_list: None,
            filesize: None,
            stonewall: false,
            new_group: false,
            wait_for: None,
            seq_add: 0,
            seq_nr: 1,
            seq_identical: false,
            blockalign: [None, None],
            startdelay_ns: (0, 0),
            exitall: false,
            rate_min: [None, None],
            rate_iops_min: [None, None],
            rate_cycle_ms: 1000,
            nrfiles: 1,
            filename_format: None,
            openfiles: None,
            file_service: FileService::default(),
            unlink: false,
            lfsr: false,
            offload: false,
            exit_what: ExitWhat::Group,
            numa_cpu_nodes: None,
            numa_mem_policy: None,
            flow: 0,
            flow_id: 0,
            flow_sleep_us: 0,
            prio: prio::PrioOptions::default(),
            zones: zones::ZoneOptions::default(),
            data: data::DataOptions::default(),
            allow_file_create: true,
            ss: Default::default(),
            verify_pattern: None,
            do_verify: true,
            verify_backlog: None,
            verify_dump: false,
            errors: Default::default(),
            layout: Default::default(),
            verify_interval: None,
            fill_device: false,
            ss_dur_s: 0,
            ss_ramp_ns: 0,
            given: BTreeMap::new(),
        }
    }
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

fn one_second() -> u64 {
    1_000_000_000
}

fn thousand() -> u64 {
    1000
}

fn hundred() -> f64 {
    100.0
}

/// A time whose bare numbers are microseconds (fio's `thinktime`, `latency_target`).
fn usec_time(v: &str) -> Result<u64, String> {
    let t = v.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1000))
            .ok_or_else(|| format!("`{}` is too long", excerpt(v)));
    }
    parse_time_ns(v)
}

/// fio's `verify_pattern`: hex numbers (`0xaa55`, bytes in the order written), decimal
/// numbers (their bytes, least significant first, as fio's), and quoted strings, one after
/// another. fio's `%o` (the block's offset) is not run.
pub(super) fn verify_pattern(v: &str) -> Result<Vec<u8>, String> {
    const MAX: usize = 512;
    let mut out = Vec::new();
    let mut rest = v.trim();
    while !rest.is_empty() {
        if let Some(q) = rest.strip_prefix('"') {
            let end = q
                .find('"')
                .ok_or_else(|| format!("`{}`: a string without its closing quote", excerpt(v)))?;
            out.extend_from_slice(&q.as_bytes()[..end]);
            rest = &q[end + 1..];
        } else if let Some(h) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
            let mut n = h.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(h.len());
            // `0xff0x14` is two numbers, as fio reads it.
            if n >= 1 && h[n - 1..].starts_with('0') && h[n..].starts_with(['x', 'X']) {
                n -= 1;
            }
            if n == 0 {
                return Err(format!("`{}`: 0x without hex digits", excerpt(v)));
            }
            let digits = &h[..n];
            // An odd count: the first digit is a byte of its own, as fio's.
            let (first, pairs) = digits.split_at(n % 2);
            if !first.is_empty() {
                out.push(u8::from_str_radix(first, 16).expect("a hex digit"));
            }
            for i in (0..pairs.len()).step_by(2) {
                out.push(u8::from_str_radix(&pairs[i..i + 2], 16).expect("hex digits"));
            }
            rest = &h[n..];
        } else if rest.starts_with('%') {
            return Err(format!(
                "`{}`: %o (the block's offset in the pattern) is not run; give the pattern's bytes",
                excerpt(v)
            ));
        } else {
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            let num: i64 = rest[..n]
                .parse()
                .ok()
                .filter(|x| (i32::MIN as i64..=i32::MAX as i64).contains(x))
                .ok_or_else(|| {
                    format!(
                        "`{}` is not a pattern (0x hex, a decimal number, a \"string\")",
                        excerpt(v)
                    )
                })?;
            let mut val = num as i32 as u32;
            if val == 0 {
                out.push(0);
            }
            while val != 0 {
                out.push(val as u8);
                val >>= 8;
            }
            rest = &rest[n..];
        }
        rest = rest.trim_start();
        if out.len() > MAX {
            return Err(format!("`{}`: at most {MAX} bytes", excerpt(v)));
        }
    }
    if out.is_empty() {
        return Err("an empty pattern".into());
    }
    Ok(out)
}

/// fio's `steadystate=CRITERION:LIMIT`: iops, iops_slope, bw or bw_slope; the limit a number
/// (bandwidth: bytes per second, with fio's suffixes) or a percentage of the window's mean.
fn steady_criterion(v: &str) -> Result<record::steadystate::Criterion, String> {
    let Some((kind, limit)) = v.split_once(':') else {
        return Err(format!(
            "`{}`: give a criterion and a limit, e.g. iops_slope:0.1%",
            excerpt(v)
        ));
    };
    let (iops, slope) = match kind.trim().to_ascii_lowercase().as_str() {
        "iops" => (true, false),
        "iops_slope" => (true, true),
        "bw" => (false, false),
        "bw_slope" => (false, true),
        _ => {
            return Err(format!(
                "`{}` (use iops, iops_slope, bw or bw_slope)",
                excerpt(kind)
            ));
        }
    };
    let limit = limit.trim();
    let bad = || format!("`{}` is not a limit", excerpt(limit));
    let (limit, pct) = match limit.strip_suffix('%') {
        Some(p) => (p.trim().parse::<f64>().map_err(|_| bad())?, true),
        None if iops => (limit.parse::<f64>().map_err(|_| bad())?, false),
        None => (values::parse_bytes(limit)? as f64, false),
    };
    if !limit.is_finite() || limit < 0.0 {
        return Err(bad());
    }
    Ok(record::steadystate::Criterion {
        iops,
        slope,
        limit,
        pct,
    })
}

/// fio's signed sizes (`rw=read:-8k`): bytes, negative with a leading `-`.
fn signed_bytes(v: &str) -> Result<i64, String> {
    let t = v.trim();
    let (neg, abs) = match t.strip_prefix('-') {
        Some(a) => (true, a),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n = i64::try_from(values::parse_bytes(abs)?)
        .map_err(|_| format!("`{}` is too large", excerpt(v)))?;
    Ok(if neg { -n } else { n })
}

/// fio's `irange(time)`: one time, or `LOW-HIGH`; bare numbers are seconds.
fn time_range(v: &str) -> Result<(u64, u64), String> {
    let (lo, hi) = match v.split_once('-') {
        Some((a, b)) => (parse_time_ns(a)?, parse_time_ns(b)?),
        None => {
            let t = parse_time_ns(v)?;
            (t, t)
        }
    };
    if lo > hi {
        return Err(format!(
            "`{}`: the low end is above the high end",
            excerpt(v)
        ));
    }
    const MAX: u64 = 30 * 86_400 * 1_000_000_000;
    if hi > MAX {
        return Err(format!("`{}`: at most 30 days", excerpt(v)));
    }
    Ok((lo, hi))
}

fn count_u32(v: &str, min: u64) -> Result<u32, String> {
    let n = parse_count(v)?;
    if n < min || n > u32::MAX as u64 {
        return Err(format!(
            "`{}` must be from {min} to {}",
            excerpt(v),
            u32::MAX
        ));
    }
    Ok(n as u32)
}

fn pct(v: &str) -> Result<u8, String> {
    match v.trim().parse::<u8>() {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(format!(
            "`{}` is not a percentage from 0 to 100",
            excerpt(v)
        )),
    }
}

fn depth(x: &str) -> Result<u32, String> {
    let n = parse_count(x)?;
    if n == 0 || n > 4096 {
        Err(format!("`{}` must be from 1 to 4096", excerpt(x)))
    } else {
        Ok(n as u32)
    }
}

/// Sets the directions a per-direction option names.
fn set_dirs<T>(slot: &mut [T; 2], v: [Option<T>; 2]) {
    for (s, v) in slot.iter_mut().zip(v) {
        if let Some(v) = v {
            *s = v;
        }
    }
}

impl JobOptions {
    /// Whether the job does reads and writes (`[reads, writes]`).
    pub fn directions(&self) -> [bool; 2] {
        let p = self.rw.read_pct(self.rwmixread);
        [p > 0, p < 100]
    }

    /// Sets one job option by its canonical name (see `table`). `value` is None for a flag
    /// given without a value.
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let v = value.unwrap_or("1");
        let known = self.set_region(key, v)?
            || self.set_shape(key, v)?
            || self.set_timing(key, v)?
            || self.set_io(key, v)?
            || self.set_reporting(key, v, value)?
            || self.set_order(key, v)?
            || self.prio.set(key, v).map_err(|e| format!("--{key}: {e}"))?
            || self
                .zones
                .set(key, v)
                .map_err(|e| format!("--{key}: {e}"))?
            || self.data.set(key, v).map_err(|e| format!("--{key}: {e}"))?
            || self
                .errors
                .set(key, v)
                .map_err(|e| format!("--{key}: {e}"))?
            || self
                .layout
                .set(key, v)
                .map_err(|e| format!("--{key}: {e}"))?;
        if !known {
            return Err(format!("--{key} is not a job option"));
        }
        // As fio lists them: flags given without a value are left out.
        if let Some(v) = value {
            self.given.insert(key.to_string(), v.to_string());
        }
        self.bs = self.all_sizes();
        Ok(())
    }

    /// What the job runs on and how much of it: name, files, region, amount. Ok(false): not an option of this kind.
    fn set_region(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "name" => self.name = v.to_string(),
            "filename" => self.filename = Some(PathBuf::from(v)),
            "directory" => self.directory = Some(PathBuf::from(v)),
            "size" => self.size = Some(parse_size(v).map_err(err)?),
            "offset" => self.offset = Some(parse_size(v).map_err(err)?),
            "filesize" => {
                if v.contains(['-', ':']) {
                    return Err(err(format!(
                        "`{}`: loadgen gives each file one size, not a range",
                        excerpt(v)
                    )));
                }
                self.filesize = Some(values::parse_bytes(v).map_err(err)?);
            }
            "offset_increment" => self.offset_increment = Some(parse_size(v).map_err(err)?),
            "io_size" => self.io_size = Some(parse_size(v).map_err(err)?),
            "loops" => self.loops = count_u32(v, 1).map_err(err)?,
            "nrfiles" => {
                self.nrfiles = count_u32(v, 1).map_err(err)?;
                if self.nrfiles > 4096 {
                    return Err(err(format!("`{}` must be from 1 to 4096", excerpt(v))));
                }
            }
            "filename_format" => {
                if v.trim().is_empty() {
                    return Err(err("needs a name".into()));
                }
                self.filename_format = Some(v.to_string());
            }
            "openfiles" => self.openfiles = Some(count_u32(v, 1).map_err(err)?),
            "file_service_type" => self.file_service = FileService::parse(v).map_err(err)?,
            "unlink" => self.unlink = parse_bool(v).map_err(err)?,
            "number_ios" => {
                let n = parse_count(v).map_err(err)?;
                self.number_ios = (n > 0).then_some(n);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The shape of the IO: direction, sizes, depth, clones, where random IOs land. Ok(false): not an option of this kind.
    fn set_shape(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "rw" => {
                let (rw, modifier) = match v.split_once(':') {
                    Some((rw, m)) => (rw, Some(m)),
                    None => (v, None),
                };
                self.rw = Rw::parse(rw).map_err(err)?;
                (self.seq_add, self.seq_nr) = (0, 1);
                if let Some(m) = modifier {
                    if self.rw.random() {
                        self.seq_nr = count_u32(m, 1).map_err(err)?;
                    } else {
                        self.seq_add = signed_bytes(m).map_err(err)?;
                    }
                }
            }
            "rw_sequencer" => {
                self.seq_identical = match v.to_ascii_lowercase().as_str() {
                    "sequential" => false,
                    "identical" => true,
                    _ => {
                        return Err(err(format!(
                            "`{}` (use sequential or identical)",
                            excerpt(v)
                        )));
                    }
                }
            }
            "blockalign" => set_dirs(
                &mut self.blockalign,
                sizes::per_direction(v, |x| match values::parse_bytes(x)? {
                    0 => Err("an alignment must be greater than 0".into()),
                    b => Ok(Some(b)),
                })
                .map_err(err)?,
            ),
            "rwmixread" => self.rwmixread = pct(v).map_err(err)?,
            "rwmixwrite" => self.rwmixread = 100 - pct(v).map_err(err)?,
            "bs" | "bsrange" | "bssplit" => {
                let d = match key {
                    "bs" => sizes::parse_bs(v),
                    "bsrange" => sizes::parse_bsrange(v),
                    _ => sizes::parse_bssplit(v),
                }
                .map_err(err)?;
                set_dirs(&mut self.sizes, d);
                self.bs_sweep.clear();
                self.given.remove("bs_sweep");
            }
            "bs_sweep" => {
                let bs = parse_list(v, |x| {
                    sizes::parse_bs(x).map(|d| d[0].as_ref().map_or(0, |s| s.min()))
                })
                .map_err(err)?;
                if bs.contains(&0) {
                    return Err(err("every size must be greater than 0".into()));
                }
                self.bs_sweep = bs;
                for k in ["bs", "bsrange", "bssplit"] {
                    self.given.remove(k);
                }
            }
            "iodepth" => {
                if v.contains(',') {
                    return Err(err(format!(
                        "`{}`: takes one depth, as in fio (a sweep over depths is --iodepth_sweep={})",
                        excerpt(v),
                        excerpt(v)
                    )));
                }
                self.iodepth = depth(v).map_err(err)?;
                self.iodepth_sweep.clear();
                self.given.remove("iodepth_sweep");
            }
            "iodepth_batch_submit" => self.iodepth_batch_submit = count_u32(v, 0).map_err(err)?,
            "iodepth_sweep" => {
                self.iodepth_sweep = parse_list(v, depth).map_err(err)?;
                self.given.remove("iodepth");
            }
            "numjobs" => {
                let n = parse_count(v).map_err(err)?;
                if n == 0 || n > 1024 {
                    return Err(err(format!("`{}` must be from 1 to 1024", excerpt(v))));
                }
                self.numjobs = n as u32;
            }
            "random_generator" => {
                self.lfsr = match v.to_ascii_lowercase().as_str() {
                    // loadgen's own generator stands for fio's independent draws.
                    "tausworthe" | "tausworthe64" => false,
                    "lfsr" => true,
                    _ => {
                        return Err(err(format!(
                            "`{}` (use tausworthe, tausworthe64 or lfsr)",
                            excerpt(v)
                        )));
                    }
                }
            }
            "random_distribution" => {
                self.random_distribution = distribution::parse(v).map_err(err)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// When the IO happens: how long, at what rate, with what pauses. Ok(false): not an option of this kind.
    fn set_timing(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "runtime" => {
                let t = parse_time_ns(v).map_err(err)?;
                self.runtime_ns = (t > 0).then_some(t);
            }
            "time_based" => self.time_based = parse_bool(v).map_err(err)?,
            "ramp_time" => self.ramp_time_ns = parse_time_ns(v).map_err(err)?,
            // 0 is unlimited, an empty value leaves the direction as it is.
            "rate_iops" => set_dirs(
                &mut self.rate_iops,
                sizes::parse_rate_iops(v)
                    .map_err(err)?
                    .map(|x| x.map(|n| (n > 0).then_some(n))),
            ),
            "rate" => set_dirs(
                &mut self.rate,
                sizes::parse_rate(v)
                    .map_err(err)?
                    .map(|x| x.map(|n| (n > 0).then_some(n))),
            ),
            "rate_process" => {
                self.rate_process = match v.to_ascii_lowercase().as_str() {
                    "linear" => RateProcess::Linear,
                    "poisson" => RateProcess::Poisson,
                    _ => {
                        return Err(err(format!("`{}` (use linear or poisson)", excerpt(v))));
                    }
                }
            }
            "startdelay" => self.startdelay_ns = time_range(v).map_err(err)?,
            "exitall" => self.exitall = parse_bool(v).map_err(err)?,
            "rate_min" => set_dirs(
                &mut self.rate_min,
                sizes::parse_rate(v)
                    .map_err(err)?
                    .map(|x| x.map(|n| (n > 0).then_some(n))),
            ),
            "rate_iops_min" => set_dirs(
                &mut self.rate_iops_min,
                sizes::parse_rate_iops(v)
                    .map_err(err)?
                    .map(|x| x.map(|n| (n > 0).then_some(n))),
            ),
            "rate_cycle" => {
                self.rate_cycle_ms = parse_count(v).map_err(err)?;
                if self.rate_cycle_ms == 0 {
                    return Err(err("must be at least 1 (milliseconds)".into()));
                }
            }
            "steadystate" => self.ss = steady_criterion(v).map_err(err)?,
            "steadystate_duration" => {
                let t = parse_time_ns(v).map_err(err)?;
                // fio counts the window in whole seconds; under one it would never judge.
                if t > 0 && t < 1_000_000_000 {
                    return Err(err(format!(
                        "`{}` is under a second: the window holds one sample a second",
                        excerpt(v)
                    )));
                }
                self.ss_dur_s = u32::try_from(t / 1_000_000_000)
                    .map_err(|_| err(format!("`{}` is too long", excerpt(v))))?;
            }
            "steadystate_ramp_time" => self.ss_ramp_ns = parse_time_ns(v).map_err(err)?,
            "thinktime" => self.thinktime_ns = usec_time(v).map_err(err)?,
            "thinktime_spin" => self.thinktime_spin_ns = usec_time(v).map_err(err)?,
            "thinktime_blocks" => self.thinktime_blocks = count_u32(v, 1).map_err(err)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// How the IO is done: engine, O_DIRECT, syncs, verification. Ok(false): not an option of this kind.
    fn set_io(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "direct" => self.direct = parse_bool(v).map_err(err)?,
            "buffered" => self.direct = !parse_bool(v).map_err(err)?,
            "verify_pattern" => {
                self.verify_pattern = Some(verify_pattern(v).map_err(err)?);
                // fio: a pattern turns verification on unless `verify` was given.
                if !self.given.contains_key("verify") {
                    self.verify = true;
                }
            }
            "do_verify" => self.do_verify = parse_bool(v).map_err(err)?,
            "verify_dump" => self.verify_dump = parse_bool(v).map_err(err)?,
            // loadgen checks each block in the job thread as its read completes: fio's
            // helper threads change nothing in what is checked or found.
            "verify_async" => {
                count_u32(v, 0).map_err(err)?;
            }
            "verify_interval" => {
                let n = parse_size(v).map_err(err)?;
                let SizeSpec::Bytes(n) = n else {
                    return Err(err("bytes, not a percentage".into()));
                };
                self.verify_interval = (n > 0).then_some(n);
            }
            "fill_device" => self.fill_device = parse_bool(v).map_err(err)?,
            "verify_backlog" => {
                let n = parse_count(v).map_err(err)?;
                self.verify_backlog = (n > 0).then_some(n);
            }
            "verify" => {
                self.verify = match v.to_ascii_lowercase().as_str() {
                    // fio's `meta` checks the header alone (where the block belongs, and
                    // which write it was); loadgen's header also covers the data.
                    "crc32c" | "crc32c-intel" | "meta" => true,
                    "none" => false,
                    other => parse_bool(other).map_err(|_| {
                        err(format!(
                            "`{}`: loadgen verifies with crc32c (use --verify or --verify=crc32c)",
                            excerpt(v)
                        ))
                    })?,
                }
            }
            "ioengine" => {
                self.ioengine = match v {
                    "io_uring" | "libaio" => IoEngine::IoUring,
                    "sync" => IoEngine::Sync,
                    "psync" => IoEngine::Psync,
                    "null" => IoEngine::Null,
                    _ => {
                        return Err(err(format!(
                            "`{}` is not supported (loadgen runs io_uring, sync, psync and null; libaio runs as io_uring)",
                            excerpt(v)
                        )));
                    }
                }
            }
            "fsync" => self.fsync = count_u32(v, 0).map_err(err)?,
            "fdatasync" => self.fdatasync = count_u32(v, 0).map_err(err)?,
            "end_fsync" => self.end_fsync = parse_bool(v).map_err(err)?,
            "randrepeat" => self.randrepeat = parse_bool(v).map_err(err)?,

            _ => return Ok(false),
        }
        Ok(true)
    }

    /// What is reported and logged: interval logs, latency target, percentiles. Ok(false): not an option of this kind.
    fn set_reporting(&mut self, key: &str, v: &str, value: Option<&str>) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            // Without a value fio names the logs after the job (an empty stem here).
            "write_lat_log" | "write_bw_log" | "write_iops_log" | "write_hist_log" => {
                let stem = match value {
                    None | Some("1") => String::new(),
                    Some(v) => v.to_string(),
                };
                let slot = match key {
                    "write_lat_log" => &mut self.logs.lat,
                    "write_bw_log" => &mut self.logs.bw,
                    "write_iops_log" => &mut self.logs.iops,
                    _ => &mut self.logs.hist,
                };
                *slot = Some(stem);
            }
            "latency_target" => {
                let t = usec_time(v).map_err(err)?;
                self.latency_target_ns = (t > 0).then_some(t);
            }
            "latency_window" => {
                let t = usec_time(v).map_err(err)?;
                if t == 0 {
                    return Err(err("must be longer than 0".into()));
                }
                self.latency_window_ns = t;
            }
            "latency_percentile" => {
                self.latency_percentile = match v.trim().trim_end_matches('%').parse::<f64>() {
                    Ok(p) if p > 0.0 && p <= 100.0 => p,
                    _ => {
                        return Err(err(format!(
                            "`{}` is not a percentile from 0 to 100",
                            excerpt(v)
                        )));
                    }
                }
            }
            "latency_run" => self.latency_run = parse_bool(v).map_err(err)?,
            "log_avg_msec" => self.logs.avg_msec = parse_count(v).map_err(err)?,
            "log_offset" => self.logs.offset = parse_bool(v).map_err(err)?,
            "log_hist_msec" => self.logs.hist_msec = parse_count(v).map_err(err)?,
            "percentile_list" => {
                let mut list = Vec::new();
                for x in v.split(':') {
                    match x.trim().parse::<f64>() {
                        Ok(p) if p > 0.0 && p <= 100.0 => list.push(p),
                        _ => {
                            return Err(err(format!(
                                "`{}` is not a percentile from 0 to 100 (example: 99:99.9:99.99)",
                                excerpt(x)
                            )));
                        }
                    }
                }
                if list.len() > 20 {
                    return Err(err(format!(
                        "{} percentiles; fio takes at most 20",
                        list.len()
                    )));
                }
                list.sort_by(f64::total_cmp);
                self.percentile_list = Some(list);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The order jobs run in (fio's `stonewall`, `new_group`, `wait_for`), and options taken
    /// for fio's job files that change nothing here. Ok(false): not an option of this kind.
    fn set_order(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "stonewall" => self.stonewall = parse_bool(v).map_err(err)?,
            "new_group" => self.new_group = parse_bool(v).map_err(err)?,
            "wait_for" => {
                if v.trim().is_empty() {
                    return Err(err("needs the name of a job".into()));
                }
                self.wait_for = Some(v.trim().to_string());
            }
            "registerfiles" | "fixedbufs" | "thread" | "norandommap" | "gtod_reduce"
            | "create_serialize" => {
                parse_bool(v).map_err(err)?;
            }
            "description" | "clocksource" => {}
            "io_submit_mode" => {
                self.offload = match v.to_ascii_lowercase().as_str() {
                    "inline" => false,
                    "offload" => true,
                    _ => return Err(err(format!("`{}` (use inline or offload)", excerpt(v)))),
                }
            }
            "exit_what" => {
                self.exit_what = match v.to_ascii_lowercase().as_str() {
                    "group" => ExitWhat::Group,
                    "stonewall" => ExitWhat::Stonewall,
                    "all" => ExitWhat::All,
                    _ => {
                        return Err(err(format!(
                            "`{}` (use group, stonewall or all)",
                            excerpt(v)
                        )));
                    }
                }
            }
            "allow_file_create" => self.allow_file_create = parse_bool(v).map_err(err)?,
            "flow" => self.flow = count_u32(v, 0).map_err(err)? as u64,
            "flow_id" => self.flow_id = count_u32(v, 0).map_err(err)?,
            // At most an hour between tries.
            "flow_sleep" => {
                self.flow_sleep_us = count_u32(v, 0).map_err(err)?.min(3_600_000_000) as u64
            }
            "numa_cpu_nodes" => self.numa_cpu_nodes = numa::nodes(v).map_err(err)?,
            "numa_mem_policy" => self.numa_mem_policy = Some(numa::policy(v).map_err(err)?),
            "exitall_on_error" => {
                if !parse_bool(v).map_err(err)? {
                    return Err(err(
                        "0: a job that fails always ends the others in loadgen (the run fails)"
                            .into(),
                    ));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Every IO size of the directions the job does, at every sweep point.
    fn all_sizes(&self) -> Vec<u64> {
        if !self.bs_sweep.is_empty() {
            return self.bs_sweep.clone();
        }
        let mut v: Vec<u64> = Vec::new();
        for (d, used) in self.directions().into_iter().enumerate() {
            if used {
                for b in self.sizes[d].sizes() {
                    if !v.contains(&b) {
                        v.push(b);
                    }
                }
            }
        }
        v
    }

    /// The files of `--filename`: several are separated by `:`, and `\:` is a colon in a
    /// name, as in fio.
    pub fn filenames(&self) -> Vec<PathBuf> {
        let Some(f) = &self.filename else {
            return Vec::new();
        };
        let s = f.to_string_lossy();
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&':') => {
                    cur.push(':');
                    chars.next();
                }
                ':' => out.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        out.push(cur);
        out.into_iter()
            .filter(|x| !x.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    /// The files of job thread `jobnum`: those `--filename` names, or else `nrfiles` in
    /// `--directory` named by `filename_format` as fio's (`$jobname.$jobnum.$filenum`).
    pub fn files_of(&self, jobnum: u32) -> Vec<PathBuf> {
        let names = self.filenames();
        // fio puts a relative --filename in --directory too.
        if !names.is_empty() {
            return match &self.directory {
                Some(d) => names.iter().map(|n| d.join(n)).collect(),
                None => names,
            };
        }
        let dir = self.directory.clone().unwrap_or_else(|| PathBuf::from("."));
        let format = self
            .filename_format
            .as_deref()
            .unwrap_or("$jobname.$jobnum.$filenum");
        (0..self.nrfiles)
            .map(|n| {
                dir.join(
                    format
                        .replace("$jobname", &self.name)
                        .replace("$jobnum", &jobnum.to_string())
                        .replace("$filenum", &n.to_string()),
                )
            })
            .collect()
    }

    /// How many files each job thread uses.
    pub fn file_count(&self) -> usize {
        match self.filenames().len() {
            0 => self.nrfiles as usize,
            n => n,
        }
    }

    /// The depths of the sweep points (one without a sweep).
    pub fn depths(&self) -> Vec<u32> {
        if self.iodepth_sweep.is_empty() {
            vec![self.iodepth]
        } else {
            self.iodepth_sweep.clone()
        }
    }
}

/// Everything a run was asked to do.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub settings: RunSettings,
    pub jobs: Vec<JobOptions>,
    /// Job options given for every job (before the first `--name`, or in `[global]`), as
    /// given: fio's `global options`.
    #[serde(default)]
    pub global_options: BTreeMap<String, String>,
    /// The command line as given, and the job files it named with their text as read (name
    /// on the command line, text): the options a run record keeps.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub job_files: Vec<(String, String)>,
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
        assert_eq!(j.sizes, [SizeDist::Fixed(4096), SizeDist::Fixed(16384)]);
        assert_eq!(
            j.bs,
            vec![4096, 16384],
            "reads of 4k and writes of 16k, as in fio"
        );
        assert_eq!(j.iodepth, 32);
        assert_eq!(j.rw, Rw::RandRw);
        assert_eq!(j.rwmixread, 70);
        assert_eq!(j.runtime_ns, Some(60_000_000_000));
        assert_eq!(j.size, Some(SizeSpec::Bytes(1 << 30)));
        assert!(!j.direct && j.verify && j.time_based);
        assert!(
            !j.given.contains_key("time_based"),
            "flags without a value, as fio lists"
        );
        assert_eq!(j.given["bs"], "4k,16k");
    }

    /// The defaults of fio 3.33's HOWTO, one by one (docs/loadgen.md has the table).
    #[test]
    fn steadystate_and_verify_pattern_read_as_fios() {
        let mut j = JobOptions::default();
        assert_eq!(j.ss.label(), "iops_slope:0.010000%");
        assert_eq!((j.ss_dur_s, j.ss_ramp_ns, j.do_verify), (0, 0, true));
        j.set("steadystate", Some("bw:10m")).unwrap();
        assert_eq!(j.ss.label(), "bw:10485760.000000");
        j.set("steadystate", Some("iops_slope:0.5%")).unwrap();
        assert!(j.ss.iops && j.ss.slope && j.ss.pct && j.ss.limit == 0.5);
        j.set("steadystate_duration", Some("30s")).unwrap();
        j.set("steadystate_ramp_time", Some("5")).unwrap();
        assert_eq!((j.ss_dur_s, j.ss_ramp_ns), (30, 5_000_000_000));
        for bad in ["iops", "iops:x", "lat:1", "bw:-1%"] {
            assert!(j.set("steadystate", Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            verify_pattern("0xaa555aa5"),
            Ok(vec![0xaa, 0x55, 0x5a, 0xa5])
        );
        assert_eq!(verify_pattern("0xabc"), Ok(vec![0x0a, 0xbc]));
        assert_eq!(verify_pattern("258"), Ok(vec![2, 1]));
        assert_eq!(verify_pattern("0"), Ok(vec![0]));
        assert_eq!(
            verify_pattern("0xff0x14\"ab\" 1"),
            Ok(vec![0xff, 0x14, b'a', b'b', 1])
        );
        assert!(verify_pattern("%o").unwrap_err().contains("%o"));
        assert!(verify_pattern("\"ab").is_err());
        // A pattern turns verification on, unless `verify` was given.
        let mut j = JobOptions::default();
        j.set("verify_pattern", Some("0x55")).unwrap();
        assert!(j.verify);
        let mut j = JobOptions::default();
        j.set("verify", Some("0")).unwrap();
        j.set("verify_pattern", Some("0x55")).unwrap();
        assert!(!j.verify);
    }

    #[test]
    fn defaults_are_fios() {
        let j = JobOptions::default();
        assert!(!j.direct, "direct=0: buffered IO");
        assert_eq!(j.rw, Rw::Read);
        assert_eq!(j.rwmixread, 50);
        assert_eq!(j.sizes, [SizeDist::Fixed(4096), SizeDist::Fixed(4096)]);
        assert_eq!((j.iodepth, j.numjobs, j.loops), (1, 1, 1));
        assert_eq!(j.iodepth_batch_submit, 1);
        assert_eq!(
            (j.runtime_ns, j.time_based, j.ramp_time_ns),
            (None, false, 0)
        );
        assert_eq!((j.rate_iops, j.rate), ([None, None], [None, None]));
        assert_eq!(j.rate_process, RateProcess::Linear);
        assert!(!j.verify && j.randrepeat);
        assert_eq!((j.offset, j.io_size, j.number_ios), (None, None, None));
        assert_eq!(j.random_distribution, Distribution::Random);
        assert_eq!((j.fsync, j.fdatasync, j.end_fsync), (0, 0, false));
        assert_eq!((j.thinktime_ns, j.thinktime_blocks), (0, 1));
        assert_eq!((j.logs.avg_msec, j.logs.hist_msec), (0, 0));
        assert_eq!(j.latency_percentile, 100.0);
        assert_eq!(j.percentile_list, None);
        assert_eq!((j.seq_add, j.seq_nr, j.seq_identical), (0, 1, false));
        assert_eq!(j.blockalign, [None, None], "ba: the IO size");
        assert_eq!((j.startdelay_ns, j.exitall), ((0, 0), false));
        assert_eq!((j.rate_min, j.rate_iops_min), ([None, None], [None, None]));
        assert_eq!(j.rate_cycle_ms, 1000);
        assert_eq!((j.nrfiles, j.openfiles, j.unlink), (1, None, false));
        assert!(!j.lfsr, "random_generator=tausworthe: independent draws");
        assert_eq!(j.file_service, FileService::RoundRobin(1), "roundrobin");
        assert_eq!(j.filename_format, None, "$jobname.$jobnum.$filenum");
        let d = &j.data;
        assert!(
            d.pattern.is_none() && !d.zero && !d.refill,
            "random data, filled once"
        );
        assert!(d.scrambles(), "scramble_buffers=1");
        assert_eq!((d.compress, d.chunk, d.dedupe), (0, 512, 0));
        // Where loadgen differs, on purpose (docs/loadgen.md says why).
        assert_eq!(j.ioengine, IoEngine::IoUring, "fio: psync");
    }

    #[test]
    fn fios_offset_modifiers_delays_and_minimum_rates_parse() {
        let mut j = JobOptions::default();
        j.set("rw", Some("read:-8k")).unwrap();
        assert_eq!((j.rw, j.seq_add, j.seq_nr), (Rw::Read, -8192, 1));
        j.set("rw", Some("write:4k")).unwrap();
        assert_eq!((j.rw, j.seq_add), (Rw::Write, 4096));
        j.set("rw", Some("randread:8")).unwrap();
        assert_eq!((j.rw, j.seq_add, j.seq_nr), (Rw::RandRead, 0, 8));
        assert_eq!(j.given["rw"], "randread:8", "as given, for fio's JSON");
        j.set("rw", Some("randread")).unwrap();
        assert_eq!(j.seq_nr, 1, "a later rw= without `:N` drops it");
        j.set("rw_sequencer", Some("identical")).unwrap();
        assert!(j.seq_identical);
        j.set("blockalign", Some("1k,2k")).unwrap();
        assert_eq!(j.blockalign, [Some(1024), Some(2048)]);
        j.set("startdelay", Some("2")).unwrap();
        assert_eq!(j.startdelay_ns, (2_000_000_000, 2_000_000_000));
        j.set("startdelay", Some("1s-3s")).unwrap();
        assert_eq!(j.startdelay_ns, (1_000_000_000, 3_000_000_000));
        j.set("exitall", None).unwrap();
        assert!(j.exitall);
        j.set("rate_min", Some("1m")).unwrap();
        assert_eq!(j.rate_min, [Some(1 << 20), Some(1 << 20)]);
        j.set("rate_iops_min", Some(",50")).unwrap();
        assert_eq!(j.rate_iops_min, [None, Some(50)]);
        j.set("rate_cycle", Some("500")).unwrap();
        assert_eq!(j.rate_cycle_ms, 500);
    }

    #[test]
    fn fios_file_sets_parse_and_name_their_files() {
        let mut j = JobOptions::default();
        assert_eq!(
            j.files_of(3),
            [PathBuf::from("./loadgen.3.0")],
            "fio's default"
        );
        j.set("name", Some("t")).unwrap();
        j.set("nrfiles", Some("2")).unwrap();
        j.set("directory", Some("/srv")).unwrap();
        assert_eq!(
            j.files_of(1),
            [PathBuf::from("/srv/t.1.0"), PathBuf::from("/srv/t.1.1")]
        );
        j.set("filename_format", Some("f.$filenum.$jobname.$jobnum"))
            .unwrap();
        assert_eq!(j.files_of(0)[1], PathBuf::from("/srv/f.1.t.0"));
        assert_eq!(j.file_count(), 2);
        let mut named = j.clone();
        named.set("filename", Some("a:/dev/x")).unwrap();
        assert_eq!(
            named.files_of(0),
            [PathBuf::from("/srv/a"), PathBuf::from("/dev/x")],
            "a relative --filename is in --directory, as fio's"
        );
        j.set("filename", Some("/a:/b:/c")).unwrap();
        assert_eq!(j.file_count(), 3, "--filename lists the files");
        j.set("openfiles", Some("2")).unwrap();
        assert_eq!(j.openfiles, Some(2));
        j.set("file_service_type", Some("random:8")).unwrap();
        assert_eq!(j.file_service, FileService::Random(8));
        j.set("file_service_type", Some("roundrobin")).unwrap();
        assert_eq!(j.file_service, FileService::RoundRobin(1));
        j.set("file_service_type", Some("sequential")).unwrap();
        assert_eq!(j.file_service, FileService::Sequential);
        for bad in ["sequential:2", "zipf:1.2", "gauss"] {
            assert!(j.set("file_service_type", Some(bad)).is_err(), "{bad}");
        }
        j.set("unlink", None).unwrap();
        assert!(j.unlink);
        j.set("random_generator", Some("lfsr")).unwrap();
        assert!(j.lfsr);
        j.set("random_generator", Some("tausworthe64")).unwrap();
        assert!(!j.lfsr);
        assert!(j.set("random_generator", Some("mt19937")).is_err());
        assert!(j.set("nrfiles", Some("0")).is_err());
    }

    #[test]
    fn bad_job_values_are_refused() {
        let mut j = JobOptions::default();
        assert!(j.set("iodepth", Some("0")).unwrap_err().contains("iodepth"));
        let e = j.set("iodepth", Some("1,4")).unwrap_err();
        assert!(e.contains("--iodepth_sweep=1,4"), "{e}");
        assert!(
            j.set("rw", Some("sideways"))
                .unwrap_err()
                .contains("unknown rw")
        );
        assert!(j.set("bs", Some("0")).is_err());
        assert!(j.set("rwmixread", Some("101")).is_err());
        assert!(j.set("numjobs", Some("0")).is_err());
        assert!(j.set("ioengine", Some("posixaio")).is_err());
        assert!(j.set("thinktime", Some("soon")).is_err());
        assert!(j.set("loops", Some("0")).is_err());
        assert!(j.set("rw", Some("read:soon")).is_err());
        assert!(j.set("rw", Some("randread:0")).is_err());
        assert!(j.set("rw_sequencer", Some("sideways")).is_err());
        assert!(j.set("blockalign", Some("0")).is_err());
        assert!(j.set("startdelay", Some("5-2")).is_err());
        assert!(j.set("startdelay", Some("31d")).is_err());
        assert!(j.set("rate_cycle", Some("0")).is_err());
        assert!(j.set("io_submit_mode", Some("inline")).is_ok());
        assert!(!j.offload);
        j.set("io_submit_mode", Some("offload")).unwrap();
        assert!(j.offload);
        assert!(j.set("io_submit_mode", Some("pool")).is_err());
        assert_eq!(j.exit_what, ExitWhat::Group);
        j.set("exit_what", Some("stonewall")).unwrap();
        assert_eq!(j.exit_what, ExitWhat::Stonewall);
        j.set("exit_what", Some("ALL")).unwrap();
        assert_eq!(j.exit_what, ExitWhat::All);
        assert!(j.set("exit_what", Some("some")).is_err());
        j.set("flow", Some("8")).unwrap();
        j.set("flow_sleep", Some("1000")).unwrap();
        assert_eq!((j.flow, j.flow_id, j.flow_sleep_us), (8, 0, 1000));
        assert!(j.set("flow", Some("-1")).is_err());
        assert!(j.allow_file_create);
        j.set("allow_file_create", Some("0")).unwrap();
        assert!(!j.allow_file_create);
        assert!(j.set("flow_id", Some("99999999999")).is_err());
        assert!(j.set("exitall_on_error", None).is_ok());
        assert!(j.set("exitall_on_error", Some("0")).is_err());
        assert!(j.set("verify", Some("md5")).is_err());
        assert!(j.set("output-format", Some("json")).is_err());
    }

    #[test]
    fn sweeps_have_their_own_options() {
        let mut j = JobOptions::default();
        j.set("bs_sweep", Some("4k,8k")).unwrap();
        j.set("iodepth_sweep", Some("1,16")).unwrap();
        assert_eq!(j.bs, vec![4096, 8192]);
        assert_eq!(j.depths(), vec![1, 16]);
        // A later --bs replaces the sweep (a profile's sweep overridden on the command line).
        j.set("bs", Some("16k")).unwrap();
        assert!(j.bs_sweep.is_empty());
        assert_eq!(j.bs, vec![16384]);
        assert!(!j.given.contains_key("bs_sweep"));
    }

    #[test]
    fn rates_per_direction() {
        let mut j = JobOptions::default();
        j.set("rate_iops", Some("500,200")).unwrap();
        assert_eq!(j.rate_iops, [Some(500), Some(200)]);
        j.set("rate_iops", Some(",0")).unwrap();
        assert_eq!(j.rate_iops, [Some(500), None]);
        j.set("rate", Some("1m")).unwrap();
        assert_eq!(j.rate, [Some(1 << 20), Some(1 << 20)]);
        j.set("rate_process", Some("poisson")).unwrap();
        assert_eq!(j.rate_process, RateProcess::Poisson);
        assert!(j.set("rate_process", Some("bursty")).is_err());
    }

    #[test]
    fn fio_units_of_the_new_options() {
        let mut j = JobOptions::default();
        j.set("thinktime", Some("500")).unwrap();
        assert_eq!(
            j.thinktime_ns, 500_000,
            "a bare thinktime is in microseconds"
        );
        j.set("thinktime", Some("2ms")).unwrap();
        assert_eq!(j.thinktime_ns, 2_000_000);
        j.set("ioengine", Some("psync")).unwrap();
        assert_eq!(j.ioengine, IoEngine::Psync);
        j.set("offset", Some("25%")).unwrap();
        assert_eq!(j.offset, Some(SizeSpec::Percent(25)));
        j.set("number_ios", Some("10k")).unwrap();
        assert_eq!(j.number_ios, Some(10_000));
        j.set("fdatasync", Some("1")).unwrap();
        assert_eq!(j.fdatasync, 1);
        j.set("percentile_list", Some("99.9:50:99")).unwrap();
        assert_eq!(j.percentile_list, Some(vec![50.0, 99.0, 99.9]));
        assert!(j.set("percentile_list", Some("101")).is_err());
    }

    #[test]
    fn several_files_as_fio_writes_them() {
        let mut j = JobOptions::default();
        j.set("filename", Some("/tmp/a:/tmp/b")).unwrap();
        assert_eq!(
            j.filenames(),
            [PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")]
        );
        j.set("filename", Some(r"/dev/disk/by-path/pci-0000\:00:/tmp/c"))
            .unwrap();
        assert_eq!(
            j.filenames(),
            [
                PathBuf::from("/dev/disk/by-path/pci-0000:00"),
                PathBuf::from("/tmp/c")
            ]
        );
    }

    #[test]
    fn rw_mix() {
        assert_eq!(Rw::RandRead.read_pct(70), 100);
        assert_eq!(Rw::RandRw.read_pct(70), 70);
        assert_eq!(Rw::Write.read_pct(70), 0);
        assert_eq!(Rw::parse("rw"), Ok(Rw::ReadWrite));
    }
}
