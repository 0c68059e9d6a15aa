//! A job order as the job service hands it to the process that runs it (`loadgen
//! job-order`, hidden): the plan the service parsed and checked, and the descriptors of
//! the targets it opened, inherited by the process. The process resolves no name and reads
//! no job file: what it runs is what was checked. It says `ready` on stdout once laid out
//! and waits for `start UNIX_NS` or `abort` on stdin (`gate`); its run record goes to an
//! inherited pipe, its messages to stderr.

use std::io::BufRead;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Failure;
use crate::options::Plan;
use crate::target::Preopened;

/// A target and the descriptor number the running process has it under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Handed {
    pub path: PathBuf,
    pub fd: i32,
    pub created: bool,
}

/// The first line the service writes to the process's stdin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildOrder {
    pub plan: Plan,
    pub targets: Vec<Handed>,
}

impl ChildOrder {
    /// What the process opens instead of each target's name: its inherited descriptor.
    pub fn preopened(&self) -> Vec<Preopened> {
        self.targets
            .iter()
            .map(|t| Preopened {
                path: t.path.clone(),
                open: PathBuf::from(format!("/proc/self/fd/{}", t.fd)),
                created: t.created,
            })
            .collect()
    }
}

/// The order, from the first line of stdin (`loadgen job-order`; `run::job_order` runs it).
pub fn read() -> Result<ChildOrder, Failure> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::Runtime(e.into()))?;
    serde_json::from_str(&line).map_err(|e| {
        Failure::Usage(format!(
            "not a job order from `loadgen serve` ({e}); this command is its own"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse::{Parsed, parse_args};

    /// The plan the process runs is the plan the service checked, field for field.
    #[test]
    fn an_order_reads_back_as_written() {
        for args in [
            "--name=w --rw=randrw --rwmixread=70 --bs=4k,64k --iodepth=8 --size=1m --time_based --runtime=3 --latency_target=2ms --latency_percentile=99.9 --rate_iops=100,200",
            "--bssplit=4k/50:64k/50 --random_distribution=zipf:1.2 --offset=10% --numjobs=2 --name=a --name=b --rw=write --iodepth_sweep=1,4",
        ] {
            let args: Vec<String> = args.split_whitespace().map(String::from).collect();
            let Ok(Parsed::Plan(plan)) = parse_args(&args) else {
                panic!("{args:?}")
            };
            let order = ChildOrder {
                plan: *plan,
                targets: vec![Handed {
                    path: "/srv/jobs/w.0.0".into(),
                    fd: 7,
                    created: true,
                }],
            };
            let line = serde_json::to_string(&order).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<ChildOrder>(&line).unwrap(), order);
        }
    }
}
