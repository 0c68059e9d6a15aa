//! `loadgen run` as a user runs it: bad values give one line and exit 2; small real runs on
//! a regular file give fio-shaped JSON, sweeps and job files work. No root needed.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("run")
        .args(args)
        .output()
        .expect("loadgen runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let o = loadgen(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line, got {err:?}"
    );
    assert!(err.starts_with("loadgen: error: "), "{err}");
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
}

#[test]
fn bad_values_exit_2_with_one_line() {
    let f = scratch("bad");
    let file = format!("--filename={}", f.display());
    assert_usage_error(
        &[&file, "--size=1M", "--bs=1000", "--direct=1"],
        "multiple of 512",
    );
    assert_usage_error(&[&file, "--size=1M", "--iodepth=0"], "--iodepth");
    assert_usage_error(&[&file, "--size=1M", "--rw=sideways"], "unknown rw");
    assert_usage_error(
        &["--filename=/dev/stornet-no-such-device"],
        "does not exist",
    );
    assert_usage_error(
        &["--filename=/stornet-no-such-dir/f", "--size=1M"],
        "directory /stornet-no-such-dir does not exist",
    );
    assert_usage_error(&[&file], "give --size");
    assert_usage_error(&[&file, "--size=2k", "--bs=4k"], "smaller than --bs");
    assert_usage_error(&[&file, "--size=1M", "--bogus=1"], "unknown option --bogus");
    assert_usage_error(
        &[&file, "--size=1M", "--iodepth=1,4"],
        "--iodepth_sweep=1,4",
    );
    assert_usage_error(&[&file, "--size=1M", "--bssplit=4k/50:8k/40"], "not 100%");
    assert_usage_error(&[&file, "--size=1M", "--rate_process=bursty"], "poisson");
    assert_usage_error(&[&file, "--size=1M", "--time_based"], "needs --runtime");
    assert_usage_error(&[&file, "--size=1M", "--runtime=soon"], "--runtime");
    assert_usage_error(
        &[&file, "--size=1M", "--metrics-address=nowhere"],
        "metrics-address",
    );
    assert_usage_error(&["/stornet-no-such-job-file.fio"], "cannot read job file");
    assert_usage_error(&[&file, "--size=1M", "--replica=nowhere:7480"], "--replica");
    assert_usage_error(&[&file, "--size=1M", "--replica=198.18.0.2"], "with a port");
    assert_usage_error(
        &[&file, "--size=1M", "--replica_timeout=5s"],
        "need --replica",
    );
    assert_usage_error(
        &[
            &file,
            "--size=1M",
            "--replica=198.18.0.2:7480",
            "--replica_timeout=0",
        ],
        "--replica_timeout",
    );
    assert_usage_error(
        &[
            &file,
            "--size=1M",
            "--replica=198.18.0.2:7480",
            "--replica_token_file=/stornet-no-such-token",
        ],
        "--replica_token_file",
    );
    // Kernel interfaces are not storage, existing files there or new ones.
    assert_usage_error(
        &[
            "--filename=/proc/sys/vm/drop_caches",
            "--size=4k",
            "--rw=write",
        ],
        "is on proc, a kernel interface",
    );
    assert_usage_error(
        &[
            "--filename=/sys/kernel/stornet-test",
            "--size=4k",
            "--rw=write",
        ],
        "is on sysfs, a kernel interface",
    );
    // More buffer memory than any machine here has: refused, not killed part way.
    assert_usage_error(
        &[
            &file,
            "--size=1G",
            "--bs=64m",
            "--iodepth=4096",
            "--numjobs=64",
        ],
        "the IO buffers need 16384.0 GiB (bs × iodepth × numjobs), but only",
    );
    assert!(!f.exists(), "refused runs create no file");
}

