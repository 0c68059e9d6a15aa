//! The controller's command line, split as fio splits `--client`: options before the first
//! `--client` are every host's; what follows a `--client` up to the next is that host's own
//! (`--client=a a.fio --client=b b.fio`). When only the last host has arguments of its own,
//! they are every host's (`--client=a --client=b job.fio`). A `--client` naming a file reads
//! one host per line from it; those hosts share what follows. Options about the run as a
//! whole (where reports and the record go, the clients themselves) stay on the controller.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use crate::options::table::{self, Arity};

/// Options the controller keeps: the hosts never see them.
const CONTROLLER_ONLY: &[&str] = &[
    "client",
    "client-token-file",
    "client-timeout",
    "output",
    "output-format",
    "minimal",
    "record",
    "eta",
    "status-interval",
    "metrics-address",
];

/// One host of the run: its name in reports and the record, where its job service listens,
/// and its job's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct HostJob {
    pub name: String,
    pub address: String,
    pub args: Vec<String>,
}

/// `[NAME=]HOST[:PORT]`: the name defaults to HOST, the port to the job service's.
pub fn parse_client(s: &str) -> Result<(String, String), String> {
    let s = s.trim();
    let (name, target) = match s.split_once('=') {
        Some((n, t)) => (Some(n.trim()), t.trim()),
        None => (None, s),
    };
    if name.is_some_and(|n| n.is_empty() || n.contains(char::is_whitespace)) {
        return Err(format!("`{s}`: the name before `=` is empty or has spaces"));
    }
    if target.is_empty() || target.contains(char::is_whitespace) || target.contains('/') {
        return Err(format!("`{s}`: give HOST, HOST:PORT or NAME=HOST:PORT"));
    }
    let (host, address) = if let Ok(sa) = target.parse::<SocketAddr>() {
        (sa.ip().to_string(), sa.to_string())
    } else if let Ok(ip) = target.trim_matches(['[', ']']).parse::<IpAddr>() {
        (
            ip.to_string(),
            SocketAddr::new(ip, super::DEFAULT_PORT).to_string(),
        )
    } else {
        match target.rsplit_once(':') {
            Some((h, p)) => {
                let port: u16 = p
                    .parse()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| format!("`{s}`: `{p}` is not a port"))?;
                (h.to_string(), format!("{h}:{port}"))
            }
            None => (
                target.to_string(),
                format!("{target}:{}", super::DEFAULT_PORT),
            ),
        }
    };
    Ok((name.unwrap_or(&host).to_string(), address))
}

/// The hosts of a `--client` value: one, or a file of them (one per line, `#` comments).
fn clients_of(value: &str) -> Result<Vec<(String, String)>, String> {
    let p = Path::new(value);
    if !p.is_file() {
        return Ok(vec![parse_client(value)?]);
    }
    let text = crate::files::read_text(p, crate::files::MAX_JOB_FILE)
        .map_err(|e| format!("--client {value}: {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if !line.is_empty() {
            out.push(parse_client(line).map_err(|e| format!("{value} line {}: {e}", i + 1))?);
        }
    }
    if out.is_empty() {
        return Err(format!("--client {value}: the file names no host"));
    }
    Ok(out)
}

/// The key of an option argument (`--key=v` or `--key`), as the table names it.
fn key_of(arg: &str) -> Option<(&'static str, bool)> {
    let body = arg.strip_prefix("--")?;
    let (key, inline) = match body.split_once('=') {
        Some((k, _)) => (k, true),
        None => (body, false),
    };
    let doc = table::lookup(key)?;
    Some((doc.name, inline || doc.arity == Arity::Flag))
}

/// Hosts (name, address) and the arguments they share.
type Group = (Vec<(String, String)>, Vec<String>);

