//! The agent's TOML configuration file, and the duration syntax of its flags.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = stornet_agent::config::Config::parse(text) {
        // Reported on one line.
        assert!(!e.to_string().contains('\n'), "{e}");
    }
    let _ = stornet_agent::config::duration::parse_duration(text);
});
