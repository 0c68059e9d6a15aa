//! The order jobs run in, as fio's job files give it: `stonewall` (and `wait_for` naming the
//! job just before) starts a job when every job before it has ended. Jobs between two such
//! walls run together. fio's reporting groups (`groupid`) start at each wall and at each
//! `new_group`, so the jobs that run together may be reported in several groups.

use super::Plan;
use super::values::excerpt;

/// The groups of jobs that run one after the other, each as indices into `plan.jobs`.
pub fn groups(plan: &Plan) -> Result<Vec<Vec<usize>>, String> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, j) in plan.jobs.iter().enumerate() {
        if let Some(w) = &j.wait_for {
            let before = i.checked_sub(1).map(|p| plan.jobs[p].name.as_str());
            if before != Some(w.as_str()) {
                return Err(format!(
                    "job {}: wait_for={}: loadgen starts a job when every job before it has ended, so it waits only for the job just before it{}",
                    j.name,
                    excerpt(w),
                    before.map_or(String::new(), |b| format!(" ({b})"))
                ));
            }
        }
        let wall = j.stonewall || j.wait_for.is_some();
        match out.last_mut() {
            Some(g) if !wall => g.push(i),
            _ => out.push(vec![i]),
        }
    }
    let sweep = plan
        .jobs
        .iter()
        .any(|j| !j.bs_sweep.is_empty() || !j.iodepth_sweep.is_empty());
    if (out.len() > 1 || groupids(plan).iter().any(|&g| g > 0)) && sweep {
        return Err(
            "stonewall, wait_for or new_group with a sweep (--bs_sweep, --iodepth_sweep): run the groups as separate runs"
                .into(),
        );
    }
    Ok(out)
}

/// fio's `groupid` of each job: a wall (`stonewall`, `wait_for`) or `new_group` after the
/// first job starts the next group, as fio's.
pub fn groupids(plan: &Plan) -> Vec<usize> {
    let mut g = 0;
    plan.jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            if i > 0 && (j.stonewall || j.new_group || j.wait_for.is_some()) {
                g += 1;
            }
            g
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::JobOptions;

    fn plan(jobs: &[&[(&str, &str)]]) -> Plan {
        let jobs = jobs
            .iter()
            .map(|sets| {
                let mut j = JobOptions::default();
                for (k, v) in sets.iter() {
                    j.set(k, Some(v)).unwrap();
                }
                j
            })
            .collect();
        Plan {
            jobs,
            ..Plan::default()
        }
    }

    #[test]
    fn walls_split_the_jobs_in_order() {
        let p = plan(&[
            &[("name", "a")],
            &[("name", "b")],
            &[("name", "c"), ("stonewall", "1")],
            &[("name", "d"), ("new_group", "1"), ("wait_for", "c")],
        ]);
        assert_eq!(groups(&p).unwrap(), vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(groups(&plan(&[&[], &[]])).unwrap(), vec![vec![0, 1]]);
        assert_eq!(groupids(&p), [0, 0, 1, 2]);
        // `new_group` alone: a reporting group of its own, run with the jobs before it.
        let p = plan(&[
            &[("name", "a"), ("new_group", "1")],
            &[("name", "b"), ("new_group", "1")],
            &[("name", "c"), ("stonewall", "1")],
            &[("name", "d")],
        ]);
        assert_eq!(groups(&p).unwrap(), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(groupids(&p), [0, 1, 2, 2]);
    }

    #[test]
    fn what_loadgen_cannot_order_is_refused() {
        let e = groups(&plan(&[
            &[("name", "a")],
            &[("name", "b")],
            &[("name", "c"), ("wait_for", "a")],
        ]))
        .unwrap_err();
        assert!(e.contains("wait_for=a") && e.contains("(b)"), "{e}");
        let e = groups(&plan(&[
            &[("name", "a"), ("iodepth_sweep", "1,2")],
            &[("name", "b"), ("new_group", "1")],
        ]))
        .unwrap_err();
        assert!(e.contains("sweep"), "{e}");
        let e = groups(&plan(&[
            &[("name", "a"), ("bs_sweep", "4k,8k")],
            &[("name", "b"), ("stonewall", "1")],
        ]))
        .unwrap_err();
        assert!(e.contains("sweep"), "{e}");
    }
}
