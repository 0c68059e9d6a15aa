use std::process::ExitCode;

use clap::Parser;

/// io_uring load generator for networked storage.
#[derive(Parser, Debug)]
#[command(name = "loadgen", version)]
struct Cli {}

fn main() -> ExitCode {
    let _ = Cli::parse();
    ExitCode::SUCCESS
}
