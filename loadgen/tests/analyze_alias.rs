//! `loadgen analyze`, the alias of `stornet analyze`, prints the same bytes on stdout as
//! `stornet` (both are held to the outputs kept in diagnose/tests/golden), and says on
//! stderr, in one line, where the command moved.

#[path = "../../diagnose/tests/common/golden.rs"]
mod golden;

use std::path::Path;

fn loadgen_analyze(args: &[&str]) -> Vec<u8> {
    let o = golden::run(
        Path::new(env!("CARGO_BIN_EXE_loadgen")),
        &[&["analyze"], args].concat(),
    );
    // The note, then what `stornet analyze` itself says there (where the HTML went).
    let err = String::from_utf8_lossy(&o.stderr);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some(
            "loadgen: note: `loadgen analyze` is now `stornet analyze` (same options, same output)"
        ),
        "{err}"
    );
    assert!(
        lines.all(|l| l.starts_with("stornet: HTML report written to ")),
        "{err}"
    );
    o.stdout
}

#[test]
fn record_outputs_are_as_kept() {
    golden::record_outputs_are_as_kept(&loadgen_analyze, &loadgen_analyze);
}

#[test]
fn fleet_outputs_over_kept_answers_are_as_kept() {
    golden::fleet_outputs_over_kept_answers_are_as_kept(&loadgen_analyze, &loadgen_analyze);
}
