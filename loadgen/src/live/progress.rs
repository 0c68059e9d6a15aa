//! A progress bar on stderr when it is a terminal (unless --eta=never); nothing otherwise,
//! so logs and pipes stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::JobLive;
use crate::options::Eta;
use crate::results::live_verdict::LiveVerdict;
use crate::results::report::text::count;

pub struct Progress {
    enabled: bool,
    bar: Option<ProgressBar>,
    planned_ns: Option<u64>,
    planned_ios: Option<u64>,
    last: (u64, [u64; 2]),
    /// The live verdict, when agents are sampled.
    verdict: Option<String>,
}

impl Progress {
    pub fn new(eta: Eta) -> Progress {
        let enabled = match eta {
            Eta::Never => false,
            Eta::Auto => std::io::stderr().is_terminal(),
        };
        Progress {
            enabled,
            bar: None,
            planned_ns: None,
            planned_ios: None,
            last: (0, [0, 0]),
            verdict: None,
        }
    }

    /// A new bar for a sweep point; done when the planned time or IO count is reached.
    pub fn begin(&mut self, label: String, planned_ns: Option<u64>, planned_ios: Option<u64>) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{prefix} [{bar:30}] {elapsed_precise} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label);
        self.bar = Some(bar);
        self.planned_ns = planned_ns;
        self.planned_ios = planned_ios;
        self.last = (0, [0, 0]);
        self.verdict = None;
    }

    pub fn verdict(&mut self, v: &LiveVerdict) {
        if self.enabled {
            self.verdict = Some(v.line());
        }
    }

    pub fn tick(&mut self, live: &[JobLive], elapsed_ns: u64) {
        let Some(bar) = &self.bar else { return };
        let ios = [0, 1].map(|d| live.iter().map(|l| l.ios(d)).sum::<u64>());
        let mut frac: f64 = 0.0;
        if let Some(t) = self.planned_ns {
            frac = frac.max(elapsed_ns as f64 / t.max(1) as f64);
        }
        if let Some(n) = self.planned_ios {
            frac = frac.max((ios[0] + ios[1]) as f64 / n.max(1) as f64);
        }
        bar.set_position((frac.min(1.0) * 1000.0) as u64);
        let dt = elapsed_ns.saturating_sub(self.last.0);
        if dt >= 500_000_000 {
            let rate = |d: usize| (ios[d] - self.last.1[d]) as f64 * 1e9 / dt as f64;
            let verdict = self
                .verdict
                .as_ref()
                .map_or(String::new(), |v| format!(", verdict {v}"));
            bar.set_message(format!(
                "read {} IOPS, write {} IOPS{verdict}",
                count(rate(0)),
                count(rate(1))
            ));
            self.last = (elapsed_ns, ios);
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
