//! fio's interval logs, in fio's file names and line format so that fio's tools
//! (fio2gnuplot, the histogram scripts) read them:
//!
//! - `NAME_lat.N.log`, `NAME_slat.N.log`, `NAME_clat.N.log` (`write_lat_log`): latency in ns;
//!   `NAME_bw.N.log` (`write_bw_log`): KiB/s; `NAME_iops.N.log` (`write_iops_log`): IOPS.
//!   Lines are `time (ms), value, direction (0 read, 1 write), size (bytes), priority`: one
//!   per IO, or with `log_avg_msec` one per direction and window with its mean (size 0).
//! - `NAME_clat_hist.N.log` (`write_hist_log` with `log_hist_msec`): per window and direction
//!   `time, direction, size, ` and the window's completion latencies counted in fio's 1856
//!   histogram buckets.
//!
//! N is the job thread's number, from 1; time is from the end of the ramp.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::{Context, Result};

use crate::options::LogOptions;
use crate::results::histogram::fio;

/// Sums of one window: per direction and latency (lat, slat, clat) the sum and count, and
/// bytes and IOs.
#[derive(Default)]
struct Window {
    index: u64,
    /// When the last IO of the window completed (the time of a partial window).
    last_ms: u64,
    lat: [[(u128, u64); 3]; 2],
    bytes: [u64; 2],
    ios: [u64; 2],
}

struct Hist {
    out: BufWriter<File>,
    index: u64,
    last_ms: u64,
    counts: [Vec<u64>; 2],
    /// The last IO size seen per direction (fio writes the size of the IO that closed the
    /// window).
    bs: [u64; 2],
}

pub struct IoLogs {
    /// fio's `log_prio`.
    pub log_prio: bool,
    /// fio's `log_offset`.
    log_offset: bool,
    avg_msec: u64,
    hist_msec: u64,
    /// lat, slat, clat, bw, iops.
    files: [Option<BufWriter<File>>; 5],
    window: Window,
    hist: Option<Hist>,
}

fn create(stem: &str, kind: &str, suffix: &str) -> Result<BufWriter<File>> {
    let path = format!("{stem}_{kind}.{suffix}.log");
    let f = File::create(&path).with_context(|| format!("creating log {path}"))?;
    Ok(BufWriter::with_capacity(1 << 16, f))
}

impl IoLogs {
    /// Creates the logs of job thread `suffix` (its number from 1, maybe with a sweep
    /// point); None when the job writes none.
    pub fn open(o: &LogOptions, suffix: &str) -> Result<Option<IoLogs>> {
        if !o.any() {
            return Ok(None);
        }
        let mut files: [Option<BufWriter<File>>; 5] = Default::default();
        if let Some(stem) = &o.lat {
            for (i, kind) in ["lat", "slat", "clat"].iter().enumerate() {
                files[i] = Some(create(stem, kind, suffix)?);
            }
        }
        if let Some(stem) = &o.bw {
            files[3] = Some(create(stem, "bw", suffix)?);
        }
        if let Some(stem) = &o.iops {
            files[4] = Some(create(stem, "iops", suffix)?);
        }
        let hist = match &o.hist {
            Some(stem) => Some(Hist {
                out: create(stem, "clat_hist", suffix)?,
                index: 0,
                last_ms: 0,
                counts: [vec![0; fio::NR], vec![0; fio::NR]],
                bs: [0, 0],
            }),
            None => None,
        };
        Ok(Some(IoLogs {
            log_prio: false,
            log_offset: o.offset,
            avg_msec: o.avg_msec,
            hist_msec: o.hist_msec.max(1),
            files,
            window: Window::default(),
            hist,
        }))
    }

