use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use diagnose::cli::Cli;

fn main() -> ExitCode {
    let analysis = match Cli::parse().command.into_analysis() {
        Ok(analysis) => analysis,
        Err(docs) => return docs.run(Cli::command()),
    };
    match diagnose::analyze::run(&analysis) {
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
