use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use stornet_agent::{agent::Agent, cli, server};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = cli::Cli::parse();
    let addr = match cli::parse_listen_address(&args.listen_address) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stornet-agent: {e:#}");
            return ExitCode::from(2);
        }
    };
    let config = match cli::load_config(args.config_file.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stornet-agent: {e:#}");
            return ExitCode::from(2);
        }
    };
    let listener = match server::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("stornet-agent: {e:#}");
            return ExitCode::from(2);
        }
    };
    let agent = Arc::new(Agent::start(&config));
    let shutdown = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    match server::serve(listener, agent, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stornet-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}