    /// One measured IO, completed `t_ns` after the end of the ramp.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one log line, as fio writes them"
    )]
    pub fn io(
        &mut self,
        t_ns: u64,
        dir: usize,
        bytes: u64,
        lat: u64,
        slat: Option<u64>,
        clat: u64,
        prio: u16,
        offset: u64,
    ) -> Result<()> {
        let ms = t_ns / 1_000_000;
        // fio's `log_offset` column, between the IO size and the priority.
        let len = if self.log_offset {
            format!("{bytes}, {offset}")
        } else {
            bytes.to_string()
        };
        // fio's last column: the IO's priority with `log_prio`, else 1 for realtime.
        let p = if self.log_prio {
            format!("0x{prio:04x}")
        } else {
            u8::from(super::prio::realtime(prio)).to_string()
        };
        if let Some(h) = &mut self.hist {
            let w = ms / self.hist_msec;
            if w > h.index {
                flush_hist(h, (h.index + 1) * self.hist_msec)?;
                h.index = w;
            }
            h.last_ms = ms;
            h.counts[dir][fio::idx(clat)] += 1;
            h.bs[dir] = bytes;
        }
        if self.avg_msec == 0 {
            let lats = [Some(lat), slat, Some(clat)];
            for (i, v) in lats.iter().enumerate() {
                if let (Some(f), Some(v)) = (&mut self.files[i], v) {
                    writeln!(f, "{ms}, {v}, {dir}, {len}, {p}")?;
                }
            }
            if let Some(f) = &mut self.files[3] {
                let rate = (bytes as u128 * 1_000_000 / clat.max(1) as u128) as u64;
                writeln!(f, "{ms}, {rate}, {dir}, {len}, {p}")?;
            }
            if let Some(f) = &mut self.files[4] {
                writeln!(f, "{ms}, 1, {dir}, {len}, {p}")?;
            }
            return Ok(());
        }
        let w = ms / self.avg_msec;
        if w > self.window.index {
            self.flush_window(true)?;
            self.window = Window {
                index: w,
                ..Window::default()
            };
        }
        let win = &mut self.window;
        win.last_ms = ms;
        for (i, v) in [Some(lat), slat, Some(clat)].into_iter().enumerate() {
            if let Some(v) = v {
                win.lat[dir][i].0 += v as u128;
                win.lat[dir][i].1 += 1;
            }
        }
        win.bytes[dir] += bytes;
        win.ios[dir] += 1;
        Ok(())
    }

    /// Writes the current averaging window; a partial one (at the end) only to the latency
    /// logs, as fio does.
    fn flush_window(&mut self, full: bool) -> Result<()> {
        // The IO size, offset (`log_offset`) and priority of an averaged line are 0.
        let zero = if self.log_offset { "0, 0, 0" } else { "0, 0" };
        let w = &self.window;
        let end = if full {
            (w.index + 1) * self.avg_msec
        } else {
            w.last_ms
        };
        for dir in 0..2 {
            for i in 0..3 {
                let (sum, n) = w.lat[dir][i];
                if let Some(f) = &mut self.files[i]
                    && n > 0
                {
                    let mean = (sum as f64 / n as f64 + 0.5) as u64;
                    writeln!(f, "{end}, {mean}, {dir}, {zero}")?;
                }
            }
            if !full || w.ios[dir] == 0 {
                continue;
            }
            let ms = self.avg_msec;
            if let Some(f) = &mut self.files[3] {
                writeln!(
                    f,
                    "{end}, {}, {dir}, {zero}",
                    w.bytes[dir] * 1000 / ms / 1024
                )?;
            }
            if let Some(f) = &mut self.files[4] {
                writeln!(f, "{end}, {}, {dir}, {zero}", w.ios[dir] * 1000 / ms)?;
            }
        }
        Ok(())
    }

    /// Writes what is left and flushes the files.
    pub fn finish(&mut self) -> Result<()> {
        if self.avg_msec > 0 {
            self.flush_window(false)?;
        }
        if let Some(h) = &mut self.hist {
            flush_hist(h, h.last_ms)?;
            h.out.flush()?;
        }
        for f in self.files.iter_mut().flatten() {
            f.flush()?;
        }
        Ok(())
    }
}

/// One line per direction that completed IOs in the window, stamped `at` ms.
fn flush_hist(h: &mut Hist, at: u64) -> Result<()> {
    for dir in 0..2 {
        if h.counts[dir].iter().all(|&c| c == 0) {
            continue;
        }
        let mut line = format!("{at}, {dir}, {}", h.bs[dir]);
        for c in &h.counts[dir] {
            line.push_str(", ");
            line.push_str(&c.to_string());
        }
        writeln!(h.out, "{line}")?;
        h.counts[dir].iter_mut().for_each(|c| *c = 0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("loadgen-iolog-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn lines_in_fios_format() {
        let d = dir();
        let stem = |s: &str| Some(d.join(s).display().to_string());
        let per_io = LogOptions {
            lat: stem("p"),
            bw: stem("p"),
            iops: stem("p"),
            ..Default::default()
        };
        let mut l = IoLogs::open(&per_io, "1").unwrap().unwrap();
        l.io(1_500_000, 0, 4096, 120_000, Some(20_000), 100_000, 0, 0)
            .unwrap();
        l.io(2_600_000, 1, 8192, 220_000, None, 200_000, 0, 0)
            .unwrap();
        l.finish().unwrap();
        let read = |n: &str| std::fs::read_to_string(d.join(n)).unwrap();
        assert_eq!(
            read("p_lat.1.log"),
            "1, 120000, 0, 4096, 0\n2, 220000, 1, 8192, 0\n"
        );
        assert_eq!(read("p_slat.1.log"), "1, 20000, 0, 4096, 0\n");
        assert_eq!(
            read("p_bw.1.log"),
            "1, 40960, 0, 4096, 0\n2, 40960, 1, 8192, 0\n"
        );
        assert_eq!(read("p_iops.1.log"), "1, 1, 0, 4096, 0\n2, 1, 1, 8192, 0\n");

        let avg = LogOptions {
            lat: stem("a"),
            bw: stem("a"),
            hist: stem("a"),
            avg_msec: 100,
            hist_msec: 100,
            ..Default::default()
        };
        let mut l = IoLogs::open(&avg, "2").unwrap().unwrap();
        for i in 0..10u64 {
            // 10 reads in the first 100 ms, then one in the next window.
            l.io(i * 5_000_000, 0, 4096, 1000 + i, Some(10), 900, 0, 0)
                .unwrap();
        }
        l.io(150_000_000, 0, 4096, 3000, Some(10), 2900, 0, 0)
            .unwrap();
        l.finish().unwrap();
        assert_eq!(
            read("a_lat.2.log"),
            "100, 1005, 0, 0, 0\n150, 3000, 0, 0, 0\n"
        );
        // 10 × 4 KiB in 100 ms is 400 KiB/s; the partial last window is not a rate.
        assert_eq!(read("a_bw.2.log"), "100, 400, 0, 0, 0\n");
        let hist = read("a_clat_hist.2.log");
        let lines: Vec<&str> = hist.lines().collect();
        assert_eq!(lines.len(), 2);
        let f: Vec<&str> = lines[0].split(", ").collect();
        assert_eq!(f.len(), 3 + fio::NR);
        assert_eq!(&f[..3], ["100", "0", "4096"]);
        assert_eq!(f[3 + fio::idx(900)], "10");
        let _ = std::fs::remove_dir_all(&d);
    }
}
