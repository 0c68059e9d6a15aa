//! Whether the clones of a verifying job (`numjobs`) stay out of each other's blocks on
//! their one file: clone k starts at `offset + k × offset_increment` and touches what its
//! region and its bytes to transfer reach, as fio lays them out. A job whose clones could
//! overwrite each other's blocks cannot verify them, and is refused.

use super::JobOptions;
use super::values::SizeSpec;

/// How far from its start one clone writes, when that is known without the file: `size`
/// in bytes bounds the region; without it, a sequential job's `io_size` (in bytes) bounds
/// what it reaches, IO after IO, `rw=…:N` gaps included (fio counts only the bytes it
/// transfers, so the gaps widen the reach), over every loop (each goes on where the last
/// ended, as fio's). `Err`: why it cannot be bounded.
fn reach(j: &JobOptions, bs: u64) -> Result<u64, String> {
    let region = match j.size {
        Some(SizeSpec::Bytes(b)) => Some(b),
        Some(SizeSpec::Percent(_)) => {
            return Err("--size in percent leaves the regions unknown until the file is".into());
        }
        None => None,
    };
    let span = match j.io_size {
        Some(SizeSpec::Bytes(io)) if !j.rw.random() && j.seq_add >= 0 => {
            let ios = io.div_ceil(bs).saturating_mul(j.loops.max(1) as u64);
            Some(ios.saturating_sub(1).saturating_mul(bs + j.seq_add as u64) + bs)
        }
        _ => None,
    };
    match (region, span) {
        (Some(r), Some(s)) => Ok(r.min(s)),
        (Some(r), None) => Ok(r),
        (None, Some(s)) => Ok(s),
        (None, None) => Err(
            "each clone's region runs to the end of the file (give --size, or --io_size with sequential IO)"
                .into(),
        ),
    }
}

/// `Ok` when the clones of `j` (verifying, on one named file) cannot touch each other's
/// blocks; else the one line that says why they could.
pub fn clones_apart(j: &JobOptions, bs: u64) -> Result<(), String> {
    if j.numjobs <= 1 {
        return Ok(());
    }
    let name = &j.name;
    let refuse = |why: String| {
        Err(format!(
            "job {name}: --verify with --numjobs={} on one file: the clones could overwrite each other's blocks: {why}",
            j.numjobs
        ))
    };
    let step = match j.offset_increment {
        Some(SizeSpec::Bytes(b)) if b > 0 => b,
        Some(SizeSpec::Percent(_)) => {
            return refuse("--offset_increment in percent is not known until the file is".into());
        }
        _ => return refuse("they all start at one offset (give --offset_increment)".into()),
    };
    let reach = match reach(j, bs) {
        Ok(r) => r,
        Err(why) => return refuse(why),
    };
    if reach > step {
        return refuse(format!(
            "each reaches {reach} bytes ({}) from its start, more than --offset_increment={}",
            approx(reach),
            super::values::format_bytes(step)
        ));
    }
    Ok(())
}

/// `1.9 TiB`, `912.0 KiB`: a size for reading.
fn approx(n: u64) -> String {
    let (shift, unit) = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")]
        .into_iter()
        .find(|&(s, _)| n >= 1 << s)
        .unwrap_or((0, "B"));
    format!("{:.1} {unit}", n as f64 / (1u64 << shift) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(sets: &[(&str, &str)]) -> JobOptions {
        let mut j = JobOptions::default();
        for (k, v) in sets {
            j.set(k, Some(v)).unwrap();
        }
        j
    }

    #[test]
    fn clones_apart_when_each_reach_is_within_the_increment() {
        let base = [
            ("name", "wv"),
            ("numjobs", "4"),
            ("bs", "16k"),
            ("rw", "write:112k"),
            ("offset", "120k"),
            ("offset_increment", "1m"),
        ];
        // 8 IOs of 16k, 128k apart: the last ends at 7 × 128k + 16k = 912k.
        let ok = job(&[&base[..], &[("io_size", "128k")]].concat());
        assert_eq!(reach(&ok, 16384), Ok(7 * 131072 + 16384));
        assert!(clones_apart(&ok, 16384).is_ok());
        // 9 IOs reach 1040k, past the next clone's start.
        let e =
            clones_apart(&job(&[&base[..], &[("io_size", "144k")]].concat()), 16384).unwrap_err();
        assert!(
            e.contains("1064960 bytes (1.0 MiB)") && e.contains("offset_increment=1m"),
            "{e}"
        );
        // A second loop goes on where the first ended: 16 IOs reach past 1m.
        let looped = job(&[&base[..], &[("io_size", "128k"), ("loops", "2")]].concat());
        assert_eq!(reach(&looped, 16384), Ok(15 * 131072 + 16384));
        assert!(clones_apart(&looped, 16384).is_err());
        // A region of its own bounds a clone whatever it transfers.
        let sized = job(&[&base[..], &[("io_size", "10m"), ("size", "1m")]].concat());
        assert!(clones_apart(&sized, 16384).is_ok());
        let e = clones_apart(&job(&base), 16384).unwrap_err();
        assert!(e.contains("end of the file"), "{e}");
        let e = clones_apart(
            &job(&[("name", "a"), ("numjobs", "2"), ("size", "1m")]),
            4096,
        )
        .unwrap_err();
        assert!(e.contains("one offset"), "{e}");
        let random = job(&[
            ("numjobs", "2"),
            ("rw", "randwrite"),
            ("io_size", "64k"),
            ("offset_increment", "1m"),
        ]);
        assert!(
            clones_apart(&random, 4096)
                .unwrap_err()
                .contains("end of the file")
        );
    }
}
