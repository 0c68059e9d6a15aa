//! Bytes a controller or a host sends to loadgen's job service: messages read line by line,
//! and a job order's arguments split and checked as a host does before it runs anything.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::cluster::{args, protocol};

fuzz_target!(|data: &[u8]| {
    let mut r = std::io::Cursor::new(data);
    while let Ok(Some(m)) = protocol::receive(&mut r, protocol::MAX_ORDER) {
        if let protocol::Msg::Job { args: a, .. } = m {
            let _ = args::job_files(&a);
            let _ = args::split(&a);
        }
    }
});
