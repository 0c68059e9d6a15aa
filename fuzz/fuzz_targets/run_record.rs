//! Run records read by `loadgen analyze`, and the analysis of what they hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(record) = record::Record::parse(text) {
        for p in &record.points {
            let _ = p.label();
            let _ = analysis::analyze(&p.run);
        }
    }
});
