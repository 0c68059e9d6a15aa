//! The replication protocol from both sides: a server's decoder fed a client's bytes (hello,
//! then frames), and a client's connection fed a server's bytes (hello ack, then acks), in
//! pieces whose size the first byte chooses.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use replica::client::{ClientOptions, ReplicaConn};
use replica::decoder::Decoder;

fn pieces(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((n, rest)) => (*n as usize % 97 + 1, rest),
        None => (1, data),
    }
}

fn server_side(data: &[u8]) {
    let (step, bytes) = pieces(data);
    let mut d = Decoder::new(64 << 10);
    let mut hello_done = false;
    for chunk in bytes.chunks(step) {
        let room = d.recv_buf();
        let n = room.len().min(chunk.len());
        room[..n].copy_from_slice(&chunk[..n]);
        d.filled(n);
        loop {
            if !hello_done {
                match d.next_hello() {
                    Ok(Some(h)) => {
                        let _ = h.verify(Some(b"token"));
                        hello_done = true;
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            } else {
                match d.next_frame() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
        }
    }
    let _ = if hello_done {
        d.finish()
    } else {
        d.finish_hello()
    };
}

fn client_side(data: &[u8]) {
    let (step, bytes) = pieces(data);
    let opts = ClientOptions {
        token: b"token".to_vec(),
        volume: "vol".into(),
        timeout: Duration::from_secs(5),
    };
    let now = Instant::now();
    let Ok(mut c) = ReplicaConn::new("fuzz", &opts, now) else {
        return;
    };
    let mut next_id = 0u64;
    for chunk in bytes.chunks(step) {
        // Writes outstanding for acks to match (ids 0, 1, ...).
        if c.is_ready() && c.outstanding() < 4 {
            let _ = c.start_write(next_id, next_id * 4096, &[0u8; 4096], now);
            next_id += 1;
        }
        let room = c.recv_buf();
        let n = room.len().min(chunk.len());
        room[..n].copy_from_slice(&chunk[..n]);
        if c.received(n).is_err() {
            return;
        }
        while c.next_event().is_some() {}
    }
    let _ = c.check_timeouts(now + Duration::from_secs(10));
}

fuzz_target!(|data: &[u8]| {
    server_side(data);
    client_side(data);
});
