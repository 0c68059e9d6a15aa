//! The host side of the job service (`loadgen serve --jobs-listen`): one controller's job at
//! a time.
//!
//! Until its hello carries the token a connection costs a few KiB: its first line may be
//! short, it has one deadline for the whole handshake, and at the cap on connections a new
//! one pushes out one that has not shown the token, of the address holding the most such
//! connections ([`victim`]). A job order is parsed and checked
//! here, its job files taken from the order alone, its targets opened beneath `--dir`
//! ([`policy`], [`confine`]); it then runs as a child process ([`job`], handed an [`order`]) handed the checked
//! plan and the opened descriptors, so nothing is read or resolved twice. The child lays
//! out the files, says `ready` and starts at the instant the controller names; while it runs
//! the controller hears from the host every second and may stop it (SIGINT: the job reports
//! what it ran). A controller that goes away, or vanishes without a word (keepalive), stops
//! it too. No scratch files: the child's messages and run record come back through pipes.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub mod confine;
mod job;
pub mod order;
pub mod policy;

use crate::cluster::protocol::{self, Deadline, JobFile, Msg};
use crate::console::plain;
use crate::options::Plan;
use crate::options::parse::{JobFiles, Parsed, parse_args_from};
use job::{Job, pipe, watch_controller};
use policy::{Confinement, Targets};

/// From a connection to its hello.
const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// From the welcome to the job order (the controller measures the clock meanwhile).
const ORDER_WITHIN: Duration = Duration::from_secs(120);
/// From `ready` to `start`: the controller waits up to 600 s for every host's layout.
const UNTIL_START: Duration = Duration::from_secs(660);
/// Connections at once; at the cap a new one closes one that has not shown the token.
pub const MAX_CONNECTIONS: usize = 64;
/// The last bytes of the job's messages sent back with its result.
const LOG_TAIL: usize = 4096;
/// A host sends at most this much run record (escaped in its result, it may grow by half).
const MAX_RECORD: u64 = protocol::MAX_RESULT / 2;

/// The open connections, oldest first: each one's stream, whether it has shown the token,
/// and its peer's address.
#[derive(Default)]
struct Connections {
    next: u64,
    open: BTreeMap<u64, Conn>,
}

struct Conn {
    stream: Arc<TcpStream>,
    authenticated: bool,
    peer: Option<IpAddr>,
}

/// The connection to close for a new one from `peer`, of the open ones (id, shown the
/// token, address; oldest first): the oldest that has not shown the token, of the address
/// with the most such connections (the new one counted too), so a client that keeps
/// connecting from one address closes its own connections, not a controller's from another.
/// None when every open connection has shown the token.
fn victim(
    open: impl Iterator<Item = (u64, bool, Option<IpAddr>)>,
    peer: Option<IpAddr>,
) -> Option<u64> {
    // Per address: connections without the token, and the oldest of them (the first seen).
    let mut pending: BTreeMap<Option<IpAddr>, (usize, u64)> = BTreeMap::new();
    for (id, _, addr) in open.filter(|&(_, authenticated, _)| !authenticated) {
        pending.entry(addr).or_insert((0, id)).0 += 1;
    }
    if let Some(e) = pending.get_mut(&peer) {
        e.0 += 1;
    }
    // The most connections; of addresses with as many, the one with the oldest.
    pending
        .values()
        .max_by_key(|&&(n, oldest)| (n, std::cmp::Reverse(oldest)))
        .map(|&(_, oldest)| oldest)
}

pub struct JobService {
    pub confinement: Confinement,
    pub token: Option<Vec<u8>>,
    /// The serve side's token file, passed to jobs that replicate (their peers share it).
    pub token_file: Option<PathBuf>,
    /// This host's stornet-agent, sampled by every job into its run record.
    pub agent: Option<String>,
    /// The replication service's own address: left out of a job's `--replica`s.
    pub replica_listen: SocketAddr,
    busy: AtomicBool,
    conns: Mutex<Connections>,
}

