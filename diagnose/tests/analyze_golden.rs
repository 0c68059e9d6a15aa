//! `stornet analyze` and `stornet report` print, byte for byte, what `loadgen analyze`
//! printed before the analysis moved into the diagnosis crate (diagnose/tests/golden).

mod common;

use std::path::Path;

use common::golden;

fn stornet(command: &str) -> impl Fn(&[&str]) -> Vec<u8> {
    move |args: &[&str]| {
        let o = golden::run(
            Path::new(env!("CARGO_BIN_EXE_stornet")),
            &[&[command], args].concat(),
        );
        // Nothing on stderr but where the HTML went.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.lines()
                .all(|l| l.starts_with("stornet: HTML report written to ")),
            "{err}"
        );
        o.stdout
    }
}

#[test]
fn record_outputs_are_as_kept() {
    golden::record_outputs_are_as_kept(&stornet("analyze"), &stornet("report"));
}

#[test]
fn fleet_outputs_over_kept_answers_are_as_kept() {
    golden::fleet_outputs_over_kept_answers_are_as_kept(&stornet("analyze"), &stornet("report"));
}
