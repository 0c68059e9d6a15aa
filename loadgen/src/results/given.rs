//! The options of a run as its results and its record keep them: the command line and job
//! files as given (user and password in URLs left out), and per job what the reports need.

use record::options::{JobFile, JobSummary, RunOptions, without_credentials};

use crate::options::Plan;

pub fn options(plan: &Plan) -> RunOptions {
    RunOptions {
        args: plan.args.iter().map(|a| without_credentials(a)).collect(),
        job_files: plan
            .job_files
            .iter()
            .map(|(name, text)| JobFile {
                name: name.clone(),
                text: text.clone(),
            })
            .collect(),
        global: plan.global_options.clone(),
        jobs: plan
            .jobs
            .iter()
            .map(|j| JobSummary {
                name: j.name.clone(),
                given: j.given.clone(),
                ramp_time_ns: j.ramp_time_ns,
                percentile_list: j.percentile_list.clone(),
            })
            .collect(),
        interval_ns: plan.settings.interval_ns,
        group_reporting: plan.settings.group_reporting,
    }
}
