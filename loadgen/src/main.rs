use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use loadgen::{replication, serve};

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
    /// Now `stornet analyze` (and `stornet watch`): the same options and output.
    Analyze(diagnose::cli::AnalyzeArgs),
    /// Serve as a replica: write the blocks clients send into files in a directory.
    Serve(serve::ServeArgs),
    /// Stream deterministic writes to one replica and print a JSON summary.
    #[command(hide = true)]
    ReplicaClient(replication::client::ReplicaClientArgs),
    /// Run a job order `loadgen serve` checked and hands over (its own use).
    #[command(hide = true)]
    JobOrder,
    /// Write the man pages and shell completions into a directory (for packaging).
    #[command(hide = true)]
    GenerateDocs(cli_docs::GenerateDocs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run { args } => loadgen::run::run(&args, None),
        Command::Analyze(args) => {
            let now = if args.watch { "watch" } else { "analyze" };
            loadgen::note!(
                "loadgen: note: `loadgen analyze` is now `stornet {now}` (same options, same output)"
            );
            diagnose::analyze::run(&args).map_err(Into::into)
        }
        Command::Serve(args) => return serve::serve(args),
        Command::ReplicaClient(args) => return replication::client::replica_client(args),
        Command::JobOrder => loadgen::run::job_order(),
        Command::GenerateDocs(docs) => {
            // `run` parses its own options (fio's); its page and completions list them.
            let cli = Cli::command().mut_subcommand("run", loadgen::options::table::command);
            return docs.run(cli);
        }
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
