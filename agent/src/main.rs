use std::process::ExitCode;

use clap::CommandFactory;
use stornet_agent::config::Config;
use stornet_agent::daemon::cli::{self, Command, EXIT_USAGE};
use stornet_agent::daemon::{check, logging, service, snapshot};

fn main() -> ExitCode {
    let args = match cli::parse() {
        Ok(a) => a,
        Err(code) => return code,
    };
    logging::init(args.log_level, args.log_format);
    let mut config = match &args.config_file {
        None => Config::default(),
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                logging::stderr_line(&format!("stornet-agent: {e}"));
                return ExitCode::from(EXIT_USAGE);
            }
        },
    };
    config.apply_collector_flags(&args.collectors);
    match args.command {
        None => service::run(&args, config),
        Some(Command::Check) => check::run(&config),
        Some(Command::Snapshot { interval, format }) => snapshot::run(&config, interval, format),
        Some(Command::GenerateDocs(docs)) => docs.run(cli::Cli::command()),
    }
}
