//! Sweeps: `--bs` and `--iodepth` lists expand into points, one result per point. A job with
//! a single value keeps it at every point.

use super::Plan;

/// One point of a sweep: for each job of the plan, its IO size and depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    pub index: usize,
    pub per_job: Vec<(u64, u32)>,
}

/// Lengths of the bs and iodepth axes; every list must have length 1 or the axis length.
pub fn axes(plan: &Plan) -> Result<(usize, usize), String> {
    let b = plan.jobs.iter().map(|j| j.bs.len()).max().unwrap_or(1);
    let d = plan.jobs.iter().map(|j| j.iodepth.len()).max().unwrap_or(1);
    for j in &plan.jobs {
        if j.bs.len() != 1 && j.bs.len() != b {
            return Err(format!(
                "job {}: --bs lists of different lengths in one run ({} and {b} values)",
                j.name,
                j.bs.len()
            ));
        }
        if j.iodepth.len() != 1 && j.iodepth.len() != d {
            return Err(format!(
                "job {}: --iodepth lists of different lengths in one run ({} and {d} values)",
                j.name,
                j.iodepth.len()
            ));
        }
    }
    Ok((b, d))
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
                .map(|j| {
                    (
                        j.bs[if j.bs.len() == 1 { 0 } else { bi }],
                        j.iodepth[if j.iodepth.len() == 1 { 0 } else { di }],
                    )
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

    #[test]
    fn lists_expand_to_a_grid() {
        let mut a = JobOptions::default();
        a.set("bs", Some("4k,8k")).unwrap();
        a.set("iodepth", Some("1,4,16")).unwrap();
        let mut b = JobOptions::default();
        b.set("bs", Some("64k")).unwrap();
        let plan = Plan {
            settings: RunSettings::default(),
            jobs: vec![a, b],
        };
        let pts = points(&plan).unwrap();
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[0].per_job, vec![(4096, 1), (65536, 1)]);
        assert_eq!(pts[5].per_job, vec![(8192, 16), (65536, 1)]);
    }

    #[test]
    fn mismatched_lists_are_refused() {
        let mut a = JobOptions::default();
        a.set("bs", Some("4k,8k")).unwrap();
        let mut b = JobOptions::default();
        b.set("bs", Some("4k,8k,16k")).unwrap();
        let plan = Plan {
            settings: RunSettings::default(),
            jobs: vec![a, b],
        };
        assert!(points(&plan).unwrap_err().contains("different lengths"));
    }
}
