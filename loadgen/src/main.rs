use std::process::ExitCode;

use clap::{Parser, Subcommand};
use loadgen::replication;

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
    /// Name the root cause of a latency rise from a run record or from Prometheus.
    Analyze(loadgen::analyze::AnalyzeArgs),
    /// Serve as a replica: write the blocks clients send into files in a directory.
    Serve(replication::cli::ServeArgs),
    /// Stream deterministic writes to one replica and print a JSON summary.
    #[command(hide = true)]
    ReplicaClient(replication::cli::ReplicaClientArgs),
    /// Run a job order `loadgen serve` checked and hands over (its own use).
    #[command(hide = true)]
    JobOrder,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run { args } => loadgen::run::run(&args, None),
        Command::Analyze(args) => loadgen::analyze::run(&args),
        Command::Serve(args) => return replication::cli::serve(args),
        Command::ReplicaClient(args) => return replication::cli::replica_client(args),
        Command::JobOrder => loadgen::run::job_order(),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            loadgen::note!(
                "loadgen: error: {}",
                loadgen::console::plain(&f.message(), 4000)
            );
            ExitCode::from(f.exit_code())
        }
    }
}
