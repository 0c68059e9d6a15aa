//! The replicas of a `loadgen run`: the `--replica*` options checked against the plan, one
//! volume name per local target, the factory that connects each job thread to every
//! replica, and the account of what failed.
//!
//! Volumes: a replica keeps one file per local target, so that it mirrors that target. The
//! name is the job name (characters outside `[A-Za-z0-9._-]` become `_`) and the number of
//! the first job thread using the target: `--name=db --numjobs=2` on one `--filename`
//! writes volume `db.0` on every replica; without `--filename` (one file per thread),
//! `db.0` and `db.1`.

use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;

use super::health::{Health, ReplicasFailed};
use super::legs::ReplicaLegs;
use crate::engine::legs::{ExtraLegs, LegsFactory, MAX_LEGS};
use crate::files::read_token;
use crate::options::Plan;
use crate::options::values::format_bytes;
use crate::target::Layout;
use replica::client::{BlockingClient, ClientOptions};
use replica::protocol::{BLOCK_ALIGN, MAX_PAYLOAD, MAX_VOLUME_LEN};

pub const DEFAULT_TIMEOUT_NS: u64 = 5_000_000_000;
/// Replicas one run can have: every IO has one local leg besides.
pub const MAX_REPLICAS: usize = MAX_LEGS - 1;

/// The name of the replica volume for job `job`, thread `jobnum`.
pub fn volume_name(job: &str, jobnum: u32) -> String {
    let suffix = format!(".{jobnum}");
    let mut name: String = job
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, '_');
    }
    // Every character is ASCII now, so truncating bytes keeps whole characters.
    name.truncate(MAX_VOLUME_LEN - suffix.len());
    name + &suffix
}

/// One volume name per job thread (indexed like `layout.threads`); refuses two targets
/// that would share a volume.
pub fn volumes(plan: &Plan, layout: &Layout) -> Result<Vec<String>, String> {
    let mut of_target: Vec<Option<String>> = vec![None; layout.targets.len()];
    let mut out = Vec::with_capacity(layout.threads.len());
    for t in &layout.threads {
        let name = match &of_target[t.target] {
            Some(n) => n.clone(),
            None => {
                let job = &plan.jobs[t.group].name;
                let n = match &plan.settings.replica_volume_prefix {
                    Some(p) => volume_name(&format!("{p}.{job}"), t.jobnum),
                    None => volume_name(job, t.jobnum),
                };
                if of_target.iter().flatten().any(|o| *o == n) {
                    return Err(format!(
                        "job {}: its target and another one would both be replica volume {n} (give the jobs names that differ in letters or digits)",
                        plan.jobs[t.group].name
                    ));
                }
                of_target[t.target] = Some(n.clone());
                n
            }
        };
        out.push(name);
    }
    Ok(out)
}

/// Everything the job threads need to replicate their writes.
pub struct Replicas {
    addrs: Arc<Vec<SocketAddr>>,
    token: Vec<u8>,
    timeout: Duration,
    volumes: Vec<String>,
    health: Arc<Vec<Health>>,
}

impl Replicas {
    /// The replicas of the plan, checked (None without `--replica`). Errors are usage
    /// errors, one line each.
    pub fn new(plan: &Plan, layout: &Layout) -> Result<Option<Replicas>, String> {
        let s = &plan.settings;
        if s.replicas.is_empty() {
            if s.replica_token_file.is_some() || s.replica_timeout_ns.is_some() {
                return Err(
                    "--replica_token_file and --replica_timeout need --replica ADDR:PORT".into(),
                );
            }
            return Ok(None);
        }
        if s.replicas.len() > MAX_REPLICAS {
            return Err(format!(
                "--replica: at most {MAX_REPLICAS} replicas, not {}",
                s.replicas.len()
            ));
        }
        for j in &plan.jobs {
            if let Some(&bs) =
                j.bs.iter()
                    .find(|&&b| b % BLOCK_ALIGN != 0 || b > MAX_PAYLOAD as u64)
            {
                return Err(format!(
                    "job {}: --bs={} cannot be replicated: replicas take multiples of {BLOCK_ALIGN} bytes up to {}",
                    j.name,
                    format_bytes(bs),
                    format_bytes(MAX_PAYLOAD as u64)
                ));
            }
        }
        let token = match &s.replica_token_file {
            Some(p) => {
                read_token(p).map_err(|e| e.replacen("--token-file", "--replica_token_file", 1))?
            }
            None => Vec::new(),
        };
        Ok(Some(Replicas {
            health: Arc::new(s.replicas.iter().map(|_| Health::default()).collect()),
            addrs: Arc::new(s.replicas.clone()),
            token,
            timeout: Duration::from_nanos(s.replica_timeout_ns.unwrap_or(DEFAULT_TIMEOUT_NS)),
            volumes: volumes(plan, layout)?,
        }))
    }

