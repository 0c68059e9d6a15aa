//! The analysis of a run record (`record`: the record reader) or, in fleet mode, of the
//! agents' metrics in Prometheus (`prometheus`, and `watch` for a window that moves with the
//! clock): the verdict and its evidence printed as text or JSON (`output`), and the HTML
//! report.

mod output;
mod prometheus;
mod record;
mod watch;

use analysis::{Report, Run};

use crate::cli::AnalyzeArgs;
use crate::error::Failure;

/// Runs the analysis `a` asks for; Ok is the exit status.
pub fn run(a: &AnalyzeArgs) -> Result<u8, Failure> {
    match (&a.record, &a.fleet.prometheus) {
        (Some(path), None) => {
            let fleet_only = [
                ("--start", a.fleet.start.is_some()),
                ("--end", a.fleet.end.is_some()),
                ("--step", a.fleet.step.is_some()),
                ("--selector", a.fleet.selector.is_some()),
                ("--watch", a.watch),
            ];
            if let Some((flag, _)) = fleet_only.iter().find(|f| f.1) {
                return Err(Failure::Usage(format!(
                    "{flag} belongs to fleet mode (--prometheus URL), not to a run record"
                )));
            }
            record::analyze(a, path)
        }
        // `--watch`: over a window that moves with the clock, again every step.
        (None, Some(url)) => {
            let q = prometheus::fleet_query(a, url)?;
            if a.watch {
                watch::run(a, &q)
            } else {
                prometheus::analyze(a, &q)
            }
        }
        _ => Err(Failure::Usage(
            "give a run record (stornet analyze run.json) or --prometheus URL with --start and --end".into(),
        )),
    }
}

pub(crate) fn analyze(run: &Run, what: &str) -> Result<Report, Failure> {
    analysis::analyze(run).map_err(|e| Failure::Usage(format!("{what}: {e}")))
}
