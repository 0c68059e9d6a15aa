//! The send side of TCP per peer (`TCP_INFO` through sock_diag) against `ss -tin` on the same
//! sockets. Three connections from host a to host b, whose switch port runs at 40 Mbit/s
//! with a 4 MiB buffer (the link at its rate, dropping nothing): one whose writer outruns the
//! link (bytes wait unsent, the socket is busy), one whose send buffer is too small for the
//! path (it sends all it holds and waits for room: limited by its send buffer), one whose
//! reader never reads (limited by the receive window). While data flows, the agent's counters lie between two
//! reads of `ss`; once every reader has stopped, the connections stand still and the gauges
//! equal `ss` exactly.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use stornet_lab::agent::AgentProcess;
use stornet_lab::lab::{Host, HostSpec, Lab, Shaping};
use stornet_lab::metrics::{Sample, sum};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::ss::SsSocket;
use stornet_lab::traffic::{connect, listen};

use crate::net_support::agent_watching;

/// A connection from host a to host b: a writer that writes 64 KiB at a time until the
/// connection is shut, and a reader that reads until told to stop (or never).
struct Flow {
    out: TcpStream,
    inp: TcpStream,
    reading: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Flow {
    fn start(
        from: &Host,
        listener: &std::net::TcpListener,
        sndbuf: Option<i32>,
        read: bool,
    ) -> Flow {
        let out = connect(&from.ns, listener.local_addr().unwrap()).expect("connect");
        let (inp, _) = listener.accept().expect("accept");
        if let Some(bytes) = sndbuf {
            // A send buffer smaller than the path holds, and Reno (built into every kernel),
            // whose window grows past what the buffer can fill: the socket sends all it
            // holds and waits for the writer. (BBR sizes its window from the path's minimum
            // RTT and would stay limited by its window instead.)
            setsockopt(
                &out,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &bytes.to_ne_bytes(),
            );
            setsockopt(&out, libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"reno");
        }
        let reading = Arc::new(AtomicBool::new(read));
        let mut w = out.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let buf = vec![0x5a; 64 << 10];
            while w.write_all(&buf).is_ok() {}
        });
        let mut r = inp.try_clone().unwrap();
        r.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let go_on = reading.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 << 10];
            while go_on.load(Ordering::Relaxed) {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
        });
        Flow {
            out,
            inp,
            reading,
            threads: vec![writer, reader],
        }
    }

    fn stop_reading(&self) {
        self.reading.store(false, Ordering::Relaxed);
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.stop_reading();
        let _ = self.out.shutdown(Shutdown::Both);
        let _ = self.inp.shutdown(Shutdown::Both);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn setsockopt(s: &TcpStream, level: i32, name: i32, value: &[u8]) {
    // SAFETY: setsockopt with a buffer of the given length on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            value.as_ptr() as *const libc::c_void,
            value.len() as libc::socklen_t,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt {level}/{name}: {}",
        std::io::Error::last_os_error()
    );
}

/// `ss` before a scrape, the scrape, `ss` after it.
struct Reading {
    before: Vec<SsSocket>,
    scrape: Vec<Sample>,
    after: Vec<SsSocket>,
}

fn read(a: &Host, b: &Host, agent: &AgentProcess) -> Reading {
    let before = a.ns.ss_sockets(b.addr).expect("ss");
    let scrape = agent.scrape().expect("scrape");
    let after = a.ns.ss_sockets(b.addr).expect("ss");
    Reading {
        before,
        scrape,
        after,
    }
}

type SsField = fn(&SsSocket) -> u64;

/// The counters: the agent's metric, its unit in `ss`'s numbers, and `ss`'s field.
const COUNTERS: &[(&str, f64, SsField)] = &[
    ("stornet_tcp_busy_seconds_total", 1e-3, |s| s.busy_ms),
    (
        "stornet_tcp_receive_window_limited_seconds_total",
        1e-3,
        |s| s.rwnd_limited_ms,
    ),
    ("stornet_tcp_send_buffer_limited_seconds_total", 1e-3, |s| {
        s.sndbuf_limited_ms
    }),
    ("stornet_tcp_delivered_segments_total", 1.0, |s| s.delivered),
];

impl Reading {
    fn agent(&self, peer: &str, name: &str) -> f64 {
        sum(&self.scrape, name, &[("peer", peer)])
    }

    /// Each counter of the agent lies between `ss`'s sums before and after the scrape
    /// (`ss` truncates times to whole milliseconds: up to one more per socket).
    fn counters_between(&self, peer: &str) {
        for (name, unit, field) in COUNTERS {
            let lo: u64 = self.before.iter().map(field).sum();
            let hi: u64 = self.after.iter().map(field).sum();
            let slack = if *unit < 1.0 {
                self.after.len() as u64
            } else {
                0
            };
            let got = self.agent(peer, name);
            eprintln!("{name}: agent {got}, ss [{lo}, {hi}] x {unit}");
            assert!(
                got >= lo as f64 * unit - 1e-9 && got <= (hi + slack) as f64 * unit + 1e-9,
                "{name}: agent {got} outside ss's [{lo}, {hi}] x {unit}"
            );
        }
    }

