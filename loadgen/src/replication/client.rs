//! `loadgen replica-client`: a plain client that streams deterministic blocks to one replica
//! and prints a JSON summary (for tests and server measurements; hidden from `--help`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::files::read_token;
use crate::serve::{parse_seconds, usage};
use replica::client::{BlockingClient, ClientOptions, Event, SubmitError};
use replica::protocol::{AckStatus, BLOCK_ALIGN, MAX_PAYLOAD, valid_volume};

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
}
