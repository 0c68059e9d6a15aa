//! Clients stornet did not write, run from the client host against the cluster: `rados
//! bench` (its summary parsed) and fio's `rbd` engine (librbd, fio's JSON). Each runs under
//! `timeout -k` with room for a slow cluster, and a run that times out is an error naming it.

use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use super::{CephLab, IMAGE, POOL};

/// `rados bench SECONDS write -b BLOCK -t THREADS` on the `rbd` pool.
#[derive(Clone, Copy, Debug)]
pub struct RadosBench {
    pub seconds: u32,
    pub block: u32,
    /// Writes in flight.
    pub threads: u32,
    /// How long the command may take in all (a bench whose writes hang never ends by
    /// itself): by default its seconds and 60 more.
    pub limit: Duration,
}

impl RadosBench {
    /// 64 KiB writes, 16 in flight.
    pub fn writes(seconds: u32) -> RadosBench {
        RadosBench {
            seconds,
            block: 64 << 10,
            threads: 16,
            limit: Duration::from_secs(u64::from(seconds) + 60),
        }
    }

    pub fn block(mut self, bytes: u32) -> RadosBench {
        self.block = bytes;
        self
    }

    pub fn limit(mut self, limit: Duration) -> RadosBench {
        self.limit = limit;
        self
    }
}

/// What `rados bench` printed at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BenchResult {
    pub writes: u64,
    pub seconds: f64,
    pub iops: f64,
    pub mean_latency_s: f64,
    pub max_latency_s: f64,
}

/// Reads `rados bench`'s summary (`Total writes made:`, `Average Latency(s):`, …). The
/// average IOPS is recomputed from writes and time: rados prints it rounded to an integer.
pub fn parse_rados_bench(out: &str) -> Result<BenchResult> {
    let field = |key: &str| -> Result<f64> {
        out.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<f64>().ok())
            .with_context(|| format!("no {key:?} in rados bench's output:\n{out}"))
    };
    let writes = field("Total writes made:")? as u64;
    let seconds = field("Total time run:")?;
    Ok(BenchResult {
        writes,
        seconds,
        iops: if seconds > 0.0 {
            writes as f64 / seconds
        } else {
            0.0
        },
        mean_latency_s: field("Average Latency(s):")?,
        max_latency_s: field("Max latency(s):")?,
    })
}

/// fio with the `rbd` engine on the image `rbd/lab` (through librbd, no kernel driver).
#[derive(Clone, Debug)]
pub struct FioRbd {
    /// `randwrite`, `randread`, `write`, …
    pub rw: String,
    pub bs: String,
    pub iodepth: u32,
    pub seconds: u32,
}

impl FioRbd {
    pub fn randwrite(bs: &str, seconds: u32) -> FioRbd {
        FioRbd {
            rw: "randwrite".into(),
            bs: bs.into(),
            iodepth: 16,
            seconds,
        }
    }
}

/// One direction of fio's JSON report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FioResult {
    pub ios: u64,
    pub iops: f64,
    pub mean_latency_s: f64,
    pub p99_latency_s: f64,
}

/// The `read` or `write` part of fio's JSON (its first job; the run has one).
pub fn parse_fio(json: &str, dir: &str) -> Result<FioResult> {
    let v: Value = serde_json::from_str(json).context("fio printed no JSON")?;
    let d = &v["jobs"][0][dir];
    let num = |x: &Value| {
        x.as_f64()
            .with_context(|| format!("no {dir} figures in fio's JSON"))
    };
    Ok(FioResult {
        ios: num(&d["total_ios"])? as u64,
        iops: num(&d["iops"])?,
        mean_latency_s: num(&d["clat_ns"]["mean"])? / 1e9,
        p99_latency_s: d["clat_ns"]["percentile"]["99.000000"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e9,
    })
}

impl CephLab {
    /// Runs `rados bench` writes from the client host. Its objects stay: remove them with
    /// [`CephLab::cleanup_bench`] once any fault is lifted (a pool that fills up turns the
    /// cluster HEALTH_ERR; a cleanup through a fault is as slow as the bench was).
    pub fn rados_bench(&self, b: &RadosBench) -> Result<BenchResult> {
        let (secs, bs, t) = (
            b.seconds.to_string(),
            b.block.to_string(),
            b.threads.to_string(),
        );
        let out = self.cli.run(
            b.limit,
            "rados",
            &[
                "-p",
                POOL,
                "bench",
                &secs,
                "write",
                "-b",
                &bs,
                "-t",
                &t,
                "--no-cleanup",
            ],
        )?;
        parse_rados_bench(&out)
    }

    /// Removes the objects of earlier `rados bench` runs.
    pub fn cleanup_bench(&self) -> Result<()> {
        self.cli
            .run(Duration::from_secs(180), "rados", &["-p", POOL, "cleanup"])
            .map(drop)
    }

    /// Runs fio's `rbd` engine against the image from the client host; fio's JSON report.
    pub fn fio_rbd(&self, f: &FioRbd) -> Result<String> {
        let args = [
            "--name=rbd".to_string(),
            "--ioengine=rbd".into(),
            "--clientname=admin".into(),
            format!("--pool={POOL}"),
            format!("--rbdname={IMAGE}"),
            format!("--rw={}", f.rw),
            format!("--bs={}", f.bs),
            format!("--iodepth={}", f.iodepth),
            format!("--runtime={}", f.seconds),
            "--time_based".into(),
            "--direct=1".into(),
            "--output-format=json".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let limit = Duration::from_secs(u64::from(f.seconds) + 90);
        let out = self.cli.run(limit, "fio", &args)?;
        if !out.trim_start().starts_with('{') {
            // fio prints librbd's warnings before its JSON.
            let at = out.find("\n{").context("fio printed no JSON")?;
            return Ok(out[at + 1..].to_string());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_rados_bench_summary() {
        let out = "  sec Cur ops   started  finished  avg MB/s  cur MB/s last lat(s)  avg lat(s)\n\
                   \x20   0       0         0         0         0         0           -           0\n\
                   Total time run:         10.0521\n\
                   Total writes made:      7069\n\
                   Write size:             65536\n\
                   Bandwidth (MB/sec):     43.95\n\
                   Average IOPS:           703\n\
                   Stddev IOPS:            61.2\n\
                   Average Latency(s):     0.0227\n\
                   Stddev Latency(s):      0.011\n\
                   Max latency(s):         0.146\n\
                   Min latency(s):         0.004\n";
        let r = parse_rados_bench(out).unwrap();
        assert_eq!(r.writes, 7069);
        assert!((r.iops - 703.2).abs() < 0.1, "{r:?}");
        assert_eq!(r.mean_latency_s, 0.0227);
        assert_eq!(r.max_latency_s, 0.146);
        assert!(parse_rados_bench("error connecting to the cluster").is_err());
    }

    #[test]
    fn reads_fio_json() {
        let j = r#"{"jobs":[{"write":{"total_ios":1200,"iops":120.5,
            "clat_ns":{"mean":8.0e6,"percentile":{"99.000000":2.0e7}}}}]}"#;
        let r = parse_fio(j, "write").unwrap();
        assert_eq!(r.ios, 1200);
        assert_eq!(r.mean_latency_s, 0.008);
        assert_eq!(r.p99_latency_s, 0.02);
        assert!(parse_fio("{}", "write").is_err());
    }
}
