//! Sweeps: `--bs_sweep` and `--iodepth_sweep` lists expand into points, one result per
//! point, IO size outermost. A job without a sweep keeps its own values at every point.
//! These options are loadgen's own: fio's `--bs=4k,64k` means reads of 4k and writes of
//! 64k, and is never taken for a sweep.

use super::Plan;
use super::sizes::SizeDist;

/// One job's shape at a sweep point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPoint {
    /// IO sizes of reads and writes.
    pub sizes: [SizeDist; 2],
    pub iodepth: u32,
}

/// One point of a sweep: for each job of the plan, its IO sizes and depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub index: usize,
    pub per_job: Vec<JobPoint>,
}

/// Lengths of the bs and iodepth axes; every sweep list must have the axis length.
pub fn axes(plan: &Plan) -> Result<(usize, usize), String> {
    let b = plan
        .jobs
        .iter()
        .map(|j| j.bs_sweep.len())
        .max()
        .unwrap_or(0);
    let d = plan
        .jobs
        .iter()
        .map(|j| j.iodepth_sweep.len())
        .max()
        .unwrap_or(0);
    for j in &plan.jobs {
        for (what, n, axis) in [
            ("--bs_sweep", j.bs_sweep.len(), b),
            ("--iodepth_sweep", j.iodepth_sweep.len(), d),
        ] {
            if n != 0 && n != axis {
                return Err(format!(
                    "job {}: {what} lists of different lengths in one run ({n} and {axis} values)",
                    j.name
                ));
            }
        }
    }
    Ok((b.max(1), d.max(1)))
}

/// All points, IO size outermost.
pub fn points(plan: &Plan) -> Result<Vec<Point>, String> {
    let (b, d) = axes(plan)?;
    let mut out = Vec::with_capacity(b * d);
    for bi in 0..b {
        for di in 0..d {
            let per_job = plan
                .jobs
                .iter()
                .map(|j| JobPoint {
                    sizes: match j.bs_sweep.get(bi) {
                        Some(&bs) => [SizeDist::Fixed(bs), SizeDist::Fixed(bs)],
                        None => j.sizes.clone(),
                    },
                    iodepth: j.iodepth_sweep.get(di).copied().unwrap_or(j.iodepth),
                })
                .collect();
            out.push(Point {
                index: out.len(),
                per_job,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{JobOptions, RunSettings};

    fn fixed(b: u64) -> [SizeDist; 2] {
        [SizeDist::Fixed(b), SizeDist::Fixed(b)]
    }

    #[test]
    fn sweep_lists_expand_to_a_grid() {
        let mut a = JobOptions::default();
        a.set("bs_sweep", Some("4k,8k")).unwrap();
        a.set("iodepth_sweep", Some("1,4,16")).unwrap();
        let mut b = JobOptions::default();
        b.set("bs", Some("64k")).unwrap();
        let plan = Plan {
            settings: RunSettings::default(),
            jobs: vec![a, b],
            ..Plan::default()
        };
        let pts = points(&plan).unwrap();
        assert_eq!(pts.len(), 6);
        let shape = |p: &Point, j: usize| (p.per_job[j].sizes.clone(), p.per_job[j].iodepth);
        assert_eq!(shape(&pts[0], 0), (fixed(4096), 1));
        assert_eq!(shape(&pts[0], 1), (fixed(65536), 1));
        assert_eq!(shape(&pts[5], 0), (fixed(8192), 16));
        assert_eq!(shape(&pts[5], 1), (fixed(65536), 1));
    }

    #[test]
    fn fio_lists_are_not_sweeps() {
        let mut a = JobOptions::default();
        a.set("rw", Some("randrw")).unwrap();
        a.set("bs", Some("4k,64k")).unwrap();
        let plan = Plan {
            jobs: vec![a],
            ..Plan::default()
        };
        let pts = points(&plan).unwrap();
        assert_eq!(pts.len(), 1, "one point: reads of 4k, writes of 64k");
        assert_eq!(
            pts[0].per_job[0].sizes,
            [SizeDist::Fixed(4096), SizeDist::Fixed(65536)]
        );
    }

    #[test]
    fn mismatched_lists_are_refused() {
        let mut a = JobOptions::default();
        a.set("bs_sweep", Some("4k,8k")).unwrap();
        let mut b = JobOptions::default();
        b.set("bs_sweep", Some("4k,8k,16k")).unwrap();
        let plan = Plan {
            jobs: vec![a, b],
            ..Plan::default()
        };
        assert!(points(&plan).unwrap_err().contains("different lengths"));
    }
}