    /// Builds each job thread's legs: a connection to every replica, handshake done (none
    /// for a job that only reads).
    pub fn factory(self) -> LegsFactory {
        let this = Arc::new(self);
        Arc::new(move |spec| {
            let names = this.addrs.iter().map(|a| format!("replica {a}")).collect();
            let failed = ReplicasFailed {
                addrs: Arc::clone(&this.addrs),
                health: Arc::clone(&this.health),
            };
            let mut legs = ReplicaLegs::new(names, spec.iodepth, failed);
            if spec.read_pct < 100 {
                let opts = ClientOptions {
                    token: this.token.clone(),
                    volume: this.volumes[spec.index].clone(),
                    timeout: this.timeout,
                };
                for (i, &addr) in this.addrs.iter().enumerate() {
                    let (sock, conn) = BlockingClient::connect(addr, &opts)
                        .and_then(BlockingClient::into_parts)
                        .map_err(|e| anyhow!("replica {addr}: cannot connect: {}", e.cause))?;
                    legs.add_link(i, sock, conn);
                }
            }
            Ok(Box::new(legs) as Box<dyn ExtraLegs>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse::{Parsed, parse_args};
    use crate::options::values::{parse_addr, parse_timeout};
    use crate::target::Thread;
    use replica::protocol::valid_volume;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_addr("198.18.0.2:7480").unwrap().to_string(),
            "198.18.0.2:7480"
        );
        assert!(parse_addr("[fd00::2]:7480").is_ok());
        for bad in [
            "198.18.0.2",
            "host:7480",
            "198.18.0.2:0",
            "0.0.0.0:7480",
            "224.0.0.1:7480",
            "",
        ] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_timeout("5s"), Ok(5_000_000_000));
        assert_eq!(parse_timeout("2"), Ok(2_000_000_000));
        assert_eq!(parse_timeout("250ms"), Ok(250_000_000));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("2d").is_err());
        assert!(parse_timeout("soon").is_err());
    }

    #[test]
    fn volume_names_are_valid_and_readable() {
        assert_eq!(volume_name("db", 0), "db.0");
        assert_eq!(volume_name("rand write/1", 3), "rand_write_1.3");
        assert_eq!(volume_name(".hidden", 0), "_.hidden.0");
        assert_eq!(volume_name("", 1), "_.1");
        assert_eq!(volume_name("é", 1), "_.1");
        let long = volume_name(&"x".repeat(200), 12);
        assert_eq!(long.len(), MAX_VOLUME_LEN);
        assert!(long.ends_with(".12"));
        for v in ["db.0", "_.hidden.0", "_.1", long.as_str()] {
            assert!(valid_volume(v), "{v}");
        }
    }

