//! `loadgen serve --jobs-listen` run as root, attacked as a token holder, a local user and a
//! client without the token would: racing the check of a job order against its use,
//! planting links where the service used to keep its scratch files, sending lines until the
//! memory runs out, vanishing mid-job. Each test holds the host to its promise: nothing
//! outside `--dir` changes, the service stays up and a controller is served afterwards.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stornet_lab::bins;
use stornet_lab::cgroup::MemoryCgroup;
use stornet_lab::netns::{HostPair, Netns};
use stornet_lab::privilege::{require_root, require_tool};
use stornet_lab::replica::ScratchDir;

/// 127.0.88.N: one address per job service this process starts.
fn next_addr() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    format!("127.0.88.{}", N.fetch_add(1, Ordering::Relaxed))
}

/// `loadgen serve` with a job service, killed on drop.
struct Serve {
    child: Child,
    jobs: String,
    listen: String,
}

impl Serve {
    fn start(dir: &Path, extra: &[&str], prepare: impl FnOnce(&mut Command)) -> Serve {
        let ip = next_addr();
        let (jobs, listen) = (format!("{ip}:7481"), format!("{ip}:7480"));
        Serve::start_at(None, jobs, listen, dir, extra, prepare)
    }

    /// With its job service on `jobs` and its replication service on `listen`, in network
    /// namespace `ns` or in this one.
    fn start_at(
        ns: Option<&Netns>,
        jobs: String,
        listen: String,
        dir: &Path,
        extra: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Serve {
        let bin = bins::path("loadgen");
        let mut cmd = match ns {
            Some(ns) => ns.command(bin.to_str().unwrap()),
            None => Command::new(&bin),
        };
        prepare(&mut cmd);
        let child = cmd
            .args(["serve", "--listen", &listen, "--jobs-listen", &jobs])
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen serve starts");
        let s = Serve {
            child,
            jobs,
            listen,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let connect = |a: &str| match ns {
            Some(ns) => {
                let a: SocketAddr = a.parse().unwrap();
                ns.enter(move || Ok(TcpStream::connect(a)?)).is_ok()
            }
            None => TcpStream::connect(a).is_ok(),
        };
        while !connect(&s.jobs) {
            assert!(Instant::now() < deadline, "the job service never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A controller speaking the job service's protocol by hand (docs/loadgen.md).
struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    fn over(s: TcpStream) -> Raw {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    /// Connects, says hello with `token`; panics unless welcomed.
    fn hello(s: TcpStream, token: &str) -> Raw {
        let mut c = Raw::over(s);
        let v = c.ask(
            &json!({"type": "hello", "version": env!("CARGO_PKG_VERSION"),
            "token": hex(token.as_bytes())}),
        );
        assert_eq!(v["type"], "welcome", "{v}");
        c
    }

    fn send(&mut self, v: &Value) {
        let _ = writeln!(self.w, "{v}");
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        match self.r.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).unwrap_or(Value::Null),
            _ => Value::Null,
        }
    }

    fn ask(&mut self, v: &Value) -> Value {
        self.send(v);
        self.next()
    }

    fn order(&mut self, args: &[&str], files: &[(&str, &str)]) -> Value {
        let files: Vec<Value> = files
            .iter()
            .map(|(a, t)| json!({"arg": a, "text": t}))
            .collect();
        self.ask(&json!({"type": "job", "name": "x", "args": args, "files": files}))
    }

    /// After `ready`: start now and wait for the result (or the end of the connection).
    fn run_to_end(&mut self) -> Value {
        self.send(&json!({"type": "start", "unix_ns": now_ns() + 20_000_000}));
        loop {
            let m = self.next();
            if m["type"] != "running" {
                return m;
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// One job order from a fresh connection, run to its end when the host takes it.
fn attempt(jobs: &str, args: &[&str], files: &[(&str, &str)]) -> Value {
    let mut c = Raw::hello(TcpStream::connect(jobs).unwrap(), "");
    let v = c.order(args, files);
    if v["type"] == "ready" {
        return c.run_to_end();
    }
    v
}

/// The victim's bytes, to compare after the attack.
fn victim(path: &Path, len: usize) -> Vec<u8> {
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(path, &bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    bytes
}

/// Keeps flipping `path` between two states until `stop` (each flip is atomic: a rename).
fn flipper(
    stop: Arc<AtomicBool>,
    path: PathBuf,
    a: impl Fn(&Path) + Send + 'static,
    b: impl Fn(&Path) + Send + 'static,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let tmp = path.with_extension("flip");
        let mut flips = 0;
        while !stop.load(Ordering::Relaxed) {
            for f in [&a as &dyn Fn(&Path), &b] {
                let _ = std::fs::remove_file(&tmp);
                f(&tmp);
                let _ = std::fs::rename(&tmp, &path);
                flips += 1;
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        flips
    })
}

/// The check of a job order and its use are one: a job file on the host rewritten between
/// them (as a token holder can, through the replication port) and a target swapped for a
/// link out of `--dir` (as a local user who can write there can) never get a write outside
/// `--dir`, however often they are tried.
#[test]
fn job_service_race_between_check_and_use_never_writes_outside_dir() {
    if !require_root("job_service_race_between_check_and_use_never_writes_outside_dir") {
        return;
    }
    let root = ScratchDir::new("jobs-race").unwrap();
    let served = root.join("served");
    let outside = root.join("outside");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let (v1, v2) = (outside.join("victim1"), outside.join("victim2"));
    let (b1, b2) = (victim(&v1, 4096), victim(&v2, 4096));
    let serve = Serve::start(&served, &[], |_| {});
    let stop = Arc::new(AtomicBool::new(false));

    // A job file the order names by path, rewritten between a harmless and a harmful job.
    let job = |target: &Path| {
        format!(
            "[w]\nrw=write\nbs=4k\nsize=64k\ndirect=0\nfilename={}\n",
            target.display()
        )
    };
    let (harmless, harmful) = (job(&served.join("inside")), job(&v1));
    let jf = served.join("evil.fio");
    let flips = flipper(
        stop.clone(),
        jf.clone(),
        move |p| std::fs::write(p, &harmless).unwrap(),
        move |p| std::fs::write(p, &harmful).unwrap(),
    );
    let mut answers = std::collections::BTreeMap::<String, u32>::new();
    let start = Instant::now();
    let mut tries = 0;
    while start.elapsed() < Duration::from_secs(3) {
        let v = attempt(&serve.jobs, &[jf.to_str().unwrap()], &[]);
        *answers.entry(v["type"].to_string()).or_default() += 1;
        tries += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let flipped = flips.join().unwrap();

    // A target flipped between a file in --dir and a link to a file outside it.
    stop.store(false, Ordering::Relaxed);
    let t = served.join("t");
    let link_to = v2.clone();
    let flips = flipper(
        stop.clone(),
        t.clone(),
        |p| std::fs::write(p, vec![0u8; 65536]).unwrap(),
        move |p| std::os::unix::fs::symlink(&link_to, p).unwrap(),
    );
    let start = Instant::now();
    let mut swaps = 0;
    while start.elapsed() < Duration::from_secs(3) {
        let v = attempt(
            &serve.jobs,
            &[
                "--rw=write",
                "--bs=4k",
                "--size=64k",
                "--direct=0",
                "--filename=t",
            ],
            &[],
        );
        *answers.entry(format!("swap {}", v["type"])).or_default() += 1;
        swaps += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swapped = flips.join().unwrap();
    eprintln!(
        "{tries} orders against {flipped} rewrites, {swaps} against {swapped} swaps: {answers:?}"
    );
    assert!(
        tries >= 5 && swaps >= 5,
        "too few attempts to mean anything"
    );
    assert!(
        std::fs::read(&v1).unwrap() == b1,
        "a rewritten job file wrote outside --dir"
    );
    assert!(
        std::fs::read(&v2).unwrap() == b2,
        "a swapped link was followed out of --dir"
    );
    assert!(
        answers.keys().any(|k| k.starts_with("swap \"result\"")),
        "no order on the regular file ran: {answers:?}"
    );
}

/// A local user cannot make the service write through a link: it keeps no scratch files
/// where another user can reach them (it used to reuse `$TMPDIR/loadgen-job-PID-N` and
/// follow a link planted there).
#[test]
fn job_service_follows_no_link_a_local_user_plants() {
    if !require_root("job_service_follows_no_link_a_local_user_plants")
        || !require_tool("job_service_follows_no_link_a_local_user_plants", "setpriv")
    {
        return;
    }
    let root = ScratchDir::new("jobs-plant").unwrap();
    let served = root.join("served");
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::set_permissions(&root.path, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let target = root.join("root-only");
    let before = victim(&target, 4096);
    let serve = Serve::start(&served, &[], |c| {
        c.env("TMPDIR", &tmp);
    });
    let pid = serve.child.id();
    // As nobody: the scratch directories the service would use next, each with links.
    let plant = format!(
        "for n in 0 1 2 3; do d={tmp}/loadgen-job-{pid}-$n; mkdir -p $d && \
         for f in log record.json report.json job0.fio; do ln -s {target} $d/$f; done; done",
        tmp = tmp.display(),
        target = target.display()
    );
    let planted = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(&plant)
        .output()
        .unwrap();
    assert!(
        planted.status.success(),
        "{}",
        String::from_utf8_lossy(&planted.stderr)
    );
    let answers: Vec<Value> = (0..2)
        .map(|_| {
            attempt(
                &serve.jobs,
                &["j.fio"],
                &[("j.fio", "[w]\nrw=write\nbs=4k\nsize=64k\ndirect=0\n")],
            )
        })
        .collect();
    assert!(
        std::fs::read(&target).unwrap() == before,
        "a planted link was followed"
    );
    for v in answers {
        assert_eq!(v["type"], "result", "{v}");
    }
    let ours: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(&format!("loadgen-job-{pid}-")))
        .collect();
    assert!(ours.is_empty(), "the service left {ours:?} in $TMPDIR");
}

/// Clients without the token cost the service a few KiB each: three lines of 400 MB and
/// 400 trickling connections, with the service in a 64 MiB memory group, leave it up and
/// serving a controller and a replication client.
#[test]
fn job_service_without_the_token_cannot_run_the_service_out_of_memory() {
    if !require_root("job_service_without_the_token_cannot_run_the_service_out_of_memory") {
        return;
    }
    let root = ScratchDir::new("jobs-mem").unwrap();
    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let token = root.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let group = MemoryCgroup::new("jobs-mem", 64 << 20).expect("a memory cgroup");
    let mut serve = Serve::start(&served, &["--token-file", token.to_str().unwrap()], |c| {
        group.enter_on_spawn(c).unwrap()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (opened, all_open) = std::sync::mpsc::channel();
    let trickle = {
        let (stop, addr) = (stop.clone(), serve.jobs.clone());
        std::thread::spawn(move || {
            let mut conns: Vec<TcpStream> = (0..400)
                .filter_map(|_| TcpStream::connect(&addr).ok())
                .collect();
            let _ = opened.send(());
            while !stop.load(Ordering::Relaxed) {
                for s in &mut conns {
                    let _ = s.write(b"{");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let floods: Vec<_> = (0..3)
        .map(|_| {
            let addr = serve.jobs.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                let chunk = vec![b'x'; 1 << 20];
                let mut sent = 0u64;
                while sent < 400 << 20 {
                    match s.write(&chunk) {
                        Ok(n) => sent += n as u64,
                        Err(_) => break,
                    }
                }
                sent
            })
        })
        .collect();
    let sent: Vec<u64> = floods.into_iter().map(|f| f.join().unwrap()).collect();
    // The controller below comes after the trickle's connections: while they still arrive,
    // 64 newer ones close the oldest that has not shown the token (the cap, as designed),
    // which on a busy machine can be the controller before its hello is read.
    all_open.recv().expect("the trickle's connections are open");
    let peak = group.peak().unwrap();
    let fds = std::fs::read_dir(format!("/proc/{}/fd", serve.child.id()))
        .unwrap()
        .count();
    let mut c = Raw::hello(TcpStream::connect(&serve.jobs).unwrap(), "s3cret");
    let v = c.order(&["--rw=write", "--bs=4k", "--size=64k", "--direct=0"], &[]);
    assert_eq!(v["type"], "ready", "{v}");
    assert_eq!(c.run_to_end()["type"], "result");
    let replica = Command::new(bins::path("loadgen"))
        .args(["replica-client", "--connect", &serve.listen, "--count=64"])
        .args(["--token-file", token.to_str().unwrap()])
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    trickle.join().unwrap();
    eprintln!(
        "sent {sent:?} bytes; peak {} MiB; {fds} descriptors",
        peak >> 20
    );
    assert!(serve.alive(), "the service died");
    assert_eq!(
        group.oom_kills().unwrap(),
        0,
        "the kernel killed a process of the service"
    );
    assert!(peak < 32 << 20, "the service held {} MiB", peak >> 20);
    assert!(fds < 160, "{fds} descriptors open");
    assert!(
        replica.status.success(),
        "{}",
        String::from_utf8_lossy(&replica.stderr)
    );
}

/// A TCP connection to `to` from local address `from` (another loopback address: a peer of
/// its own to the service).
fn connect_from(from: std::net::Ipv4Addr, to: &str) -> TcpStream {
    use std::os::fd::FromRawFd;
    let to: SocketAddr = to.parse().unwrap();
    let SocketAddr::V4(to) = to else {
        panic!("an IPv4 address")
    };
    let sin = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket, owned by the TcpStream at once; bind and connect take pointers
    // to sockaddr_in values that live across the calls, with their size.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let (a, b) = (sin(from, 0), sin(*to.ip(), to.port()));
        let bound = libc::bind(fd, (&raw const a).cast(), len);
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        let connected = libc::connect(fd, (&raw const b).cast(), len);
        assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
        stream
    }
}

/// A client without the token that keeps opening connections from one address, hundreds a
/// second, far past the cap of 64 open connections, closes its own connections: a controller
/// from another address that takes two seconds over its hello meanwhile is welcomed and
/// served.
#[test]
fn job_service_connection_flood_from_one_address_does_not_close_a_controllers() {
    if !require_root("job_service_connection_flood_from_one_address_does_not_close_a_controllers") {
        return;
    }
    let root = ScratchDir::new("jobs-flood").unwrap();
    let served = root.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let token = root.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let mut serve = Serve::start(&served, &["--token-file", token.to_str().unwrap()], |_| {});
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood = {
        let (stop, opened, addr) = (stop.clone(), opened.clone(), serve.jobs.clone());
        std::thread::spawn(move || {
            let mut conns = std::collections::VecDeque::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(s) = TcpStream::connect(&addr) {
                    conns.push_back(s);
                    opened.fetch_add(1, Ordering::Relaxed);
                    if conns.len() > 200 {
                        conns.pop_front();
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    // The flood fills the service's places first.
    while opened.load(Ordering::Relaxed) < 100 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = connect_from(std::net::Ipv4Addr::new(127, 0, 0, 2), &serve.jobs);
    let before = opened.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(2));
    let during = opened.load(Ordering::Relaxed) - before;
    let mut c = Raw::hello(s, "s3cret");
    let v = c.order(&["--rw=write", "--bs=4k", "--size=64k", "--direct=0"], &[]);
    assert_eq!(v["type"], "ready", "{v}");
    assert_eq!(c.run_to_end()["type"], "result");
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    eprintln!("the flood opened {during} connections while the controller waited");
    assert!(
        during > 64,
        "the flood opened only {during} connections while the controller waited"
    );
    assert!(serve.alive(), "the service died");
}

/// A controller that vanishes (its link goes down, no FIN ever arrives) frees the host
/// within seconds (10 s while quiet, 20 s while a job's traffic may congest the network),
/// whether it left the job waiting for `start` or running.
#[test]
fn job_service_host_is_freed_when_its_controller_vanishes() {
    if !require_root("job_service_host_is_freed_when_its_controller_vanishes") {
        return;
    }
    let pair = HostPair::new("jobgone").unwrap();
    let root = ScratchDir::new("jobs-gone").unwrap();
    let ip = pair.a_addr().to_string();
    let dirs = [root.join("waiting"), root.join("running")];
    let hosts: Vec<(Serve, SocketAddr)> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            std::fs::create_dir_all(d).unwrap();
            let port = 7481 + 10 * i as u16;
            let (jobs, listen) = (format!("{ip}:{port}"), format!("{ip}:{}", port - 1));
            let addr: SocketAddr = jobs.parse().unwrap();
            (
                Serve::start_at(Some(&pair.a), jobs, listen, d, &[], |_| {}),
                addr,
            )
        })
        .collect();
    // From b: one job left at ready, one started with a long runtime.
    let mut conns = Vec::new();
    for (i, (_, addr)) in hosts.iter().enumerate() {
        let a = *addr;
        let s = pair
            .b
            .enter(move || Ok(TcpStream::connect_timeout(&a, Duration::from_secs(5))?))
            .unwrap();
        let mut c = Raw::hello(s, "");
        let v = c.order(
            &[
                "--rw=write",
                "--bs=4k",
                "--size=1m",
                "--direct=0",
                "--time_based",
                "--runtime=300",
                "--rate_iops=20",
            ],
            &[],
        );
        assert_eq!(v["type"], "ready", "{v}");
        if i == 1 {
            c.send(&json!({"type": "start", "unix_ns": now_ns() + 20_000_000}));
            assert_eq!(c.next()["type"], "running");
        }
        conns.push(c);
    }
    // The controller's link goes down; it is gone without a word.
    pair.b.ip(&["link", "set", pair.b_dev, "down"]).unwrap();
    let gone = Instant::now();
    drop(conns);
    // A controller on the host's own namespace asks every second until each host takes it.
    let mut freed: Vec<Option<Duration>> = vec![None; hosts.len()];
    while gone.elapsed() < Duration::from_secs(45) && freed.iter().any(Option::is_none) {
        for (i, (_, addr)) in hosts.iter().enumerate() {
            if freed[i].is_some() {
                continue;
            }
            let a = *addr;
            let s = pair.a.enter(move || Ok(TcpStream::connect(a)?)).unwrap();
            let mut c = Raw::hello(s, "");
            let v = c.order(&["--rw=write", "--bs=4k", "--size=64k", "--direct=0"], &[]);
            if v["type"] == "ready" {
                c.send(&json!({"type": "abort"}));
                freed[i] = Some(gone.elapsed());
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("freed after {freed:?}");
    for ((what, within), f) in [("waiting for start", 20), ("running", 30)]
        .iter()
        .zip(&freed)
    {
        let f = f.unwrap_or_else(|| panic!("the host whose job was {what} is still busy"));
        assert!(
            f < Duration::from_secs(*within),
            "{what}: freed after {f:?}"
        );
    }
}

/// The check of IO buffer memory heeds the memory group loadgen runs in, not only the
/// machine's free memory: a job whose buffers exceed its group's limit is refused with a
/// line, instead of being killed part way.
#[test]
fn job_buffers_are_checked_against_the_memory_group() {
    if !require_root("job_buffers_are_checked_against_the_memory_group") {
        return;
    }
    let root = ScratchDir::new("jobs-bufs").unwrap();
    let group = MemoryCgroup::new("jobs-bufs", 64 << 20).unwrap();
    let mut cmd = Command::new(bins::path("loadgen"));
    group.enter_on_spawn(&mut cmd).unwrap();
    let out = cmd
        .args([
            "run",
            "--name=r",
            "--rw=read",
            "--bs=1m",
            "--iodepth=256",
            "--size=256m",
        ])
        .args(["--direct=0", "--eta=never"])
        .arg(format!("--filename={}", root.join("f").display()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("memory") && e.contains("cgroup"), "{e}");
    assert_eq!(group.oom_kills().unwrap(), 0);
}
