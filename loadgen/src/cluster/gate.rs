//! `loadgen run --start-gate`: the job is checked and laid out; it says so on stdout and
//! waits for the instant to start at (its own wall clock) on stdin.

use std::io::{BufRead, Write};

use crate::error::Failure;

pub fn wait() -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(b"ready\n")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Runtime(e.into()))?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::Runtime(e.into()))?;
    match line.trim().strip_prefix("start ").map(str::parse::<u64>) {
        Some(Ok(at)) => {
            super::clock::sleep_until(at);
            Ok(())
        }
        _ => Err(Failure::Runtime(anyhow::anyhow!(
            "the job was called off before it started"
        ))),
    }
}
