//! Command-line front ends: `loadgen serve`, and `loadgen replica-client`, a plain client
//! that streams deterministic blocks to one replica (for tests and server measurements; it
//! is hidden from `--help`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::files::read_token;
use crate::logging::{LogFormat, LogLevel};
use replica::client::{BlockingClient, ClientOptions, Event, SubmitError};
use replica::protocol::{AckStatus, BLOCK_ALIGN, MAX_PAYLOAD, valid_volume};
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

#[derive(clap::Args, Debug)]
pub struct ReplicaClientArgs {
    /// The replica, as ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    pub connect: SocketAddr,
    /// Volume (file name on the replica) to write.
    #[arg(long, default_value = "replica-client")]
    pub volume: String,
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Block size in bytes (a multiple of 512, at most 1 MiB).
    #[arg(long, default_value_t = 4096)]
    pub bs: usize,
    /// Number of writes.
    #[arg(long, default_value_t = 1024)]
    pub count: u64,
    /// Writes outstanding at once.
    #[arg(long, default_value_t = 16)]
    pub iodepth: usize,
    /// Span of offsets: write i goes to (i * bs) mod size. Defaults to count * bs.
    #[arg(long)]
    pub size: Option<u64>,
    /// Seed of the block contents (see `block_pattern`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds the handshake and each write may wait for the replica.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_seconds)]
    pub timeout: Duration,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err(format!("{s}: give more than 0 and at most 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

fn usage(msg: String) -> ExitCode {
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
) -> Result<
    (
        std::sync::Arc<crate::cluster::service::JobService>,
        std::net::TcpListener,
    ),
    String,
> {
    if addr == args.listen {
        return Err(format!(
            "--jobs-listen {addr}: the replication service listens there (give each its own port)"
        ));
    }
    let confinement = crate::cluster::policy::Confinement::new(
        std::slice::from_ref(&args.dir),
        &args.allow_device,
    )?;
    if let Some(a) = &args.agent {
        crate::options::values::AgentSpec::parse(a).map_err(|e| format!("--agent {e}"))?;
    }
    let listener =
        std::net::TcpListener::bind(addr).map_err(|e| format!("--jobs-listen {addr}: {e}"))?;
    let service = crate::cluster::service::JobService::new(
        confinement,
        token,
        args.token_file.clone(),
        args.agent.clone(),
        args.listen,
    );
    Ok((std::sync::Arc::new(service), listener))
}

/// The content `replica-client` writes at `offset`: bytes 0..8 hold the offset and 8..16 the
/// seed (little-endian), then 8-byte little-endian words of splitmix64 seeded with
/// `seed ^ offset`. Anyone can recompute it to check a replica's file.
pub fn block_pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut state = seed ^ offset;
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let word = match i {
            0 => offset,
            1 => seed,
            _ => {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            }
        };
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn replica_client(args: ReplicaClientArgs) -> ExitCode {
    if args.bs == 0
        || !(args.bs as u64).is_multiple_of(BLOCK_ALIGN)
        || args.bs > MAX_PAYLOAD as usize
    {
        return usage(format!(
            "--bs {}: must be a multiple of {BLOCK_ALIGN} between {BLOCK_ALIGN} and {MAX_PAYLOAD}",
            args.bs
        ));
    }
    if args.iodepth == 0 {
        return usage("--iodepth must be at least 1".into());
    }
    if !valid_volume(&args.volume) {
        return usage(format!("--volume {:?}: not a plain file name", args.volume));
    }
    let size = args.size.unwrap_or(args.count * args.bs as u64);
    if size < args.bs as u64 || !size.is_multiple_of(args.bs as u64) {
        return usage(format!("--size {size}: must be a multiple of --bs"));
    }
    let token = match args.token_file.as_deref().map(read_token).transpose() {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => return usage(e),
    };
    let opts = ClientOptions {
        token,
        volume: args.volume.clone(),
        timeout: args.timeout,
    };
    let fail = |msg: String| {
        crate::note!("loadgen replica-client: {msg}");
        ExitCode::FAILURE
    };
    let start = Instant::now();
    let mut client = match BlockingClient::connect(args.connect, &opts) {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let mut rtts_us: Vec<u32> = Vec::with_capacity(args.count.min(1 << 22) as usize);
    let mut block = vec![0u8; args.bs];
    let mut first_error: Option<(u64, AckStatus)> = None;
    let (mut next, mut done) = (0u64, 0u64);
    while done < args.count {
        while next < args.count && client.conn().outstanding() < args.iodepth {
            let offset = (next * args.bs as u64) % size;
            block_pattern(args.seed, offset, &mut block);
            match client.submit(next, offset, &block) {
                Ok(()) => next += 1,
                Err(SubmitError::Failed(e)) => return fail(e.to_string()),
                Err(e) => return fail(e.to_string()),
            }
        }
        match client.next_event() {
            Ok(Event::Acked {
                id,
                sent_at,
                status,
            }) => {
                done += 1;
                let rtt = sent_at.elapsed().as_micros().min(u32::MAX as u128) as u32;
                rtts_us.push(rtt);
                if status != AckStatus::Ok && first_error.is_none() {
                    first_error = Some((id, status));
                }
            }
            Ok(Event::Ready { .. }) => {}
            Err(e) => return fail(e.to_string()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    rtts_us.sort_unstable();
    let stats = client.conn().stats();
    let summary = serde_json::json!({
        "replica": args.connect.to_string(),
        "volume": args.volume,
        "bs": args.bs,
        "iodepth": args.iodepth,
        "writes": stats.writes,
        "acked_ok": stats.acked_ok,
        "failed": stats.failed,
        "seconds": elapsed,
        "acks_per_second": done as f64 / elapsed,
        "rtt_us": {
            "p50": percentile(&rtts_us, 50.0),
            "p99": percentile(&rtts_us, 99.0),
            "max": rtts_us.last().copied().unwrap_or(0),
        },
    });
    println!("{summary}");
    if let Some((id, status)) = first_error {
        return fail(format!(
            "replica {} failed {} of {} writes; the first, request {id}: {status}",
            args.connect, stats.failed, stats.writes
        ));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_header_and_determinism() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        block_pattern(7, 8192, &mut a);
        block_pattern(7, 8192, &mut b);
        assert_eq!(a, b);
        assert_eq!(&a[0..8], &8192u64.to_le_bytes());
        assert_eq!(&a[8..16], &7u64.to_le_bytes());
        block_pattern(7, 4096, &mut b);
        assert_ne!(a[16..], b[16..]);
    }

    #[test]
    fn percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[5], 99.0), 5);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        let e = parse_seconds("0").unwrap_err();
        assert_eq!(e, "0: give more than 0 and at most 86400 seconds");
        assert!(parse_seconds("x").is_err());
        assert!(parse_seconds("NaN").is_err());
    }
}
