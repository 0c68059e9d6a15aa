//! The agent's web configuration (exporter-toolkit YAML: TLS and basic auth users).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = stornet_agent::web::config::parse(text) {
        assert!(!e.contains('\n'), "{e}");
    }
});