    fn plan(args: &[&str]) -> Plan {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&v).unwrap() {
            Parsed::Plan(p) => *p,
            Parsed::Help => unreachable!(),
        }
    }

    fn layout(threads: &[(usize, u32, usize)], targets: usize) -> Layout {
        Layout {
            targets: (0..targets)
                .map(|i| crate::target::Target {
                    path: format!("/t{i}").into(),
                    open: format!("/t{i}").into(),
                    kind: crate::target::TargetKind::File,
                    size: 0,
                    logical_block: 512,
                    exists: false,
                    needed: 0,
                    written: true,
                    prep: Default::default(),
                })
                .collect(),
            threads: threads
                .iter()
                .map(|&(group, jobnum, target)| Thread {
                    group,
                    jobnum,
                    target,
                    region: 1 << 20,
                })
                .collect(),
        }
    }

    #[test]
    fn one_volume_per_target() {
        let p = plan(&["--name=db", "--name=log"]);
        // db's two threads share a file; log's two threads have one each.
        let l = layout(&[(0, 0, 0), (0, 1, 0), (1, 0, 1), (1, 1, 2)], 3);
        assert_eq!(
            volumes(&p, &l).unwrap(),
            vec!["db.0", "db.0", "log.0", "log.1"]
        );
        // Two jobs whose names differ only in characters a volume cannot hold.
        let p = plan(&["--name=a b", "--name=a/b"]);
        let l = layout(&[(0, 0, 0), (1, 0, 1)], 2);
        assert!(volumes(&p, &l).unwrap_err().contains("a_b.0"));
    }

    #[test]
    fn options_are_checked_against_the_plan() {
        let l = layout(&[(0, 0, 0)], 1);
        let ok = plan(&[
            "--replica=198.18.0.2:7480",
            "--replica",
            "198.18.0.3:7480",
            "--replica_timeout=2s",
            "--rw=randwrite",
        ]);
        let r = Replicas::new(&ok, &l).unwrap().unwrap();
        assert_eq!(r.addrs.len(), 2);
        assert_eq!(r.timeout, Duration::from_secs(2));
        assert_eq!(r.volumes, vec!["loadgen.0"]);
        assert!(Replicas::new(&plan(&["--rw=write"]), &l).unwrap().is_none());

        let err = |args: &[&str]| {
            let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            match parse_args(&v) {
                Err(e) => e,
                Ok(Parsed::Plan(p)) => Replicas::new(&p, &l).err().expect("refused"),
                Ok(Parsed::Help) => unreachable!(),
            }
        };
        assert!(err(&["--replica=nowhere"]).contains("--replica: `nowhere`"));
        assert!(err(&["--replica=198.18.0.2:1", "--replica=198.18.0.2:1"]).contains("twice"));
        assert!(err(&["--replica_timeout=5s"]).contains("need --replica"));
        assert!(err(&["--replica=198.18.0.2:1", "--replica_timeout=0"]).contains("1ms"));
        assert!(err(&["--replica=198.18.0.2:1", "--bs=2m"]).contains("up to 1m"));
        assert!(
            err(&["--replica=198.18.0.2:1", "--bs=1000", "--direct=0"])
                .contains("multiples of 512")
        );
        assert!(
            err(&[
                "--replica=198.18.0.2:1",
                "--replica_token_file=/nonexistent/stornet-token"
            ])
            .contains("--replica_token_file /nonexistent/stornet-token")
        );
        let many: Vec<String> = (1..=8)
            .map(|i| format!("--replica=198.18.0.{i}:7480"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(err(&many).contains("at most 7"));
    }

    #[test]
    fn failure_message_sums_over_connections() {
        let addrs: Arc<Vec<SocketAddr>> = Arc::new(vec![
            "198.18.0.2:7480".parse().unwrap(),
            "198.18.0.3:7480".parse().unwrap(),
        ]);
        let health: Arc<Vec<Health>> = Arc::new(vec![Health::default(), Health::default()]);
        let e = ReplicasFailed {
            addrs,
            health: Arc::clone(&health),
        };
        health[1].record(&"connection closed by the replica", 16, true);
        health[1].record(&"connection reset by peer", 9, true);
        assert_eq!(
            e.to_string(),
            "replica 198.18.0.3:7480 failed: connection closed by the replica; 25 write(s) failed on 2 connections"
        );
        health[0].record(
            &"write at offset 4096 failed on the replica: I/O error",
            1,
            false,
        );
        assert!(e.to_string().starts_with(
            "replica 198.18.0.2:7480 failed: write at offset 4096 failed on the replica: I/O error; 1 write(s) failed; replica 198.18.0.3:7480"
        ));
    }
}