/// Splits the command line into each host's job. Unknown options pass through: the hosts
/// parse their jobs with the same table and say what is wrong.
pub fn split(args: &[String]) -> Result<Vec<HostJob>, String> {
    let mut shared: Vec<String> = Vec::new();
    // Groups of hosts that share the arguments after their `--client`.
    let mut groups: Vec<Group> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let Some((key, complete)) = key_of(a) else {
            match groups.last_mut() {
                Some(g) => g.1.push(a.clone()),
                None => shared.push(a.clone()),
            }
            continue;
        };
        let mut taken = vec![a.clone()];
        if !complete && let Some(v) = args.get(i) {
            taken.push(v.clone());
            i += 1;
        }
        if key == "client" {
            let value = match a.split_once('=') {
                Some((_, v)) => v.to_string(),
                None => taken
                    .get(1)
                    .cloned()
                    .ok_or("--client needs a value (HOST[:PORT] or a file of hosts)")?,
            };
            groups.push((clients_of(&value)?, Vec::new()));
        } else if CONTROLLER_ONLY.contains(&key) {
            continue;
        } else {
            match groups.last_mut() {
                Some(g) => g.1.extend(taken),
                None => shared.extend(taken),
            }
        }
    }
    // `--client=a --client=b job.fio`: the last host's arguments are everyone's.
    if groups.len() > 1 && groups[..groups.len() - 1].iter().all(|g| g.1.is_empty()) {
        let last = groups.last_mut().map(|g| std::mem::take(&mut g.1));
        shared.extend(last.unwrap_or_default());
    }
    let mut hosts: Vec<HostJob> = Vec::new();
    for (clients, own) in groups {
        for (name, address) in clients {
            if hosts.iter().any(|h| h.name == name) {
                return Err(format!(
                    "--client: the name {name} is given twice (name hosts with NAME=HOST)"
                ));
            }
            let mut args = shared.clone();
            args.extend(own.iter().cloned());
            hosts.push(HostJob {
                name,
                address,
                args,
            });
        }
    }
    Ok(hosts)
}

/// The job files among a host's arguments (positional arguments, as `loadgen run` reads them).
pub fn job_files(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        match key_of(a) {
            Some((_, false)) => i += 1,
            Some(_) => {}
            None if !a.starts_with('-') => out.push(a.clone()),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn client_values() {
        let ok = |s: &str| parse_client(s).unwrap();
        assert_eq!(
            ok("198.18.0.1"),
            ("198.18.0.1".into(), "198.18.0.1:7481".into())
        );
        assert_eq!(
            ok("a=198.18.0.1:9000"),
            ("a".into(), "198.18.0.1:9000".into())
        );
        assert_eq!(ok("[::1]:9000"), ("::1".into(), "[::1]:9000".into()));
        assert_eq!(ok("node-1"), ("node-1".into(), "node-1:7481".into()));
        assert_eq!(ok("n=node-1:80"), ("n".into(), "node-1:80".into()));
        assert!(parse_client("node-1:x").unwrap_err().contains("not a port"));
        assert!(parse_client("=h").unwrap_err().contains("name before"));
        assert!(parse_client("").is_err());
    }

    #[test]
    fn shared_options_own_options_and_the_fio_form() {
        let hosts = split(&v(
            "--rw=write --runtime=5 --client a=198.18.0.1 --bs=4k --client=b=198.18.0.2 --bs=8k --output=x.json",
        ))
        .unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[0].args, v("--rw=write --runtime=5 --bs=4k"));
        assert_eq!(hosts[1].args, v("--rw=write --runtime=5 --bs=8k"));
        assert_eq!(hosts[1].address, "198.18.0.2:7481");
        // Only the last host has arguments: everyone's.
        let hosts = split(&v("--client=a=h1 --client=b=h2 job.fio --record r.json")).unwrap();
        assert_eq!(hosts[0].args, v("job.fio"));
        assert_eq!(hosts[1].args, v("job.fio"));
        assert!(
            split(&v("--client=a=h1 --client=a=h2"))
                .unwrap_err()
                .contains("given twice")
        );
    }

    #[test]
    fn a_hosts_file_names_hosts_that_share_what_follows() {
        let p = std::env::temp_dir().join(format!("loadgen-hosts-{}", std::process::id()));
        std::fs::write(
            &p,
            "# the cluster\na=198.18.0.1\n\nb=198.18.0.2:9000  # replica\n",
        )
        .unwrap();
        let hosts = split(&[format!("--client={}", p.display()), "--rw=read".into()]).unwrap();
        std::fs::write(&p, "a=198.18.0.1 oops\n").unwrap();
        let bad = split(&[format!("--client={}", p.display())]).unwrap_err();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(
            hosts
                .iter()
                .map(|h| (h.name.as_str(), h.address.as_str()))
                .collect::<Vec<_>>(),
            [("a", "198.18.0.1:7481"), ("b", "198.18.0.2:9000")]
        );
        assert!(hosts.iter().all(|h| h.args == v("--rw=read")));
        assert!(bad.contains("line 1"), "{bad}");
    }

    #[test]
    fn job_files_are_the_positional_arguments() {
        assert_eq!(
            job_files(&v("--rw write a.fio --bs=4k b.fio --group_reporting")),
            v("a.fio b.fio")
        );
    }
}