/// A stderr whose reader went away costs the messages, not the run or its report.
#[test]
fn a_broken_stderr_keeps_the_report() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let f = scratch("brokenerr");
    // A pipe whose read end is closed before the run starts (so no other process of this
    // test binary can hold it open by chance).
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors, which are owned from here on.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(read_end);
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "run",
            &format!("--filename={}", f.display()),
            "--direct=0",
            "--size=1M",
            "--output-format=json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(write_end)
        .spawn()
        .unwrap();
    // Laying out the file is announced on stderr, which nobody reads.
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    let j: Value = serde_json::from_str(&out).expect("the report is on stdout");
    assert_eq!(j["jobs"][0]["read"]["io_bytes"], 1 << 20);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn help_lists_the_fio_options() {
    let o = loadgen(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for opt in [
        "--rw=RW",
        "--bs=",
        "--iodepth=",
        "--rate_iops=R[,W]",
        "--bs_sweep=",
        "--iodepth_sweep=",
        "--verify",
        "--profile=",
    ] {
        assert!(text.contains(opt), "help lacks {opt}");
    }
}

#[test]
fn json_on_stdout_has_fio_paths_and_a_result_per_sweep_point() {
    let f = scratch("sweep");
    let file = format!("--filename={}", f.display());
    let o = loadgen(&[
        "--name=sweep",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--bs_sweep=4k,8k",
        "--iodepth_sweep=1,4",
        "--output-format=json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: Value = serde_json::from_slice(&o.stdout).expect("stdout is only JSON");
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4, "one result per point");
    let shapes: Vec<(String, String)> = jobs
        .iter()
        .map(|x| {
            (
                x["job options"]["bs"].as_str().unwrap().to_string(),
                x["job options"]["iodepth"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [("4k", "1"), ("4k", "4"), ("8k", "1"), ("8k", "4")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for (i, x) in jobs.iter().enumerate() {
        assert_eq!(x["jobname"], "sweep");
        assert_eq!(x["groupid"], i);
        assert_eq!(
            x["read"]["io_bytes"],
            1 << 20,
            "size-based: 1 MiB per point"
        );
        assert!(
            x["read"]["clat_ns"]["percentile"]["99.000000"]
                .as_u64()
                .unwrap()
                > 0
        );
        assert!(x["read"]["lat_ns"]["mean"].as_f64().unwrap() > 0.0);
        assert!(x["read"]["iops"].as_f64().unwrap() > 0.0);
        assert_eq!(x["write"]["total_ios"], 0);
    }
    assert_eq!(j["loadgen"]["points"].as_array().unwrap().len(), 4);
    let _ = std::fs::remove_file(&f);
}

#[test]
fn job_files_and_text_reports() {
    let f = scratch("jobfile");
    let jf = scratch("jobfile.fio");
    std::fs::write(
        &jf,
        format!(
            "; two jobs\n[global]\nfilename={}\ndirect=0\nsize=1M\nbs=4k\n\n[reader]\nrw=randread\niodepth=4\n\n[writer]\nrw=write\n",
            f.display()
        ),
    )
    .unwrap();
    let o = loadgen(&[jf.to_str().unwrap(), "--output-format=json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = j["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["reader", "writer"]);
    assert_eq!(j["jobs"][1]["write"]["io_bytes"], 1 << 20);

    let o = loadgen(&[jf.to_str().unwrap(), "--group_reporting"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("reader (2 jobs merged)"), "{text}");
    assert!(text.contains("IOPS="), "{text}");
    assert!(text.contains("timeline"), "{text}");
    assert!(text.contains("per IO"), "{text}");
    let _ = std::fs::remove_file(&f);
    let _ = std::fs::remove_file(&jf);
}

fn run_json(args: &[&str]) -> Value {
    let o = loadgen(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is only JSON")
}

/// `--bs=4k,64k` means what it means to fio: reads of 4k and writes of 64k, in one run.
#[test]
fn bs_with_two_values_sizes_reads_and_writes() {
    let f = scratch("rwsizes");
    let file = format!("--filename={}", f.display());
    let j = run_json(&[
        "--name=rw",
        &file,
        "--direct=0",
        "--size=4M",
        "--rw=randrw",
        "--bs=4k,64k",
        "--iodepth=4",
        "--output-format=json",
    ]);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "one job, not a sweep");
    for (dir, bs) in [("read", 4096), ("write", 65536)] {
        let d = &jobs[0][dir];
        let ios = d["total_ios"].as_u64().unwrap();
        assert!(ios > 0, "{dir}: no IOs");
        assert_eq!(d["io_bytes"].as_u64().unwrap(), ios * bs, "{dir} IO size");
    }
    assert_eq!(jobs[0]["job options"]["bs"], "4k,64k");
    let _ = std::fs::remove_file(&f);
}

/// `--rate_iops=R,W` limits reads and writes separately. The schedule never issues an IO
/// before it is due, so in 1 s at most 201 reads and 101 writes start.
#[test]
fn rate_iops_with_two_values_limits_each_direction() {
    let f = scratch("rwrate");
    let file = format!("--filename={}", f.display());
    let j = run_json(&[
        "--name=rate",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randrw",
        "--rate_iops=200,100",
        "--iodepth=4",
        "--time_based",
        "--runtime=1",
        "--output-format=json",
    ]);
    let ios = |d: &str| j["jobs"][0][d]["total_ios"].as_u64().unwrap();
    let (r, w) = (ios("read"), ios("write"));
    assert!((100..=201).contains(&r), "reads {r}");
    assert!((50..=101).contains(&w), "writes {w}");
    let _ = std::fs::remove_file(&f);
}

/// Without group_reporting every job entry has fio's per-interval bandwidth and IOPS
/// statistics, and its own thread's CPU figures.
#[test]
fn every_job_entry_has_interval_statistics() {
    let f = scratch("perjob");
    let file = format!("--filename={}", f.display());
    let j = run_json(&[
        "--name=pj",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--numjobs=2",
        "--rate_iops=500",
        "--time_based",
        "--runtime=1",
        "--interval=200ms",
        "--output-format=json",
    ]);
    let jobs = j["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    for job in jobs {
        let r = &job["read"];
        let n = r["iops_samples"].as_u64().unwrap();
        assert!(n >= 3, "{n} samples of 200 ms in 1 s");
        assert_eq!(r["bw_samples"], n);
        let (min, mean, max) = (
            r["iops_min"].as_f64().unwrap(),
            r["iops_mean"].as_f64().unwrap(),
            r["iops_max"].as_f64().unwrap(),
        );
        assert!(
            min <= mean && mean <= max && max > 0.0,
            "{min} {mean} {max}"
        );
        // Two jobs of equal rate: each has about half the group's bandwidth.
        let agg = r["bw_agg"].as_f64().unwrap();
        assert!((30.0..=70.0).contains(&agg), "bw_agg {agg}");
        assert!(job["ctx"].as_u64().unwrap() > 0, "context switches");
        assert!(job["latency_ms"]["2"].is_f64());
    }
    let _ = std::fs::remove_file(&f);
}

/// Interim results every `--status-interval`, in the output format: with JSON, one document
/// each, then the final one.
#[test]
fn status_interval_prints_interim_documents() {
    let f = scratch("status");
    let file = format!("--filename={}", f.display());
    let o = loadgen(&[
        "--name=st",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--rate_iops=200",
        "--time_based",
        "--runtime=2",
        "--status-interval=500ms",
        "--interval=250ms",
        "--output-format=json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let docs: Vec<Value> = serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("a sequence of JSON documents");
    assert!(docs.len() >= 4, "{} documents", docs.len());
    let ios: Vec<u64> = docs
        .iter()
        .map(|d| d["jobs"][0]["read"]["total_ios"].as_u64().unwrap())
        .collect();
    assert!(ios.windows(2).all(|w| w[0] <= w[1]), "cumulative: {ios:?}");
    assert!(ios[0] > 0 && ios[0] < *ios.last().unwrap(), "{ios:?}");
    let _ = std::fs::remove_file(&f);
}

/// `--percentile_list` replaces fio's percentiles in JSON and terse output.
#[test]
fn percentile_list_sets_the_percentiles() {
    let f = scratch("pct");
    let file = format!("--filename={}", f.display());
    let args = [
        "--name=p",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--percentile_list=99.9:50",
    ];
    let j = run_json(&[&args[..], &["--output-format=json"]].concat());
    let keys: Vec<&String> = j["jobs"][0]["read"]["clat_ns"]["percentile"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["50.000000", "99.900000"]);
    let o = loadgen(&[&args[..], &["--minimal"]].concat());
    let line = String::from_utf8_lossy(&o.stdout);
    let fields: Vec<&str> = line.trim().split(';').collect();
    assert!(fields[17].starts_with("50.000000%="), "{}", fields[17]);
    assert!(fields[18].starts_with("99.900000%="), "{}", fields[18]);
    assert_eq!(fields[19], "0%=0");
    let _ = std::fs::remove_file(&f);
}

/// A Poisson schedule still keeps the rate; a think time of 100 ms after every IO allows at
/// most 11 IOs in a second (a schedule never issues early, a pause is never short).
#[test]
fn poisson_rates_and_think_times() {
    let f = scratch("poisson");
    let file = format!("--filename={}", f.display());
    let base = [
        "--name=pz",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--time_based",
        "--runtime=1",
        "--output-format=json",
    ];
    let j = run_json(&[&base[..], &["--rate_iops=500", "--rate_process=poisson"]].concat());
    let n = j["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert!(
        (350..=650).contains(&n),
        "{n} Poisson arrivals at 500/s in 1 s"
    );
    let j = run_json(&[&base[..], &["--thinktime=100ms", "--iodepth=4"]].concat());
    let n = j["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert!((3..=11).contains(&n), "{n} IOs with 100 ms think times");
    let _ = std::fs::remove_file(&f);
}

#[test]
fn job_file_variables_and_long_lines() {
    let f = scratch("envfile");
    let jf = scratch("env.fio");
    std::fs::write(
        &jf,
        "[global]\nfilename=${LOADGEN_TEST_FILE}\ndirect=0\nsize=1M\n[r]\nrw=read\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["run", jf.to_str().unwrap(), "--output-format=json"])
        .env("LOADGEN_TEST_FILE", &f)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(f.exists(), "${{LOADGEN_TEST_FILE}} named the file");
    std::fs::write(&jf, "[r]\nfilename=$FILE\nsize=1M\n").unwrap();
    assert_usage_error(&[jf.to_str().unwrap()], "${FILE}");
    std::fs::write(&jf, format!("[r]\nfilename={}\n", "x".repeat(100_000))).unwrap();
    assert_usage_error(&[jf.to_str().unwrap()], "at most 8192");
    assert_usage_error(
        &["--zonemode=zbd"],
        "--zonemode: zbd needs a zoned block device (host-managed or host-aware)",
    );
    let _ = std::fs::remove_file(&f);
    let _ = std::fs::remove_file(&jf);
}

/// A latency target every depth meets: the search doubles up to --iodepth, runs its last
/// window there and ends, long before --runtime.
#[test]
fn latency_target_search_climbs_to_iodepth() {
    let f = scratch("lattarget");
    let file = format!("--filename={}", f.display());
    let args = [
        "--name=lt",
        &file,
        "--direct=0",
        "--size=1M",
        "--rw=randread",
        "--iodepth=8",
        "--latency_target=10s",
        "--latency_window=100ms",
        "--time_based",
        "--runtime=60",
    ];
    let j = run_json(&[&args[..], &["--output-format=json"]].concat());
    let ran = j["loadgen"]["points"][0]["runtime_ms"].as_u64().unwrap();
    assert!(
        ran < 60_000,
        "the search ends the job before --runtime ({ran} ms)"
    );
    let job = &j["jobs"][0];
    let depths: Vec<u64> = job["loadgen"]["latency_search"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["depth"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [1, 2, 4, 8, 8]);
    assert_eq!(job["latency_depth"], 8);
    assert_eq!(job["latency_percentile"], 100.0);
    let o = loadgen(&args);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("found: depth 8,"), "{text}");
    let _ = std::fs::remove_file(&f);
}

/// GET /metrics with a 3 s deadline; the status code, or None without an answer.
fn scrape_status(addr: std::net::SocketAddr) -> Option<u16> {
    use promclient::{Client, Scheme, Url};
    let url = Url::of(Scheme::Http, addr);
    Client::default()
        .get(&url, "/metrics", &[], Duration::from_secs(3), 1 << 20)
        .ok()
        .map(|r| r.status)
}

/// A client that sends its request one byte at a time does not hold up other scrapes of
/// --metrics-address.
#[test]
fn a_trickling_client_does_not_block_live_metrics() {
    use std::io::Write;
    let f = scratch("trickle");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "run",
            &format!("--filename={}", f.display()),
            "--direct=0",
            "--size=1M",
            "--rate_iops=100",
            "--time_based",
            "--runtime=6s",
            &format!("--metrics-address={addr}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while scrape_status(addr) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "--metrics-address does not answer"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut trickler = std::net::TcpStream::connect(addr).unwrap();
    let trickling = std::thread::spawn(move || {
        for b in b"GET /metrics HTTP/1.1\r\n" {
            if trickler.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1500));
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let during = scrape_status(addr);
    let _ = child.wait();
    drop(trickling);
    let _ = std::fs::remove_file(&f);
    assert_eq!(during, Some(200), "a scrape while another client trickles");
}

/// How many of the pages of `path` are in the page cache (mincore over a mapping).
fn cached_pages(path: &std::path::Path) -> usize {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: a read-only shared mapping of an open file, unmapped before return; mincore
    // writes one byte per page of it into `vec`, which is that long.
    unsafe {
        let m = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(m, libc::MAP_FAILED);
        assert_eq!(libc::mincore(m, len, vec.as_mut_ptr()), 0);
        libc::munmap(m, len);
    }
    vec.iter().filter(|&&b| b & 1 == 1).count()
}

/// Drops `path`'s pages from the page cache (written back first).
fn uncache(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: fadvise on an open descriptor.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0);
}

/// Without `--direct`, as in fio, reads go through the page cache: the file's pages are
/// cached afterwards (mincore says so); with `--direct=1` they are not. Needs a filesystem
/// with a page cache apart from the file's storage (not tmpfs): the build's own directory.
#[test]
fn direct_is_off_by_default_as_in_fio() {
    let f = scratch("buffered");
    std::fs::write(&f, vec![7u8; 1 << 20]).unwrap();
    let file = format!("--filename={}", f.display());
    let read = |extra: &[&str]| {
        uncache(&f);
        assert_eq!(cached_pages(&f), 0, "fadvise dropped the file's pages");
        let mut args = vec![&file[..], "--rw=read", "--bs=64k", "--output-format=json"];
        args.extend_from_slice(extra);
        let j = run_json(&args);
        assert_eq!(j["jobs"][0]["read"]["io_bytes"], 1 << 20);
        cached_pages(&f)
    };
    let buffered = read(&[]);
    assert_eq!(buffered, 256, "every page read through the page cache");
    assert_eq!(read(&["--direct=0"]), 256);
    assert_eq!(read(&["--direct=1"]), 0, "O_DIRECT bypasses the page cache");
    std::fs::remove_file(&f).unwrap();
}

/// The storage check etcd's operators run: writes of 2300 bytes (no multiple of 512, which
/// O_DIRECT could not take) each followed by an fdatasync. loadgen counts the writes and
/// the fdatasyncs whose latencies it reports in `sync` as fio itself does, run alongside
/// (fio syncs every write but the last; `cargo xtask setup` installs fio).
#[test]
fn the_etcd_check_runs_with_fios_meaning() {
    let dir = scratch("etcd");
    std::fs::create_dir_all(&dir).unwrap();
    let d = format!("--directory={}", dir.display());
    let args = [
        "--name=etcd",
        &d,
        "--rw=write",
        "--ioengine=sync",
        "--fdatasync=1",
        "--size=230000",
        "--bs=2300",
        "--output-format=json",
    ];
    let counts = |j: &Value| {
        let job = &j["jobs"][0];
        (
            job["write"]["total_ios"].as_u64().unwrap(),
            job["write"]["io_bytes"].as_u64().unwrap(),
            job["sync"]["lat_ns"]["N"].as_u64().unwrap(),
        )
    };
    let lg = run_json(&args);
    assert_eq!(counts(&lg), (100, 230_000, 99));
    assert!(lg["jobs"][0]["sync"]["lat_ns"]["min"].as_u64().unwrap() > 0);
    let written = std::fs::metadata(dir.join("etcd.0.0")).unwrap().len();
    assert_eq!(written, 230_000);
    std::fs::remove_file(dir.join("etcd.0.0")).unwrap();
    let fio = Command::new("fio")
        .args(args)
        .output()
        .expect("fio runs (cargo xtask setup installs it)");
    assert!(
        fio.status.success(),
        "{}",
        String::from_utf8_lossy(&fio.stderr)
    );
    let fio: Value = serde_json::from_slice(&fio.stdout).expect("fio's JSON");
    assert_eq!(counts(&lg), counts(&fio), "loadgen and fio");
    std::fs::remove_dir_all(&dir).unwrap();
}
