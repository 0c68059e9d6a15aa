//! fio job files, read as a job order's are: `include` and `${VAR}` are refused rather than
//! followed, so fuzzing never opens a file or reads the environment.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = loadgen::options::jobfile::parse_order(text, "fuzz.fio", &[]);
    // fio's `--section`: the sections not named are skipped unread.
    let _ = loadgen::options::jobfile::parse_order(text, "fuzz.fio", &["a".to_string()]);
});
