//! `loadgen run` options and their values (one argument per line; only `--` options, so
//! no job file is opened), then validation and the sweep, as far as they go without IO.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::options::parse::{Parsed, parse_args};
use loadgen::options::values;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for v in text.lines().take(4) {
        let _ = values::parse_bytes(v);
        let _ = values::parse_size(v);
        let _ = values::parse_time_ns(v);
        let _ = values::parse_bool(v);
        let _ = values::parse_count(v);
        let _ = values::parse_list(v, values::parse_bytes);
        let _ = diagnose::time::parse(v, 1_700_000_000.0);
    }
    let args: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("--"))
        .map(str::to_string)
        .collect();
    if let Ok(Parsed::Plan(plan)) = parse_args(&args)
        && loadgen::options::validate::validate(&plan).is_ok()
    {
        let _ = loadgen::options::sweep::points(&plan);
    }
});
