//! fio's value syntax: sizes (`4k`, `1G`, `512`, `50%`), times (`60` is seconds, `500ms`,
//! `2m`), booleans (`1`, `0`, `true`, `on`), and comma-separated lists for sweeps.

use std::net::SocketAddr;

use promclient::Url;
pub use record::units::{excerpt, format_bytes, parse_time_ns};
use serde::{Deserialize, Serialize};

/// A size as fio accepts it: bytes, or a percentage of the target's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizeSpec {
    Bytes(u64),
    Percent(u8),
}

/// Parses a byte count. Unit letters are powers of 1024, as in fio (`kb_base=1024`):
/// `4k`, `4K`, `4kb`, `4KiB` are all 4096.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(format!(
            "`{}` is not a size (examples: 4096, 4k, 1M, 2G)",
            excerpt(s)
        ));
    }
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| format!("`{}` is too large", excerpt(s)))?;
    let unit = t[digits..].to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        _ => {
            return Err(format!(
                "`{}` has an unknown size unit `{unit}` (use k, m, g, t or p)",
                excerpt(s)
            ));
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{}` is too large", excerpt(s)))
}

/// A size, or a percentage (`50%`) of the target.
pub fn parse_size(s: &str) -> Result<SizeSpec, String> {
    if let Some(p) = s.trim().strip_suffix('%') {
        let v: u8 = p
            .parse()
            .map_err(|_| format!("`{}` is not a percentage from 1% to 100%", excerpt(s)))?;
        if v == 0 || v > 100 {
            return Err(format!(
                "`{}` is not a percentage from 1% to 100%",
                excerpt(s)
            ));
        }
        return Ok(SizeSpec::Percent(v));
    }
    parse_bytes(s).map(SizeSpec::Bytes)
}

/// A boolean as fio writes it; a flag given without a value is true.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("`{}` is not a boolean (use 1 or 0)", excerpt(s))),
    }
}

/// A non-negative integer; `k` and `m` suffixes multiply by 1000 and 1,000,000.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) = if let Some(n) = t.strip_suffix('k') {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1_000_000)
    } else {
        (t.as_str(), 1)
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("`{}` is not a whole number", excerpt(s)))
}

/// A comma-separated list (a sweep), each item parsed by `item`.
pub fn parse_list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let v = s
        .split(',')
        .map(|x| item(x.trim()))
        .collect::<Result<Vec<T>, String>>()?;
    if v.is_empty() {
        return Err("empty list".into());
    }
    Ok(v)
}

/// `--replica`: an IP address and a port (`198.18.0.2:7480`, `[fd00::2]:7480`).
pub fn parse_addr(v: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = v
        .trim()
        .parse()
        .map_err(|_| format!("`{v}` is not an IP address with a port (e.g. 198.18.0.2:7480)"))?;
    if addr.port() == 0 {
        return Err(format!("`{v}` has port 0"));
    }
    if addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(format!("`{v}` is not the address of one host"));
    }
    Ok(addr)
}

/// `--replica_timeout`: fio's time syntax, from 1ms to a day.
pub fn parse_timeout(v: &str) -> Result<u64, String> {
    let t = parse_time_ns(v)?;
    if !(1_000_000..=86_400_000_000_000).contains(&t) {
        return Err(format!("`{v}` is not between 1ms and 1d"));
    }
    Ok(t)
}

/// One `--agent [NAME=]URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSpec {
    /// The host's name in the record and the analysis (default: `host:port` of the URL).
    pub name: String,
    pub url: Url,
}

impl AgentSpec {
    /// Parses `http://HOST:PORT[/path]` or `NAME=http://...`; the path defaults to
    /// `/metrics`.
    pub fn parse(s: &str) -> Result<AgentSpec, String> {
        let (name, url) = match s.split_once('=') {
            Some((n, u)) if !n.contains("://") => (Some(n.trim()), u.trim()),
            _ => (None, s.trim()),
        };
        if name.is_some_and(str::is_empty) {
            return Err(format!("`{s}`: empty name before `=`"));
        }
        let mut url = Url::parse(url)?;
        if url.path.is_empty() {
            url.path = "/metrics".into();
        }
        Ok(AgentSpec {
            name: name.map_or_else(|| url.authority(), str::to_string),
            url,
        })
    }

    /// The host's address when the URL names it by IP (not loopback).
    pub fn address(&self) -> Option<String> {
        let ip: std::net::IpAddr = self.url.host.parse().ok()?;
        (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_specs_take_an_optional_name() {
        let a = AgentSpec::parse("http://198.18.0.2:9477").unwrap();
        assert_eq!(a.name, "198.18.0.2:9477");
        assert_eq!(a.url.path, "/metrics");
        assert_eq!(a.address().as_deref(), Some("198.18.0.2"));
        let a = AgentSpec::parse("h1=http://127.0.0.1:9477/custom").unwrap();
        assert_eq!(a.name, "h1");
        assert_eq!(a.url.path, "/custom");
        assert_eq!(a.address(), None, "loopback says nothing about the host");
        assert!(AgentSpec::parse("=http://h:1").is_err());
        assert!(AgentSpec::parse("h1=198.18.0.2:9477").is_err());
        assert!(AgentSpec::parse("ftp://h:1").is_err());
        let a = AgentSpec::parse("https://stor1:9477").unwrap();
        assert_eq!(a.url.display(), "https://stor1:9477/metrics");
    }

    #[test]
    fn sizes_follow_fio() {
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("4kb"), Ok(4096));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("512"), Ok(512));
        assert_eq!(parse_size("50%"), Ok(SizeSpec::Percent(50)));
        assert!(parse_bytes("4x").is_err());
        assert!(parse_bytes("k").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
        assert!(parse_bytes("16777216t").is_err());
        assert!(parse_size("0%").is_err());
        assert!(parse_size("101%").is_err());
    }

    #[test]
    fn times_default_to_seconds() {
        assert_eq!(parse_time_ns("60"), Ok(60_000_000_000));
        assert_eq!(parse_time_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_time_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_time_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_time_ns("250us"), Ok(250_000));
        assert!(parse_time_ns("1y").is_err());
        assert!(parse_time_ns("abc").is_err());
    }

    #[test]
    fn bools_counts_lists() {
        assert_eq!(parse_bool("1"), Ok(true));
        assert_eq!(parse_bool("off"), Ok(false));
        assert!(parse_bool("2").is_err());
        assert_eq!(parse_count("10k"), Ok(10_000));
        assert_eq!(parse_count("500"), Ok(500));
        assert!(parse_count("-1").is_err());
        assert_eq!(
            parse_list("4k, 16k,64k", parse_bytes),
            Ok(vec![4096, 16384, 65536])
        );
        assert!(parse_list("4k,,8k", parse_bytes).is_err());
        assert_eq!(format_bytes(131072), "128k");
        assert_eq!(format_bytes(1000), "1000");
        assert_eq!(excerpt("a\nb"), "a b");
        assert_eq!(excerpt(&"x".repeat(500)).len(), 60);
    }
}
