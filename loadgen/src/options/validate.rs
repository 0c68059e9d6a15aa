//! Checks of a plan that need no target: combinations fio would refuse or that would
//! measure nonsense. Checks against the file or device live in `target`.

use std::collections::HashMap;

use super::sizes::SizeDist;
use super::values::SizeSpec;
use super::{IoEngine, Plan, sweep};

pub fn validate(plan: &Plan) -> Result<(), String> {
    sweep::axes(plan)?;
    let walls = super::groups::groups(plan)?;
    // Which run of jobs between walls each job is in.
    let wall_of: HashMap<usize, usize> = walls
        .iter()
        .enumerate()
        .flat_map(|(w, jobs)| jobs.iter().map(move |&i| (i, w)))
        .collect();
    let mut verify_files: HashMap<&std::path::Path, (&str, usize)> = HashMap::new();
    for (ji, j) in plan.jobs.iter().enumerate() {
        let name = &j.name;
        let files = j.file_count();
        if j.nrfiles > 1 && !j.filenames().is_empty() {
            return Err(format!(
                "job {name}: --nrfiles names files of its own; with --filename the files are the ones it lists"
            ));
        }
        if let Some(open) = j.openfiles.filter(|&o| (o as usize) < files) {
            return Err(format!(
                "job {name}: --openfiles={open} is below its {files} files: loadgen keeps every file of a job open"
            ));
        }
        if j.zones
            .zones()
            .map_err(|e| format!("job {name}: {e}"))?
            .is_some()
        {
            if j.rw.random() {
                return Err(format!(
                    "job {name}: --zonemode=strided with --rw={}: loadgen runs sequential IO in zones (fio's zoneskip is for sequential IO too)",
                    j.rw.as_str()
                ));
            }
            if files > 1 || j.seq_add != 0 {
                return Err(format!(
                    "job {name}: --zonemode=strided runs on one file with plain sequential IO (no --rw=…:N), not {files} file(s)"
                ));
            }
        }
        if j.fill_device && (j.rw != super::Rw::Write || j.seq_add != 0) {
            return Err(format!(
                "job {name}: --fill_device with --rw={}: loadgen fills with plain sequential writes (--rw=write), which fio's fill_device is for",
                j.rw.as_str()
            ));
        }
        if let Some(n) = j.verify_interval
            && (n < 2 * crate::verify::HEADER_LEN as u64
                || j.bs.iter().any(|&b| !b.is_multiple_of(n)))
        {
            return Err(format!(
                "job {name}: --verify_interval={n} must divide --bs ({}) and be at least {} bytes (loadgen's verify header is {})",
                j.bs.iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                2 * crate::verify::HEADER_LEN,
                crate::verify::HEADER_LEN
            ));
        }
        if files > 1 && j.verify {
            return Err(format!(
                "job {name}: --verify works on one file, not {files} (--filename with `:`, --nrfiles)"
            ));
        }
        if j.rw.trim() && j.verify {
            return Err(format!(
                "job {name}: rw={} with --verify: a trim writes no data to check",
                j.rw.as_str()
            ));
        }
        if !plan.settings.replicas.is_empty() {
            if j.rw.trim() {
                return Err(format!(
                    "job {name}: rw={} with --replica: replicas take writes, not trims",
                    j.rw.as_str()
                ));
            }
            if files > 1 {
                return Err(format!(
                    "job {name}: --replica works with one file per job, not {files}"
                ));
            }
            if j.ioengine != IoEngine::IoUring {
                return Err(format!(
                    "job {name}: --replica needs ioengine=io_uring (its writes go over the job's ring)"
                ));
            }
        }
        let minimum = j
            .rate_min
            .iter()
            .chain(&j.rate_iops_min)
            .any(Option::is_some);
        if j.latency_target_ns.is_some() && minimum {
            return Err(format!(
                "job {name}: --latency_target changes the depth as it searches; a --rate_min or --rate_iops_min beside it would judge the search"
            ));
        }
        if j.prio.per_io() && j.ioengine.synchronous() {
            return Err(format!(
                "job {name}: --cmdprio_percentage and --cmdprio_bssplit set a priority per IO in its io_uring entry, which needs ioengine=io_uring or libaio (as fio's)"
            ));
        }
        if j.prio.percentage.iter().any(|&p| p > 0) && j.prio.bssplit.is_some() {
            return Err(format!(
                "job {name}: --cmdprio_percentage and --cmdprio_bssplit pick the IOs with a priority both; give one (as fio)"
            ));
        }
        if j.offload && j.ioengine.synchronous() {
            return Err(format!(
                "job {name}: --io_submit_mode=offload with a one-IO-at-a-time engine: loadgen submits on the schedule from the job's ring, which needs ioengine=io_uring or libaio"
            ));
        }
        if j.latency_target_ns.is_some() && j.ioengine != IoEngine::IoUring {
            return Err(format!(
                "job {name}: --latency_target searches IO depths, which needs ioengine=io_uring"
            ));
        }
        if j.ioengine == IoEngine::Null {
            if !matches!(j.size, Some(SizeSpec::Bytes(_))) {
                return Err(format!(
                    "job {name}: ioengine=null needs --size in bytes (it has no file to take a size from)"
                ));
            }
            if matches!(j.offset, Some(SizeSpec::Percent(_))) || j.verify {
                return Err(format!(
                    "job {name}: ioengine=null has no file: no --offset in percent, no --verify"
                ));
            }
        }
        if j.time_based && j.runtime_ns.is_none() {
            return Err(format!("job {name}: --time_based needs --runtime"));
        }
        if j.direct
            && let Some(bs) = j.bs.iter().find(|&&b| b % 512 != 0)
        {
            return Err(format!(
                "job {name}: --bs={bs} is not a multiple of 512 bytes, which direct IO needs (or give --direct=0)"
            ));
        }
        if j.direct
            && let Some(ba) = j.blockalign.iter().flatten().find(|&&b| b % 512 != 0)
        {
            return Err(format!(
                "job {name}: --blockalign={ba} is not a multiple of 512 bytes, which direct IO needs (or give --direct=0)"
            ));
        }
        if j.direct && j.seq_add % 512 != 0 {
            return Err(format!(
                "job {name}: --rw=…:{} is not a multiple of 512 bytes, which direct IO needs (or give --direct=0)",
                j.seq_add
            ));
        }
        if j.verify {
            let bs = j.bs.iter().copied().max().unwrap_or(1);
            let off_grid =
                j.blockalign.iter().flatten().any(|&b| b % bs != 0) || j.seq_add % bs as i64 != 0;
            if off_grid {
                return Err(format!(
                    "job {name}: --verify checks whole blocks of --bs={bs}; --blockalign or --rw=…:N would put IOs off them"
                ));
            }
        }
        // As fio: a minimum above the job's own rate could never be met.
        for d in (0..2).filter(|&d| j.directions()[d]) {
            let over =
                |min: Option<u64>, rate: Option<u64>| min.zip(rate).is_some_and(|(m, r)| m > r);
            if over(j.rate_min[d], j.rate[d]) || over(j.rate_iops_min[d], j.rate_iops[d]) {
                return Err(format!(
                    "job {name}: the minimum rate of {} is above its --rate/--rate_iops, so it could never be met",
                    ["reads", "writes"][d]
                ));
            }
        }
        if j.lfsr {
            let one_size = j.sizes.iter().all(|s| matches!(s, SizeDist::Fixed(_)));
            if !one_size || j.random_distribution != super::distribution::Distribution::Random {
                return Err(format!(
                    "job {name}: random_generator=lfsr visits each block once: it takes one IO size per direction and random_distribution=random"
                ));
            }
        }
        if let Some(SizeSpec::Bytes(size)) = j.size {
            let bs = j.bs.iter().max().copied().unwrap_or(0);
            if size < bs {
                return Err(format!(
                    "job {name}: --size={size} is smaller than --bs={bs}"
                ));
            }
        }
        let d = &j.data;
        if d.dedupe > 0 && d.working_set {
            // fio's checks: the working set is a share of an explicit size, on one file.
            if j.size.is_none() {
                return Err(format!(
                    "job {name}: dedupe_mode=working_set needs --size (its working set is a share of it)"
                ));
            }
            if files > 1 {
                return Err(format!(
                    "job {name}: dedupe_mode=working_set works on one file per job, not {files}"
                ));
            }
            if d.dedupe as u32 + d.working_set_pct as u32 > 100 {
                return Err(format!(
                    "job {name}: --dedupe_percentage={} cannot be reached with --dedupe_working_set_percentage={}: the working set's blocks are unique",
                    d.dedupe, d.working_set_pct
                ));
            }
        }
        if j.verify
            && let Some(opt) = j.data.layout_option()
        {
            let hint = match opt {
                "buffer_pattern" => " (--verify_pattern sets the bytes after the header)",
                "zero_buffers" => "",
                _ => ": no block of it can be a duplicate or compressible",
            };
            return Err(format!(
                "job {name}: --{opt} with --verify: verify writes a unique header and its own data into every block{hint}"
            ));
        }
        if j.verify
            && j.bs_sweep.is_empty()
            && !(matches!(j.sizes[0], SizeDist::Fixed(_)) && j.sizes[0] == j.sizes[1])
        {
            return Err(format!(
                "job {name}: --verify needs one IO size for reads and writes (a plain --bs=SIZE)"
            ));
        }
        if j.verify
            && let Some(f) = &j.filename
        {
            super::overlap::clones_apart(j, j.bs[0])?;
            // Jobs that run one after the other (between different walls) may verify one
            // file: a later read-only job checks what an earlier one wrote.
            let run = wall_of[&ji];
            if let Some((other, other_run)) = verify_files.insert(f.as_path(), (name, run))
                && other_run == run
            {
                return Err(format!(
                    "jobs {other} and {name}: --verify on the same file {}, running together: the jobs would overwrite each other's blocks",
                    f.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{JobOptions, RunSettings};

    fn plan_of(sets: &[(&str, &str)]) -> Plan {
        let mut j = JobOptions::default();
        for (k, v) in sets {
            j.set(k, Some(v)).unwrap();
        }
        Plan {
            settings: RunSettings::default(),
            jobs: vec![j],
            ..Plan::default()
        }
    }

    #[test]
    fn trims_take_no_verify_and_no_replicas() {
        let e = validate(&plan_of(&[("rw", "randtrim"), ("verify", "1")])).unwrap_err();
        assert!(e.contains("rw=randtrim with --verify"), "{e}");
        let mut p = plan_of(&[("rw", "trim")]);
        assert!(validate(&p).is_ok());
        p.settings.replicas = vec!["198.18.0.2:7480".parse().unwrap()];
        let e = validate(&p).unwrap_err();
        assert!(e.contains("rw=trim with --replica"), "{e}");
    }

    #[test]
    fn fill_device_and_verify_interval_take_what_they_can_do() {
        let e = validate(&plan_of(&[("fill_device", "1")])).unwrap_err();
        assert!(e.contains("--fill_device with --rw=read"), "{e}");
        let e = validate(&plan_of(&[("fill_device", "1"), ("rw", "randwrite")])).unwrap_err();
        assert!(e.contains("--rw=randwrite"), "{e}");
        assert!(validate(&plan_of(&[("fill_device", "1"), ("rw", "write")])).is_ok());
        let vi = |n: &str| {
            validate(&plan_of(&[
                ("verify", "meta"),
                ("bs", "64k"),
                ("verify_interval", n),
            ]))
        };
        assert!(vi("512").is_ok());
        assert!(
            vi("3000")
                .unwrap_err()
                .contains("--verify_interval=3000 must divide --bs")
        );
        assert!(vi("32").unwrap_err().contains("at least 64"));
        let mut j = JobOptions::default();
        assert!(
            j.set("verify_interval", Some("10%"))
                .unwrap_err()
                .contains("--verify_interval")
        );
        assert!(
            j.set("fill_device", Some("maybe"))
                .unwrap_err()
                .contains("--fill_device")
        );
    }

    #[test]
    fn verify_refuses_fios_data_layouts() {
        for (k, v) in [
            ("buffer_pattern", "0x55"),
            ("dedupe_percentage", "50"),
            ("buffer_compress_percentage", "50"),
            ("zero_buffers", "1"),
        ] {
            let e = validate(&plan_of(&[("verify", "1"), (k, v)])).unwrap_err();
            assert!(e.contains(&format!("--{k} with --verify")), "{e}");
            assert!(validate(&plan_of(&[(k, v)])).is_ok());
        }
        for (k, v) in [("refill_buffers", "1"), ("scramble_buffers", "0")] {
            assert!(validate(&plan_of(&[("verify", "1"), (k, v)])).is_ok());
        }
    }

    #[test]
    fn working_set_dedupe_needs_what_fios_needs() {
        let ws = [("dedupe_percentage", "50"), ("dedupe_mode", "working_set")];
        let e = validate(&plan_of(&ws)).unwrap_err();
        assert!(e.contains("needs --size"), "{e}");
        let mut sets = ws.to_vec();
        sets.push(("size", "1M"));
        assert!(validate(&plan_of(&sets)).is_ok());
        sets.push(("dedupe_working_set_percentage", "60"));
        let e = validate(&plan_of(&sets)).unwrap_err();
        assert!(e.contains("cannot be reached"), "{e}");
        sets.pop();
        sets.push(("nrfiles", "2"));
        let e = validate(&plan_of(&sets)).unwrap_err();
        assert!(e.contains("one file per job"), "{e}");
    }

    #[test]
    fn refuses_what_fio_refuses() {
        let e = validate(&plan_of(&[("bs", "1000"), ("direct", "1")])).unwrap_err();
        assert!(e.contains("multiple of 512"), "{e}");
        assert!(validate(&plan_of(&[("bs", "1000"), ("direct", "0")])).is_ok());
        let e = validate(&plan_of(&[("time_based", "1")])).unwrap_err();
        assert!(e.contains("needs --runtime"));
        let e = validate(&plan_of(&[("size", "2k"), ("bs", "4k")])).unwrap_err();
        assert!(e.contains("smaller than --bs"));
        let e = validate(&plan_of(&[
            ("verify", "1"),
            ("numjobs", "2"),
            ("filename", "/x"),
        ]))
        .unwrap_err();
        assert!(e.contains("--numjobs=2") && e.contains("one offset"), "{e}");
        assert!(validate(&plan_of(&[("bs", "4k"), ("size", "1M")])).is_ok());
        let e = validate(&plan_of(&[
            ("verify", "1"),
            ("rw", "randrw"),
            ("bs", "4k,8k"),
        ]))
        .unwrap_err();
        assert!(e.contains("one IO size"), "{e}");
        let e = validate(&plan_of(&[
            ("rw", "randrw"),
            ("bs", "4k,1000"),
            ("direct", "1"),
        ]))
        .unwrap_err();
        assert!(e.contains("--bs=1000"), "writes of 1000 bytes: {e}");
        let e = validate(&plan_of(&[("blockalign", "1000"), ("direct", "1")])).unwrap_err();
        assert!(e.contains("--blockalign=1000"), "{e}");
        let e = validate(&plan_of(&[("rw", "read:100"), ("direct", "1")])).unwrap_err();
        assert!(e.contains("--rw=…:100"), "{e}");
        let e = validate(&plan_of(&[("rw", "write:2k"), ("verify", "1")])).unwrap_err();
        assert!(e.contains("off them"), "{e}");
        assert!(validate(&plan_of(&[("rw", "write:-8k"), ("verify", "1")])).is_ok());
        let e = validate(&plan_of(&[("rate", "1m"), ("rate_min", "2m")])).unwrap_err();
        assert!(e.contains("minimum rate of reads"), "{e}");
        assert!(validate(&plan_of(&[("rate", "2m"), ("rate_min", "1m")])).is_ok());
        let e = validate(&plan_of(&[
            ("latency_target", "1ms"),
            ("rate_iops_min", "10"),
        ]))
        .unwrap_err();
        assert!(e.contains("would judge the search"), "{e}");
        let e = validate(&plan_of(&[("nrfiles", "4"), ("openfiles", "2")])).unwrap_err();
        assert!(e.contains("--openfiles=2 is below its 4 files"), "{e}");
        let e = validate(&plan_of(&[("nrfiles", "2"), ("filename", "/x")])).unwrap_err();
        assert!(e.contains("--nrfiles"), "{e}");
        let e = validate(&plan_of(&[("nrfiles", "2"), ("verify", "1")])).unwrap_err();
        assert!(e.contains("one file, not 2"), "{e}");
        let e = validate(&plan_of(&[("ioengine", "null")])).unwrap_err();
        assert!(e.contains("ioengine=null needs --size"), "{e}");
        assert!(validate(&plan_of(&[("ioengine", "null"), ("size", "1g")])).is_ok());
        let e = validate(&plan_of(&[
            ("random_generator", "lfsr"),
            ("bssplit", "4k/50:8k/50"),
        ]))
        .unwrap_err();
        assert!(e.contains("lfsr"), "{e}");
        let e = validate(&plan_of(&[
            ("random_generator", "lfsr"),
            ("random_distribution", "zipf:1.1"),
        ]))
        .unwrap_err();
        assert!(e.contains("lfsr"), "{e}");
    }
}
