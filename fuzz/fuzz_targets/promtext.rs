//! loadgen's reader of the Prometheus text format (an agent's /metrics during a run).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(samples) = promclient::text::parse(text) {
        for s in &samples {
            let _ = s.label("le");
        }
    }
});
