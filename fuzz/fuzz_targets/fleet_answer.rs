//! Prometheus's answers in fleet mode: the query_range JSON and the analysis input built
//! from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use diagnose::signals::Field;
use diagnose::fleet::{self, Grid, Target};

fuzz_target!(|data: &[u8]| {
    // The HTTP layer is ureq's; the seeds are whole answers, so their body is what counts.
    let body = match data.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(end) => &data[end + 4..],
        None => data,
    };
    let Ok(body) = std::str::from_utf8(body) else {
        return;
    };
    let Ok(matrix) = promclient::query::parse_matrix(body) else {
        return;
    };
    let g = Grid {
        start: 1_796_013_451.0,
        step: 2.0,
        n: 5,
    };
    let answers = vec![
        (Target::Family(Field::BlockRequests), matrix.clone()),
        (Target::Family(Field::TcpRetransmits), matrix.clone()),
        (
            Target::Quantile {
                histogram: diagnose::signals::SERVICE_HISTOGRAM,
                q: 0.99,
            },
            matrix,
        ),
    ];
    let run = fleet::build(&g, &answers);
    if run.validate().is_ok() {
        let _ = analysis::analyze(&run);
    }
});