/// A connection's place among the open ones, given up when it ends.
struct Slot<'a> {
    svc: &'a JobService,
    id: u64,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.svc.lock().open.remove(&self.id);
    }
}

impl JobService {
    pub fn new(
        confinement: Confinement,
        token: Option<Vec<u8>>,
        token_file: Option<PathBuf>,
        agent: Option<String>,
        replica_listen: SocketAddr,
    ) -> JobService {
        JobService {
            confinement,
            token,
            token_file,
            agent,
            replica_listen,
            busy: AtomicBool::new(false),
            conns: Mutex::new(Connections::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection; at the cap one without the token is closed to make
    /// room ([`victim`]; none: every open connection has shown the token, so
    /// the new one waits its turn outside).
    fn admit(&self, s: &Arc<TcpStream>) -> Option<u64> {
        let peer = s.peer_addr().ok().map(|a| a.ip());
        let mut c = self.lock();
        if c.open.len() >= MAX_CONNECTIONS {
            let open = c.open.iter().map(|(&id, c)| (id, c.authenticated, c.peer));
            let victim = victim(open, peer)?;
            if let Some(v) = c.open.remove(&victim) {
                let _ = v.stream.shutdown(Shutdown::Both);
            }
        }
        let id = c.next;
        c.next += 1;
        c.open.insert(
            id,
            Conn {
                stream: Arc::clone(s),
                authenticated: false,
                peer,
            },
        );
        Some(id)
    }

    fn authenticated(&self, id: u64) {
        if let Some(e) = self.lock().open.get_mut(&id) {
            e.authenticated = true;
        }
    }

    /// Serves controllers on `listener` from a thread of its own.
    pub fn spawn(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("jobs".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let conn = match conn {
                        Ok(c) => Arc::new(c),
                        // Out of descriptors and the like: the connections that exist go on.
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                    };
                    protocol::tune(&conn, protocol::GONE_WHILE_QUIET);
                    let Some(id) = self.admit(&conn) else {
                        let _ = protocol::send(
                            &mut &*conn,
                            &Msg::Error {
                                message: "busy: this host has as many controllers as it takes"
                                    .into(),
                            },
                        );
                        continue;
                    };
                    let svc = Arc::clone(&self);
                    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    let spawned = std::thread::Builder::new()
                        .name("job".into())
                        .spawn(move || {
                            let _slot = Slot { svc: &svc, id };
                            if let Err(e) = svc.handle(&conn, id) {
                                tracing::warn!(controller = %peer, error = %plain(&e, 300), "job order ended");
                            }
                        });
                    if spawned.is_err() {
                        self.lock().open.remove(&id);
                    }
                }
            })
            .map(|_| ())
    }

    fn handle(&self, conn: &Arc<TcpStream>, id: u64) -> Result<(), String> {
        let mut w: &TcpStream = conn;
        let mut r = BufReader::new(Deadline::new(Arc::clone(conn)));
        r.get_mut().within(Some(HELLO_WITHIN));
        let refuse = |w: &mut &TcpStream, message: String| {
            let _ = protocol::send(
                w,
                &Msg::Error {
                    message: message.clone(),
                },
            );
            Err(message)
        };
        let ours = env!("CARGO_PKG_VERSION");
        match protocol::receive(&mut r, protocol::MAX_HELLO) {
            Ok(Some(Msg::Hello { version, token })) => {
                if version != ours {
                    return refuse(
                        &mut w,
                        format!(
                            "version mismatch: the controller runs loadgen {}, this host {ours}",
                            plain(&version, 40)
                        ),
                    );
                }
                if let Some(want) = &self.token
                    && !protocol::same_token(token.as_bytes(), protocol::hex(want).as_bytes())
                {
                    return refuse(
                        &mut w,
                        "the token is not this host's (--client-token-file)".into(),
                    );
                }
            }
            Ok(Some(m)) => return refuse(&mut w, format!("expected hello, got {}", m.kind())),
            Ok(None) => return Ok(()),
            Err(e) => return refuse(&mut w, e),
        }
        self.authenticated(id);
        protocol::send(
            &mut w,
            &Msg::Welcome {
                version: ours.into(),
                hostname: crate::recording::system::hostname(),
            },
        )?;
        r.get_mut().within(Some(ORDER_WITHIN));
        loop {
            match protocol::receive(&mut r, protocol::MAX_ORDER) {
                Ok(Some(Msg::Clock)) => protocol::send(
                    &mut w,
                    &Msg::Time {
                        unix_ns: crate::cluster::clock::unix_ns(),
                    },
                )?,
                Ok(Some(Msg::Job { name, args, files })) => {
                    if self.busy.swap(true, Ordering::AcqRel) {
                        return refuse(
                            &mut w,
                            "busy: another controller's job runs on this host".into(),
                        );
                    }
                    let done = self.job(conn, r, &name, args, &files);
                    self.busy.store(false, Ordering::Release);
                    if let Err(message) = &done {
                        let _ = protocol::send(
                            &mut w,
                            &Msg::Error {
                                message: message.clone(),
                            },
                        );
                    }
                    // The reader of the job's connection ends with it.
                    let _ = conn.shutdown(Shutdown::Read);
                    return done;
                }
                Ok(Some(m)) => return refuse(&mut w, format!("unexpected {} message", m.kind())),
                Ok(None) => return Ok(()),
                Err(e) => return refuse(&mut w, e),
            }
        }
    }

    /// One job order, from its checks to its result.
    fn job(
        &self,
        conn: &Arc<TcpStream>,
        r: BufReader<Deadline>,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<(), String> {
        let (plan, targets, record) = self.prepare(name, args, files)?;
        let mut job = match Job::start(plan, &targets, record, self.confinement.home()) {
            Ok(j) => j,
            Err(e) => {
                targets.remove_created();
                return Err(e);
            }
        };
        if !watch_controller(r, job.events.clone()) {
            job.call_off(false);
            targets.remove_created();
            return Err("cannot watch the controller's connection".into());
        }
        job.supervise(conn, targets)
    }

    /// The job order checked (see [`check_order`]) and the host's own settings put in; also
    /// the pipe the run record will come back through.
    fn prepare(
        &self,
        name: &str,
        args: Vec<String>,
        files: &[JobFile],
    ) -> Result<(Plan, Targets, (OwnedFd, OwnedFd)), String> {
        let (mut plan, targets) =
            check_order(&self.confinement, self.replica_listen, name, &args, files)?;
        let record = match pipe() {
            Ok(p) => p,
            Err(e) => {
                targets.remove_created();
                return Err(format!("a pipe for the run record: {e}"));
            }
        };
        let s = &mut plan.settings;
        s.start_gate = true;
        s.eta = crate::options::Eta::Never;
        s.output = Some(PathBuf::from("/dev/null"));
        s.record = Some(PathBuf::from(format!(
            "/proc/self/fd/{}",
            record.1.as_raw_fd()
        )));
        if let Some(url) = &self.agent {
            s.agents = vec![format!("{name}={url}")];
        }
        if !s.replicas.is_empty() {
            s.replica_volume_prefix = Some(name.to_string());
            s.replica_token_file = self.token_file.clone();
        }
        Ok((plan, targets, record))
    }
}

/// A job order checked as the host runs it: its name plain, its job files within their cap
/// and taken from the order alone, its options a job order may have, and every target
/// opened beneath the served directories (see `policy`). `replica_listen`: this host's
/// replication service, left out of the order's `--replica`s.
pub fn check_order(
    confinement: &Confinement,
    replica_listen: SocketAddr,
    name: &str,
    args: &[String],
    files: &[JobFile],
) -> Result<(Plan, Targets), String> {
    protocol::check_name(name)?;
    for f in files {
        if f.text.len() as u64 > crate::files::MAX_JOB_FILE {
            return Err(format!(
                "refused: job file {} is {} bytes, more than the {} a job file may hold",
                plain(&f.arg, 80),
                f.text.len(),
                protocol::size_name(crate::files::MAX_JOB_FILE)
            ));
        }
    }
    let mut out = Vec::with_capacity(args.len());
    let mut skip_next = false;
    for (i, a) in args.iter().enumerate() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        // This host's own replication service is not a replica of its writes.
        let replica = match a.strip_prefix("--replica") {
            Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
            Some("") => {
                skip_next = true;
                args.get(i + 1).cloned()
            }
            _ => None,
        };
        if let Some(addr) = replica {
            match crate::options::values::parse_addr(&addr) {
                Ok(a) if own_address(replica_listen, a, &local_addresses()) => {}
                _ => out.push(format!("--replica={addr}")),
            }
            continue;
        }
        out.push(a.clone());
    }
    let given: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.arg.clone(), f.text.clone()))
        .collect();
    let mut plan = match parse_args_from(&out, JobFiles::Given(&given))? {
        Parsed::Plan(p) => *p,
        Parsed::Help => return Err("--help is not a job".into()),
    };
    crate::options::validate::validate(&plan)?;
    confinement.check_options(&plan)?;
    confinement.anchor(&mut plan);
    let targets = confinement.targets(&plan)?;
    if let Err(e) = crate::target::check_space(&targets.layout, true) {
        targets.remove_created();
        return Err(e);
    }
    Ok((plan, targets))
}

