//! The agent as a long-running service: check the settings, bind, attach, tell systemd it is
//! ready, serve until SIGTERM/SIGINT, then detach and exit.
//!
//! Every usage or configuration problem is found before anything is attached. The probes are
//! fd-based (no pinning), so the kernel removes them when the process ends, also on SIGKILL.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{debug, error, info, warn};

use super::cli::{Cli, EXIT_USAGE, UsageError};
use super::systemd;
use crate::agent::Agent;
use crate::config::Config;
use crate::web::config::WebConfig;
use crate::web::server;
use crate::web::watch::WebConfigSource;

/// How long in-flight work may delay the exit after a signal.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

pub fn run(cli: &Cli, config: Config) -> ExitCode {
    raise_open_files_limit();
    return_large_frees();
    let (listeners, web) = match prepare(cli) {
        Ok(p) => p,
        Err(e) => {
            super::logging::stderr_line(&format!("stornet-agent: {e}"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(8)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let web = Arc::new(WebConfigSource::new(cli.web_config_file.clone(), web));
    let result = runtime.block_on(serve(
        listeners,
        web,
        cli.telemetry_path.clone(),
        cli.max_connections as usize,
        config,
    ));
    // Connection tasks still holding the agent are dropped here; so are the probes.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    match result {
        Ok(()) => {
            info!("probes detached, exiting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!(error = %format!("{e:#}"), "stopped");
            ExitCode::FAILURE
        }
    }
}

/// Makes the allocator give freed answers back to the system at once: each scrape's text and
/// body are large, short-lived buffers, and glibc's default (a threshold that grows after
/// the first such free, and an arena per thread) keeps them as heap that many clients at
/// once can only grow.
fn return_large_frees() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Lifts the soft limit on open files to the hard one: the default soft limit of 1024 is
/// less than the probes' descriptors plus `--web.max-connections` clients.
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a plain struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= lim.rlim_max {
            return;
        }
        let from = lim.rlim_cur;
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            lim.rlim_cur = from;
        }
        debug!(from, to = lim.rlim_cur, "open files limit");
    }
}

/// Everything that can be wrong with flags and files, checked before any probe is loaded.
fn prepare(cli: &Cli) -> Result<(Vec<std::net::TcpListener>, WebConfig), UsageError> {
    let web = match &cli.web_config_file {
        Some(path) => WebConfig::load(path).map_err(UsageError)?,
        None => WebConfig::default(),
    };
    let listeners = cli
        .listen_address
        .iter()
        .map(|a| listen(a))
        .collect::<Result<_, _>>()?;
    Ok((listeners, web))
}

fn listen(address: &str) -> Result<std::net::TcpListener, UsageError> {
    let addr = super::cli::parse_listen_address(address)?;
    let listener = std::net::TcpListener::bind(addr)
        .or_else(|e| {
            // `:PORT` means every address; on a host without IPv6 that is every IPv4 one.
            let v6_missing = matches!(
                e.raw_os_error(),
                Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)
            );
            if address.starts_with(':') && v6_missing {
                std::net::TcpListener::bind(("0.0.0.0", addr.port()))
            } else {
                Err(e)
            }
        })
        .map_err(|e| {
            UsageError(format!(
                "--web.listen-address {address:?}: cannot listen on {addr}: {e}"
            ))
        })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| UsageError(format!("listening socket: {e}")))?;
    Ok(listener)
}

async fn serve(
    listeners: Vec<std::net::TcpListener>,
    web: Arc<WebConfigSource>,
    telemetry_path: String,
    max_connections: usize,
    config: Config,
) -> Result<()> {
    // Signals are caught from here on, so one that arrives while probes attach still leads to
    // a clean exit.
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let listeners = listeners
        .into_iter()
        .map(tokio::net::TcpListener::from_std)
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut starting = tokio::task::spawn_blocking(move || {
        Agent::start(&config, Some(crate::collectors::background::INTERVAL))
    });
    let agent = tokio::select! {
        a = &mut starting => Arc::new(a.context("starting probes")?),
        _ = term.recv() => return Ok(()),
        _ = int.recv() => return Ok(()),
    };
    let up = agent.probes.status.iter().filter(|s| s.up).count();
    let total = agent.probes.status.len();
    if up < total {
        warn!(
            up,
            total, "running degraded: some probes are down (see / or stornet_probe_up)"
        );
    }
    notify(&format!(
        "READY=1\nSTATUS=serving, {up} of {total} probes up"
    ));
    if let Some(every) = systemd::watchdog_interval() {
        info!(interval = ?every, "systemd watchdog on");
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                notify("WATCHDOG=1");
            }
        });
    }
    let shutdown = async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!(signal = name, "stopping");
        notify("STOPPING=1");
    };
    let endpoint = server::Endpoint {
        agent,
        web,
        telemetry_path,
    };
    server::serve(listeners, endpoint, max_connections, shutdown).await
}

fn notify(state: &str) {
    if let Err(e) = systemd::notify(state) {
        warn!(error = %e, "systemd notification failed");
    }
}
