//! `loadgen serve`: the services a host runs for others. The replica server (the `replica`
//! crate: writes the blocks clients send into files under `--dir`) always, and with
//! `--jobs-listen` the job service ([`jobs`]: checks a controller's job order, confines it
//! to `--dir` and `--allow-device`, runs it, reports back). This module is their entry point:
//! the options, the checks before anything listens, the process set-up both share.

pub mod jobs;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::files::read_token;
use crate::logging::{LogFormat, LogLevel};
use replica::server::{Server, ServerConfig};

/// Usage and configuration errors.
const EXIT_USAGE: u8 = 2;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address and port to listen on, e.g. 0.0.0.0:7480.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Directory of the replica files: a connection for volume V writes DIR/V.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// File holding the token clients must present (surrounding whitespace is ignored);
    /// without it any client is accepted.
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Acknowledge a write as soon as it arrives intact, not after it is written.
    #[arg(long)]
    pub ack_on_receive: bool,
    /// Seconds one message may take to arrive once its first byte has (also the time a new
    /// connection has for its handshake); slower peers are disconnected.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub frame_timeout: Duration,
    /// Seconds a connection may go without a message before it is closed (TCP keepalive
    /// also notices a peer that vanished, within about a minute).
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = parse_seconds)]
    pub idle_timeout: Duration,
    /// Most connections streaming at once; more are refused at their handshake.
    /// Connections still in their handshake do not count.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_connections: usize,
    /// Also take job orders from `loadgen run --client` on this address (a port of its own:
    /// the replication port speaks the replica protocol only). Jobs run in --dir.
    #[arg(long, value_name = "ADDR:PORT")]
    pub jobs_listen: Option<SocketAddr>,
    /// A block device job orders may use (repeatable); without it, only files in --dir.
    #[arg(long, value_name = "DEVICE", requires = "jobs_listen")]
    pub allow_device: Vec<PathBuf>,
    /// This host's stornet-agent, sampled into the run record of every job order
    /// (e.g. http://198.18.0.1:9477).
    #[arg(long, value_name = "URL", requires = "jobs_listen")]
    pub agent: Option<String>,
    /// Only log messages of this level or above.
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,
    /// Log line format: logfmt (`ts=… level=… msg=… key=value`) or one JSON object per line.
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt)]
    pub log_format: LogFormat,
}

pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err(format!("{s}: give more than 0 and at most 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

pub(crate) fn usage(msg: String) -> ExitCode {
    crate::note!("loadgen: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Lifts the soft limit on open files to the hard one, as the agent does: the default soft
/// limit of 1024 is less than `--max-connections` replication clients and the job service's
/// connections together.
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a plain struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Opens /dev/null on any of descriptors 0–2 that is closed, so that no file a job uses is
/// ever given one of their numbers (a child's standard streams are set up over them).
fn fill_standard_descriptors() {
    for fd in 0..3 {
        // SAFETY: fcntl(F_GETFD) only asks; open returns the lowest free number, this one.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) < 0 {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

pub fn serve(args: ServeArgs) -> ExitCode {
    fill_standard_descriptors();
    raise_open_files_limit();
    let token = match args.token_file.as_deref().map(read_token).transpose() {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    if args.max_connections == 0 {
        return usage("--max-connections must be at least 1".into());
    }
    let jobs = match args.jobs_listen {
        Some(addr) => match jobs_service(&args, addr, token.clone()) {
            Ok(j) => Some(j),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let config = ServerConfig {
        listen: args.listen,
        dir: args.dir,
        token,
        ack_on_receive: args.ack_on_receive,
        frame_timeout: args.frame_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: args.max_connections,
    };
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    // Flag and setup errors above are one plain line, as for every loadgen command; from
    // here on the server logs.
    crate::logging::init(args.log_level, args.log_format);
    if let Some((service, listener)) = jobs {
        tracing::info!(listen = %args.jobs_listen.map(|a| a.to_string()).unwrap_or_default(), "taking job orders");
        if let Err(e) = service.spawn(listener) {
            tracing::error!(error = %e, "the job service did not start");
            return ExitCode::FAILURE;
        }
    }
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the server stopped");
            ExitCode::FAILURE
        }
    }
}

/// The job service of `serve --jobs-listen`, its options checked and its port bound.
fn jobs_service(
    args: &ServeArgs,
    addr: SocketAddr,
    token: Option<Vec<u8>>,
) -> Result<(std::sync::Arc<jobs::JobService>, std::net::TcpListener), String> {
    if addr == args.listen {
        return Err(format!(
            "--jobs-listen {addr}: the replication service listens there (give each its own port)"
        ));
    }
    let confinement =
        jobs::policy::Confinement::new(std::slice::from_ref(&args.dir), &args.allow_device)?;
    if let Some(a) = &args.agent {
        crate::options::values::AgentSpec::parse(a).map_err(|e| format!("--agent {e}"))?;
    }
    let listener =
        std::net::TcpListener::bind(addr).map_err(|e| format!("--jobs-listen {addr}: {e}"))?;
    let service = jobs::JobService::new(
        confinement,
        token,
        args.token_file.clone(),
        args.agent.clone(),
        args.listen,
    );
    Ok((std::sync::Arc::new(service), listener))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        let e = parse_seconds("0").unwrap_err();
        assert_eq!(e, "0: give more than 0 and at most 86400 seconds");
        assert!(parse_seconds("x").is_err());
        assert!(parse_seconds("NaN").is_err());
    }
}