    /// Whether the connections stood still between the two `ss` reads.
    fn still(&self) -> bool {
        let gauges = |v: &[SsSocket]| -> Vec<(String, u64, u64, u64, bool)> {
            let mut g: Vec<_> = v
                .iter()
                .map(|s| {
                    (
                        s.local.clone(),
                        s.send_q,
                        s.notsent,
                        s.delivery_rate_bps as u64,
                        s.app_limited,
                    )
                })
                .collect();
            g.sort();
            g
        };
        gauges(&self.before) == gauges(&self.after)
    }
}

#[test]
fn tcp_send_signals_match_ss() {
    let test = "tcp_send_signals_match_ss";
    if !require_root(test) || !require_tool(test, "ss") || !require_tool(test, "tc") {
        return;
    }
    let lab = Lab::new(
        "sendq",
        &[
            HostSpec::new("a"),
            HostSpec::new("b").shaped(Shaping::new("40mbit", "32kb", "4mb")),
        ],
    )
    .expect("lab");
    let (a, b) = (lab.host("a"), lab.host("b"));
    let agent = agent_watching(&[&a.ns.name]);
    let listener = listen(&b.ns, b.addr).expect("listener");
    let flows = [
        Flow::start(a, &listener, None, true),
        Flow::start(a, &listener, Some(16 << 10), true),
        Flow::start(a, &listener, None, false),
    ];
    let peer = b.addr.to_string();
    std::thread::sleep(Duration::from_secs(2));

    // While the data flows: the counters.
    let flowing = read(a, b, &agent);
    assert_eq!(flowing.before.len(), 3, "ss sees the connections");
    assert_eq!(flowing.agent(&peer, "stornet_tcp_sockets"), 3.0);
    flowing.counters_between(&peer);

    // Every reader stops: the windows close and the connections stand still.
    for f in &flows {
        f.stop_reading();
    }
    let mut still = None;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        let r = read(a, b, &agent);
        if r.still() {
            still = Some(r);
            break;
        }
    }
    let r = still.expect("the connections never stood still for a scrape");
    let ss = &r.after;
    let send_q: u64 = ss.iter().map(|s| s.send_q).sum();
    let notsent: u64 = ss.iter().map(|s| s.notsent).sum();
    // The agent sums the delivery rates of sockets with data not yet acknowledged, and
    // counts those whose latest sample the application limited.
    let queued: Vec<&SsSocket> = ss.iter().filter(|s| s.send_q > 0).collect();
    let app_limited = queued.iter().filter(|s| s.app_limited).count();
    let rate_bps: f64 = queued.iter().map(|s| s.delivery_rate_bps).sum();
    let rate_step: f64 = queued.iter().map(|s| s.delivery_rate_step_bps).sum();
    let agent_send_q = r.agent(&peer, "stornet_tcp_send_queue_bytes");
    let agent_notsent = r.agent(&peer, "stornet_tcp_notsent_bytes");
    let agent_rate = r.agent(&peer, "stornet_tcp_delivery_rate_bytes_per_second");
    let agent_app_limited = r.agent(&peer, "stornet_tcp_app_limited_sockets");
    eprintln!(
        "standing still: send queue agent {agent_send_q} ss {send_q}; notsent agent \
         {agent_notsent} ss {notsent}; delivery rate agent {agent_rate} B/s, ss {rate_bps} bit/s; \
         app-limited agent {agent_app_limited} ss {app_limited}"
    );
    assert_eq!(agent_send_q, send_q as f64, "send queue vs ss Send-Q");
    assert_eq!(agent_notsent, notsent as f64, "notsent vs ss");
    assert!(
        (agent_rate * 8.0 - rate_bps).abs() <= rate_step / 2.0 + 1e-6,
        "delivery rate {agent_rate} B/s vs ss {rate_bps} bit/s"
    );
    assert_eq!(
        agent_app_limited, app_limited as f64,
        "app-limited sockets vs ss"
    );
    r.counters_between(&peer);

    // What each connection was built to show.
    // Behind closed windows, everything written waits unsent.
    assert!(
        notsent > 0 && send_q >= notsent,
        "bytes wait unsent: {ss:?}"
    );
    assert!(agent_rate > 0.0, "a delivery rate");
    for (name, _, _) in COUNTERS {
        assert!(r.agent(&peer, name) > 0.0, "{name} rose: {ss:?}");
    }
    drop(flows);
}
