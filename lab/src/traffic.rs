//! TCP traffic between lab namespaces: bulk transfers and idle connections. Sockets are opened
//! inside the namespaces (on a thread that entered them) and only to lab addresses.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::netns::{Netns, is_lab_addr};

/// A listener on an ephemeral port of `addr`, inside `ns`.
pub fn listen(ns: &Netns, addr: Ipv4Addr) -> Result<TcpListener> {
    ensure!(is_lab_addr(addr), "{addr} is outside 198.18.0.0/15");
    ns.enter(|| Ok(TcpListener::bind((addr, 0))?))
}

/// A connection from inside `ns` to `to`.
pub fn connect(ns: &Netns, to: SocketAddr) -> Result<TcpStream> {
    let SocketAddr::V4(v4) = to else {
        anyhow::bail!("lab traffic is IPv4")
    };
    ensure!(is_lab_addr(*v4.ip()), "{to} is outside 198.18.0.0/15");
    ns.enter(|| {
        TcpStream::connect_timeout(&to, Duration::from_secs(5))
            .with_context(|| format!("connecting to {to} from {}", ns.name))
    })
}

/// A bulk transfer: `streams` connections from one namespace to another, each writing as
/// fast as it can until `finish`.
pub struct BulkTransfer {
    senders: Vec<JoinHandle<Result<u64>>>,
    receivers: Vec<JoinHandle<Result<u64>>>,
}

impl BulkTransfer {
    /// Starts sending from `from` to a listener at `to_addr` in `to`, for `duration`.
    pub fn start(
        from: &Netns,
        to: &Netns,
        to_addr: Ipv4Addr,
        streams: usize,
        duration: Duration,
    ) -> Result<BulkTransfer> {
        let listener = listen(to, to_addr)?;
        let target = listener.local_addr()?;
        let mut t = BulkTransfer {
            senders: Vec::new(),
            receivers: Vec::new(),
        };
        for _ in 0..streams {
            let out = connect(from, target)?;
            let (inp, _) = listener.accept()?;
            t.receivers.push(std::thread::spawn(move || drain(inp)));
            t.senders
                .push(std::thread::spawn(move || send_for(out, duration)));
        }
        Ok(t)
    }

    /// Waits until every sender is done and every receiver has read all data and the end of
    /// stream; returns the bytes delivered.
    pub fn finish(self) -> Result<u64> {
        let mut sent = 0;
        for s in self.senders {
            sent += s.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
        }
        let mut got = 0;
        for r in self.receivers {
            got += r
                .join()
                .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
        }
        ensure!(got == sent, "sent {sent} bytes, {got} arrived");
        Ok(got)
    }
}

fn send_for(mut s: TcpStream, duration: Duration) -> Result<u64> {
    s.set_write_timeout(Some(Duration::from_secs(30)))?;
    let buf = vec![0x5a; 64 << 10];
    let end = Instant::now() + duration;
    let mut n = 0;
    while Instant::now() < end {
        s.write_all(&buf)?;
        n += buf.len() as u64;
    }
    s.shutdown(Shutdown::Write)?;
    // Wait for the receiver's end of stream: everything sent has then been delivered.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)?;
    Ok(n)
}

fn drain(mut s: TcpStream) -> Result<u64> {
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut buf = vec![0u8; 256 << 10];
    let mut n = 0;
    loop {
        let r = s.read(&mut buf)?;
        if r == 0 {
            break;
        }
        n += r as u64;
    }
    s.shutdown(Shutdown::Write)?;
    Ok(n)
}

/// `n` established connections from `from` to a listener in `to`, each having exchanged a few
/// request/response round trips (so the kernel has RTT samples), then left idle. Closed on
/// drop.
pub struct IdleConnections {
    pub client: Vec<TcpStream>,
    pub server: Vec<TcpStream>,
}

impl IdleConnections {
    pub fn open(from: &Netns, to: &Netns, to_addr: Ipv4Addr, n: usize) -> Result<Self> {
        let listener = listen(to, to_addr)?;
        let target = listener.local_addr()?;
        let mut c = IdleConnections {
            client: Vec::new(),
            server: Vec::new(),
        };
        for _ in 0..n {
            let mut out = connect(from, target)?;
            let (mut inp, _) = listener.accept()?;
            for _ in 0..5 {
                let mut b = [0u8; 64];
                out.write_all(&b)?;
                inp.read_exact(&mut b)?;
                inp.write_all(&b)?;
                out.read_exact(&mut b)?;
            }
            c.client.push(out);
            c.server.push(inp);
        }
        // Let delayed ACKs go out, so no socket's RTT changes after this.
        std::thread::sleep(Duration::from_millis(300));
        Ok(c)
    }
}
