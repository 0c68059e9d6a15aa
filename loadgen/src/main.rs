use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod replica;

/// io_uring load generator for networked storage.
#[derive(Parser, Debug)]
#[command(name = "loadgen", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve as a replica: write the blocks clients send into files in a directory.
    Serve(replica::cli::ServeArgs),
    /// Stream deterministic writes to one replica and print a JSON summary.
    #[command(hide = true)]
    ReplicaClient(replica::cli::ReplicaClientArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(args) => replica::cli::serve(args),
        Command::ReplicaClient(args) => replica::cli::replica_client(args),
    }
}
