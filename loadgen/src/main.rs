use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// io_uring load generator for networked storage.
#[derive(Parser, Debug)]
#[command(name = "loadgen", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a workload with fio's options or job files (`loadgen run --help` lists them).
    #[command(disable_help_flag = true)]
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { args } => loadgen::run::run(&args, None),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("loadgen: error: {}", f.message());
            ExitCode::from(f.exit_code())
        }
    }
}
