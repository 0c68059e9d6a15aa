use std::process::ExitCode;

use clap::Parser;
use diagnose::cli::Cli;

fn main() -> ExitCode {
    match diagnose::analyze::run(&Cli::parse().command.into_analysis()) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            diagnose::note!(
                "stornet: error: {}",
                diagnose::console::plain(&f.message(), 4000)
            );
            ExitCode::from(f.exit_code())
        }
    }
}