/// This host's addresses, as `--replica` may name them.
fn local_addresses() -> Vec<std::net::IpAddr> {
    crate::recording::system::addresses()
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect()
}

/// Whether `replica` is the replication service at `listen` itself: the same address, or
/// with `listen` on every address (0.0.0.0 or ::), its port on loopback or on one of `own`.
pub fn own_address(listen: SocketAddr, replica: SocketAddr, own: &[std::net::IpAddr]) -> bool {
    if replica == listen {
        return true;
    }
    listen.ip().is_unspecified()
        && replica.port() == listen.port()
        && (replica.ip().is_loopback() || own.contains(&replica.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_leaves_out_only_its_own_replication_service() {
        let own: Vec<std::net::IpAddr> = vec!["198.18.0.1".parse().unwrap()];
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.1:7480"),
            &own
        ));
        assert!(!own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.2:7480"),
            &own
        ));
        assert!(!own_address(
            at("198.18.0.1:7480"),
            at("198.18.0.1:7490"),
            &own
        ));
        let any = at("0.0.0.0:7480");
        assert!(own_address(any, at("198.18.0.1:7480"), &own));
        assert!(own_address(any, at("127.0.0.1:7480"), &own));
        assert!(!own_address(any, at("198.18.0.2:7480"), &own));
        assert!(!own_address(any, at("198.18.0.1:7481"), &own));
        assert!(own_address(at("[::]:7480"), at("[::1]:7480"), &own));
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_flood_from_one_address_closes_its_own_connections() {
        // A controller (id 0, not yet through its hello) among a flood from one address.
        let mut open = vec![(0, false, ip("198.18.0.1"))];
        open.extend((1..64).map(|id| (id, false, ip("198.18.0.9"))));
        assert_eq!(victim(open.iter().copied(), ip("198.18.0.9")), Some(1));
        // Even when the flooder has fewer connections open than the rest together.
        let open = [
            (0, false, ip("198.18.0.1")),
            (1, false, ip("198.18.0.2")),
            (2, false, ip("198.18.0.9")),
            (3, false, ip("198.18.0.9")),
        ];
        assert_eq!(victim(open.iter().copied(), ip("198.18.0.3")), Some(2));
    }

    #[test]
    fn among_equals_the_oldest_goes_and_authenticated_ones_stay() {
        let open = [
            (4, true, ip("198.18.0.1")),
            (5, false, ip("198.18.0.2")),
            (6, false, ip("198.18.0.3")),
        ];
        assert_eq!(victim(open.iter().copied(), ip("198.18.0.4")), Some(5));
        // The newcomer's own address counts its new connection.
        assert_eq!(victim(open.iter().copied(), ip("198.18.0.3")), Some(6));
        let all = [(0, true, ip("198.18.0.1")), (1, true, None)];
        assert_eq!(victim(all.iter().copied(), None), None);
    }
}
