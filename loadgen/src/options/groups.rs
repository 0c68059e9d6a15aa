//! The order jobs run in, as fio's job files give it: `stonewall` (and `wait_for` naming the
//! job just before) starts a job when every job before it has ended. Jobs between two such
//! walls run together, as one group, reported as fio reports a group (`groupid`).

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
        if j.new_group && !wall && i > 0 {
            return Err(format!(
                "job {}: new_group without stonewall: loadgen reports the jobs that run together as one group (give stonewall or wait_for with it)",
                j.name
            ));
        }
        match out.last_mut() {
            Some(g) if !wall => g.push(i),
            _ => out.push(vec![i]),
        }
    }
    let sweep = plan
        .jobs
        .iter()
        .any(|j| !j.bs_sweep.is_empty() || !j.iodepth_sweep.is_empty());
    if out.len() > 1 && sweep {
        return Err(
            "stonewall or wait_for with a sweep (--bs_sweep, --iodepth_sweep): run the groups as separate runs"
                .into(),
        );
    }
    Ok(out)
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
            &[("name", "a")],
            &[("name", "b"), ("new_group", "1")],
        ]))
        .unwrap_err();
        assert!(e.contains("new_group without stonewall"), "{e}");
        let e = groups(&plan(&[
            &[("name", "a"), ("bs_sweep", "4k,8k")],
            &[("name", "b"), ("stonewall", "1")],
        ]))
        .unwrap_err();
        assert!(e.contains("sweep"), "{e}");
    }
}
